//! Experiment A's slot mechanics: every decision of a slot is made on the host state as it
//! was at the start of the slot (no copy: all decisions read the unchanged hosts, then the
//! claims are applied), and the slot's claims resolve in random order; a claim that no
//! longer fits is declined. One attempt per request.

use super::apsr::ApsrScheduler;
use super::index::RankIndex;
use super::policy;
use parasol::domain::{HostState, RequestContext};
use parasol::policy::{Algorithm, FilterEnv, Policy, RankArgs, TieBreak};
use rand::seq::SliceRandom;
use rand::Rng;

/// How a scheduler decides: the library policy on a full snapshot (n queries per decision),
/// or APSR on a d-sample (d queries). [`Slots::new`] turns a snapshot decider into an indexed
/// one: the same decisions without reading every host (see `index`).
pub enum Decider {
    Snapshot(Policy),
    Indexed(Box<RankIndex>),
    Apsr(Box<ApsrScheduler>),
}

impl Decider {
    /// A full-snapshot decider ranking with `algorithm`, equal keys in host order (docs/architecture.md §5:
    /// experiment A).
    pub fn snapshot(algorithm: Algorithm) -> Self {
        Decider::Snapshot(policy::build(algorithm, TieBreak::HostOrder))
    }

    fn decide(
        &mut self,
        hosts: &[HostState],
        flavor: usize,
        req: &RequestContext,
        rng: &mut impl Rng,
        out: &mut Vec<usize>,
    ) -> (Option<usize>, u64) {
        let env = FilterEnv::without_heartbeats();
        match self {
            Decider::Indexed(index) => (index.pick(flavor, rng), hosts.len() as u64),
            Decider::Snapshot(policy) => {
                let pick = match policy.rank(
                    hosts,
                    RankArgs {
                        req,
                        env: &env,
                        max: 1,
                    },
                    rng,
                    out,
                ) {
                    Ok(()) => out.first().copied(),
                    Err(_) => None,
                };
                (pick, hosts.len() as u64)
            }
            Decider::Apsr(apsr) => apsr.decide(hosts, req, &env, rng, out),
        }
    }
}

/// The outcome of one claim of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimResult {
    /// Position of the request in the slot's batch (the order schedulers dequeued them).
    pub position: usize,
    /// The host decided on; `None` when the scheduler found no host with room.
    pub host: Option<usize>,
    pub placed: bool,
}

/// The hosts, the decider and the counters of one experiment-A run.
pub struct Slots<'a> {
    pub hosts: Vec<HostState>,
    contexts: &'a [RequestContext],
    pub decider: Decider,
    results: Vec<ClaimResult>,
    ranked: Vec<usize>,
    pub attempts: u64,
    pub declines: u64,
    pub queries: u64,
}

impl<'a> Slots<'a> {
    /// `contexts[f]` is the scheduling context of flavor `f`. A snapshot decider is indexed.
    pub fn new(hosts: Vec<HostState>, contexts: &'a [RequestContext], decider: Decider) -> Self {
        let decider = match decider {
            Decider::Snapshot(policy) => {
                Decider::Indexed(Box::new(RankIndex::new(policy, contexts, &hosts)))
            }
            d => d,
        };
        Self::scanning(hosts, contexts, decider)
    }

    /// [`Slots::new`] without indexing a snapshot decider: every decision reads every host
    /// (what the index must agree with).
    pub fn scanning(
        hosts: Vec<HostState>,
        contexts: &'a [RequestContext],
        decider: Decider,
    ) -> Self {
        Slots {
            hosts,
            contexts,
            decider,
            results: Vec::new(),
            ranked: Vec::new(),
            attempts: 0,
            declines: 0,
            queries: 0,
        }
    }

    /// One slot: one scheduler per request of `batch` (flavor indices) decides on the
    /// slot-start state, then the claims resolve in an order drawn from `claim_rng`.
    pub fn run_slot(
        &mut self,
        batch: &[u16],
        decide_rng: &mut impl Rng,
        claim_rng: &mut impl Rng,
    ) -> &[ClaimResult] {
        self.results.clear();
        for (position, flavor) in batch.iter().enumerate() {
            let req = &self.contexts[*flavor as usize];
            let (host, queries) = self.decider.decide(
                &self.hosts,
                *flavor as usize,
                req,
                decide_rng,
                &mut self.ranked,
            );
            self.queries += queries;
            self.results.push(ClaimResult {
                position,
                host,
                placed: false,
            });
        }
        self.results.shuffle(claim_rng);
        for r in self.results.iter_mut() {
            let demand = &self.contexts[batch[r.position] as usize].demand;
            if let Some(h) = r.host {
                let host = &mut self.hosts[h];
                if host.fits(demand) {
                    host.consume(demand);
                    r.placed = true;
                    if let Decider::Indexed(index) = &mut self.decider {
                        index.update(h, host);
                    }
                }
            }
            self.attempts += 1;
            if !r.placed {
                self.declines += 1;
            }
        }
        &self.results
    }
}

#[cfg(test)]
mod tests;
