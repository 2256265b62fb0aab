//! A multi-create's alternates as Nova 34's `SchedulerManager._get_alternate_hosts` makes
//! them (docs/architecture.md §3): once every instance of the call is placed and its claim
//! consumed, one more filter-and-weigh pass — with the last instance's request and every
//! selected host a member of its server group — gives one ranked list, and each instance's
//! alternates are the hosts of that list in its selected host's cell that no instance of the
//! call was placed on, at most `max_attempts − 1`. The pass's capacity filter stands for
//! Nova's "a remaining allocation candidate"; with filter or weigh plugins, only hosts they
//! kept for an instance of the call are alternates. A single instance keeps the alternates of its
//! own ranking (Nova's index 0: no second pass), so single calls never pay for this — but
//! for a ranking of every host when the first `max_attempts` hold too few of the pick's cell.

use super::batch::EVERY_HOST;
use super::{Alternates, Backend, Call, WorkerState};
use crate::domain::{CallClaims, HostId, HostState, RequestContext};
use crate::policy::{FilterEnv, RankArgs};
use crate::stats::Counts;
use std::sync::Arc;

impl Backend {
    /// Fills the alternates of every instance of a placed multi-create (`placed`: the
    /// selected host of each first) from one pass over `worker`'s host source.
    pub(super) fn multi_create_alternates(
        &self,
        worker: &mut WorkerState,
        call: Call<'_>,
        placed: &mut [Vec<HostState>],
        counts: &mut Counts,
    ) {
        // With filter or weigh plugins, each instance's list holds every candidate they kept
        // for it: only those may be alternates (the plugins are asked once per instance).
        let approved: Option<Vec<HostId>> = self
            .deps
            .plugins
            .has_candidate_plugins()
            .then(|| placed.iter().flatten().map(|h| h.id).collect());
        for selection in placed.iter_mut() {
            selection.truncate(1);
        }
        let keep = self.deps.settings.scheduler.max_attempts.saturating_sub(1);
        let (Some(last), true) = (call.requests.last(), call.requests.len() > 1) else {
            return;
        };
        if keep == 0 || call.alternates == Alternates::Unwanted || last.rebuild {
            return;
        }
        let selected: Vec<HostState> = placed.iter().filter_map(|s| s.first().cloned()).collect();
        let request = after_the_call(call.requests, &selected);
        let mut ranked = self.final_ranking(worker, &request, &selected, keep, counts);
        if let Some(approved) = approved {
            ranked.retain(|h| approved.contains(&h.id));
        }
        let taken: Vec<HostId> = selected.iter().map(|h| h.id).collect();
        let pack = self.pack();
        for (i, selection) in placed.iter_mut().enumerate() {
            let Some(host) = selection.first() else {
                continue;
            };
            let cell = self.cell_of(host).to_string();
            let alternates: Vec<HostState> = ranked
                .iter()
                .filter(|h| !taken.contains(&h.id) && self.cell_of(h) == cell)
                .take(keep)
                .cloned()
                .collect();
            if let Some(instance) = call.requests.get(i) {
                super::trees::pick_alternates(&request, &instance.instance_uuid, &alternates, pack);
            }
            selection.extend(alternates);
        }
    }

    /// The pass: the hosts that pass the filters for `request`, best first (the pick among
    /// the top `host_subset_size` first, as Nova's `_get_sorted_hosts`), enough of them for
    /// `keep` alternates per selected host's cell once the selected hosts are left out —
    /// every host when a cell's are not among the first `keep` + (selected hosts). None when
    /// no host passes.
    fn final_ranking(
        &self,
        worker: &mut WorkerState,
        request: &RequestContext,
        selected: &[HostState],
        keep: usize,
        counts: &mut Counts,
    ) -> Vec<HostState> {
        let env = FilterEnv::new(self.deps.clock.now_ms(), &self.deps.settings.policy);
        let mut max = keep + selected.len();
        loop {
            let args = RankArgs {
                req: request,
                env: &env,
                max,
            };
            // Placement's candidates' hosts for a request on provider trees: an alternate
            // needs a candidate of its own.
            let Ok(ranked) = self.ranked(worker, args, counts) else {
                return Vec::new();
            };
            if ranked.len() < max
                || max == EVERY_HOST
                || self.source.is_sample()
                || self.every_cell_served(&ranked, selected, keep)
            {
                return ranked;
            }
            max = EVERY_HOST;
        }
    }

    /// The ranked `candidates` an instance's claims go through: in a multi-create (`multi`)
    /// without the hosts the call's earlier instances left without room for it (Placement
    /// would refuse the claim; Nova moves on); for a single instance, with enough of the
    /// pick's cell for its alternates ([`Backend::with_cell_alternates`]; not with filter or
    /// weigh plugins, which see the top K only, never every host).
    pub(super) fn claimable(
        &self,
        worker: &mut WorkerState,
        args: RankArgs,
        mut candidates: Vec<HostState>,
        multi: bool,
        counts: &mut Counts,
    ) -> Vec<HostState> {
        let req = args.req;
        if multi {
            if req.call_claims.is_some() {
                candidates.retain(|h| !req.fitted_before_the_call(h) || h.fits(&req.demand));
            }
            return candidates;
        }
        if self.deps.plugins.has_candidate_plugins() {
            return candidates;
        }
        self.with_cell_alternates(worker, args, candidates, counts)
    }

    /// A single instance's `candidates`, ranked for `args` with at most `args.max`: when
    /// the list was cut there and holds fewer than `max_attempts − 1` hosts of the pick's
    /// cell after it (a cloud of several cells), the same ranking of every host, so that its
    /// alternates are those Nova's whole sorted list gives. A sample is what it is.
    fn with_cell_alternates(
        &self,
        worker: &mut WorkerState,
        args: RankArgs,
        candidates: Vec<HostState>,
        counts: &mut Counts,
    ) -> Vec<HostState> {
        let keep = self.deps.settings.scheduler.max_attempts.saturating_sub(1);
        let Some(pick) = candidates.first() else {
            return candidates;
        };
        if candidates.len() < args.max || args.max == EVERY_HOST || self.source.is_sample() {
            return candidates;
        }
        let cell = self.cell_of(pick);
        let same = candidates[1..].iter().filter(|h| self.cell_of(h) == cell);
        if same.count() >= keep {
            return candidates;
        }
        let every = RankArgs {
            max: EVERY_HOST,
            ..args
        };
        match self.ranked(worker, every, counts) {
            Ok(ranked) => ranked,
            Err(_) => candidates,
        }
    }

    /// Whether `ranked` holds `keep` hosts that are not selected in each selected host's cell.
    fn every_cell_served(&self, ranked: &[HostState], selected: &[HostState], keep: usize) -> bool {
        selected.iter().all(|s| {
            let cell = self.cell_of(s);
            let others = ranked
                .iter()
                .filter(|h| self.cell_of(h) == cell && !selected.iter().any(|t| t.id == h.id));
            others.count() >= keep
        })
    }
}

/// The request of the pass: the last instance's, with every claim of the call recorded (the
/// hosts it filled are weighed, as Nova weighs them; being selected, they are never
/// alternates) and its server group holding every selected host (Nova's
/// `_consume_selected_host` appended each to the group's hosts and put each instance on its
/// host): a member on each, and the last instance's own host its own — as in Nova, where that
/// instance's uuid is on its host, whose anti-affinity check passes. The first request's
/// group is the one no instance of the call was added to.
fn after_the_call(requests: &[RequestContext], selected: &[HostState]) -> RequestContext {
    let last = requests.len() - 1;
    let mut request = requests[last].clone();
    request.group = requests[0].group.clone();
    let mut taken = CallClaims::default();
    for (host, req) in selected.iter().zip(requests) {
        taken.add(host.id, req.demand);
        if let Some(c) = super::trees::chosen(req, host) {
            taken.add_candidate(host.id, c.body.clone());
        }
    }
    request.call_claims = Some(Arc::new(taken));
    if let Some(group) = request.group.as_mut() {
        for (i, host) in selected.iter().enumerate() {
            let name = host.host();
            if i < last {
                group.add_member_on(name);
                continue;
            }
            if !group.hosts.iter().any(|h| **h == **name) {
                group.hosts.push(name.to_string());
            }
            group.own_hosts.push(name.to_string());
        }
    }
    request
}
