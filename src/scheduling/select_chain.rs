//! The `select` plugin chain of a call (docs/plugins.md §2): shown the call as Nova asked it,
//! before any decision or claim, it approves, adds constraints, or denies with a reason that
//! the caller gets as NoValidHost's. And the `claimed` chain, told the call's claims after
//! they hold.

use super::{Scheduler, SelectError};
use crate::domain::{GroupPolicy, HostState, RequestContext, Resources};
use crate::nova::SelectDestinationsArgs;
use crate::plugins::{additive_view, Additions, Chains, SelectRequest};
use serde_json::{json, Value};

impl Scheduler {
    /// Runs the `select` chain over the call (none for a rebuild check, which Nova decides
    /// on the instance's own host alone): what it added to every instance's request, or the
    /// call's NoValidHost naming the plugin that denied it or failed.
    pub(super) async fn select_chain(
        &self,
        plugins: &Chains,
        args: &SelectDestinationsArgs,
        requests: &[RequestContext],
    ) -> Result<Additions, SelectError> {
        let Some(first) = requests.first() else {
            return Ok(Additions::default());
        };
        if !plugins.has_select() || args.spec.is_rebuild() {
            return Ok(Additions::default());
        }
        Box::pin(plugins.select(select_view(args, first)))
            .await
            .map_err(|stopped| SelectError::Denied {
                reason: stopped.to_string(),
            })
    }
}

/// Queues a placed call's claims for the `claimed` plugins (nothing for a rebuild check, which
/// claims nothing, or a call without instance uuids); never waits for them.
pub(super) fn tell_claimed(
    plugins: &Chains,
    args: &SelectDestinationsArgs,
    per_instance: &[Vec<HostState>],
    demands: &[Resources],
) {
    if !plugins.has_claimed() || args.spec.is_rebuild() || args.instance_uuids.is_empty() {
        return;
    }
    let spec = &args.spec;
    let request = json!({
        "instance_uuids": args.instance_uuids, "num_instances": spec.num_instances,
        "project_id": spec.project_id, "user_id": spec.user_id, "flavor_name": spec.flavor.name,
    });
    let claims: Vec<Value> = args
        .instance_uuids
        .iter()
        .zip(per_instance)
        .zip(demands)
        .filter_map(|((uuid, hosts), demand)| {
            let host = hosts.first()?;
            Some(json!({
                "instance_uuid": uuid, "uuid": &*host.profile.uuid, "host": &**host.host(),
                "node": &**host.node(), "resources": demand.to_map(),
            }))
        })
        .collect();
    plugins.claimed(request, Value::Array(claims));
}

/// The call as a `select` plugin sees it: Nova's RequestSpec in plain JSON (what it may not
/// change) and the constraints of Nova's resource request (what it may add to).
fn select_view(args: &SelectDestinationsArgs, first: &RequestContext) -> SelectRequest {
    let spec = &args.spec;
    let f = &spec.flavor;
    let mut m = additive_view(first);
    m.insert("instance_uuids".into(), json!(args.instance_uuids));
    m.insert("num_instances".into(), json!(spec.num_instances));
    m.insert("project_id".into(), json!(spec.project_id));
    m.insert("user_id".into(), json!(spec.user_id));
    m.insert("availability_zone".into(), json!(spec.availability_zone));
    m.insert(
        "flavor".into(),
        json!({
            "name": f.name, "flavorid": f.flavorid, "vcpus": f.vcpus, "memory_mb": f.memory_mb,
            "root_gb": f.root_gb, "ephemeral_gb": f.ephemeral_gb, "swap": f.swap,
            "extra_specs": f.extra_specs,
        }),
    );
    m.insert("resources".into(), json!(first.demand.to_map()));
    let image = spec
        .image
        .as_ref()
        .map(|i| json!({"id": i.id, "name": i.name, "properties": i.truthy_text}));
    m.insert("image".into(), image.unwrap_or(Value::Null));
    let group = spec.instance_group.as_ref().map(
        |g| json!({"policy": g.policy.map(policy_name), "members": g.members, "hosts": g.hosts}),
    );
    m.insert("group".into(), group.unwrap_or(Value::Null));
    m.insert("scheduler_hints".into(), json!(spec.scheduler_hints));
    SelectRequest(m)
}

/// Nova's name of a server-group policy.
fn policy_name(policy: GroupPolicy) -> &'static str {
    match policy {
        GroupPolicy::Affinity => "affinity",
        GroupPolicy::AntiAffinity => "anti-affinity",
        GroupPolicy::SoftAffinity => "soft-affinity",
        GroupPolicy::SoftAntiAffinity => "soft-anti-affinity",
    }
}
