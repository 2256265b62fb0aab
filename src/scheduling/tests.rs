//! `Scheduler::select` on a real SQLite ledger: server groups counted from the ledger's
//! allocations, and the rebuild check.

use super::*;
use crate::clock::{ManualClock, SharedClock};
use crate::configuration::Settings;
use crate::ledger::{HostRegistration, Ledger};
use crate::nova::SelectDestinationsArgs;
use crate::stats::Stats;
use serde_json::{json, Value};
use std::sync::Arc;

const NOW_MS: i64 = 1_000_000;

fn object(name: &str, version: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": version, "nova_object.data": data})
}

/// A `select_destinations` call for `instance` of flavor (vcpus, memory_mb) in an
/// anti-affinity group whose members are `members` on `hosts`, with the group's `_rules`
/// and the spec's other fields from `extra`.
pub(super) fn call(
    instance: &str,
    vcpus: i64,
    members: &[&str],
    hosts: &[&str],
    rules: Value,
    extra: Value,
) -> SelectDestinationsArgs {
    let flavor = object(
        "Flavor",
        "1.2",
        json!({"name": format!("f{vcpus}"), "vcpus": vcpus, "memory_mb": 512, "root_gb": 1}),
    );
    let group = object(
        "InstanceGroup",
        "1.11",
        json!({"policy": "anti-affinity",
        "members": members, "hosts": hosts, "_rules": rules}),
    );
    let mut data = json!({"flavor": flavor, "instance_uuid": instance, "num_instances": 1,
        "instance_group": group, "scheduler_hints": {"group": ["g"]},
        "project_id": "p", "user_id": "u"});
    for (k, v) in extra.as_object().unwrap() {
        data[k] = v.clone();
    }
    let body = json!({"spec_obj": object("RequestSpec", "1.14", data),
        "instance_uuids": [instance], "return_objects": true, "return_alternates": false});
    SelectDestinationsArgs::from_http_body(body.to_string().as_bytes()).unwrap()
}

fn uuid(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

pub(super) async fn scheduler(dir: &tempfile::TempDir) -> Scheduler {
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let ledger = Ledger::open(&url, 2).await.unwrap();
    for (name, n) in [("host1", 1), ("host2", 2)] {
        let reg = HostRegistration::simple(name, &uuid(100 + n), 4, 8192, 100);
        ledger.register_host(&reg, NOW_MS).await.unwrap();
    }
    let clock: SharedClock = Arc::new(ManualClock::new(NOW_MS));
    let mut settings = Settings::default();
    settings.scheduler.seed = Some(7);
    let stats = Arc::new(Stats::new(clock.clone(), 60));
    Scheduler::start(Arc::new(settings), ledger, stats, clock)
        .await
        .unwrap()
}

async fn host_of(s: &Scheduler, args: SelectDestinationsArgs) -> Result<String, SelectError> {
    let answer = s.select(args).await?;
    Ok(answer.selections[0][0].service_host.clone())
}

#[tokio::test]
async fn anti_affinity_counts_members_from_the_ledger_and_never_the_instance_itself() {
    let dir = tempfile::tempdir().unwrap();
    let s = scheduler(&dir).await;
    let (a, b) = (uuid(1), uuid(2));
    let first = host_of(&s, call(&a, 1, &[&a], &[], json!({}), json!({})))
        .await
        .unwrap();
    let second = host_of(&s, call(&b, 1, &[&a, &b], &[&first], json!({}), json!({})))
        .await
        .unwrap();
    assert_ne!(first, second, "members spread");
    // A third member has no host left.
    let c = uuid(3);
    let refused = host_of(
        &s,
        call(
            &c,
            1,
            &[&a, &b, &c],
            &[&first, &second],
            json!({}),
            json!({}),
        ),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(refused, SelectError::NoValidHost { .. }),
        "{refused}"
    );
    // Resizing b (to the same host allowed): its own host passes, the other member's does
    // not; the resize's claim replaces b's allocation there.
    let resized = host_of(
        &s,
        call(&b, 2, &[&a, &b], &[&first, &second], json!({}), json!({})),
    )
    .await
    .unwrap();
    assert_eq!(resized, second);
    let held = s.ledger().allocation(&b).await.unwrap().unwrap();
    assert_eq!(held.demand.get(crate::domain::ClassId::VCPU), 2);
}

#[tokio::test]
async fn max_server_per_host_from_the_groups_rules_allows_that_many_members_per_host() {
    let dir = tempfile::tempdir().unwrap();
    let s = scheduler(&dir).await;
    let rules = json!({"max_server_per_host": "2"});
    let mut members: Vec<String> = Vec::new();
    let mut placed: Vec<String> = Vec::new();
    for n in 1..=5u32 {
        let id = uuid(n);
        members.push(id.clone());
        let m: Vec<&str> = members.iter().map(String::as_str).collect();
        let mut hosts: Vec<&str> = placed.iter().map(String::as_str).collect();
        hosts.sort();
        hosts.dedup();
        let answer = host_of(&s, call(&id, 1, &m, &hosts, rules.clone(), json!({}))).await;
        if n <= 4 {
            placed.push(answer.unwrap());
        } else {
            assert!(
                matches!(answer, Err(SelectError::NoValidHost { .. })),
                "{answer:?}"
            );
        }
    }
    placed.sort();
    assert_eq!(placed, vec!["host1", "host1", "host2", "host2"]);
}

#[tokio::test]
async fn a_rebuild_checks_the_forced_host_without_claiming_or_counting_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let s = scheduler(&dir).await;
    let (a, b) = (uuid(1), uuid(2));
    let first = host_of(&s, call(&a, 1, &[&a], &[], json!({}), json!({})))
        .await
        .unwrap();
    let second = host_of(&s, call(&b, 4, &[&a, &b], &[&first], json!({}), json!({})))
        .await
        .unwrap();
    let before = s.ledger().stored_allocations().await.unwrap();
    // b's host is full (b holds all 4 VCPU) and runs a member: a rebuild there still passes,
    // as in Nova (no Placement query, the group filters do not run on a rebuild).
    let rebuild = json!({"force_hosts": [second], "force_nodes": [second],
        "scheduler_hints": {"group": ["g"], "_nova_check_type": ["rebuild"]}});
    let answer = s
        .select(call(
            &b,
            4,
            &[&a, &b],
            &[&first, &second],
            json!({}),
            rebuild,
        ))
        .await
        .unwrap();
    assert_eq!(answer.selections.len(), 1);
    assert_eq!(answer.selections[0][0].service_host, second);
    assert_eq!(
        s.ledger().stored_allocations().await.unwrap(),
        before,
        "nothing claimed"
    );
    // Forced onto the other member's host, it is still only that host: no other is offered.
    let elsewhere = json!({"force_hosts": [first],
        "scheduler_hints": {"group": ["g"], "_nova_check_type": ["rebuild"]}});
    let answer = s
        .select(call(
            &b,
            4,
            &[&a, &b],
            &[&first, &second],
            json!({}),
            elsewhere,
        ))
        .await
        .unwrap();
    assert_eq!(answer.selections[0].len(), 1);
    assert_eq!(answer.selections[0][0].service_host, first);
    assert_eq!(s.ledger().stored_allocations().await.unwrap(), before);
    // A forced host the cloud lacks is NoValidHost, not a placement elsewhere.
    let unknown = json!({"force_hosts": ["nowhere"],
        "scheduler_hints": {"_nova_check_type": ["rebuild"]}});
    let refused = s
        .select(call(&b, 4, &[&a, &b], &[], json!({}), unknown))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, SelectError::NoValidHost { .. }),
        "{refused}"
    );
}

/// A scheduler over `hosts` (4 VCPU each, equal otherwise), Nova's records giving each its
/// cell when `cells` names one per host.
async fn scheduler_over(
    dir: &tempfile::TempDir,
    hosts: &[&str],
    cells: Option<&[&str]>,
) -> Scheduler {
    let s = {
        let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
        let ledger = Ledger::open(&url, 2).await.unwrap();
        for (n, name) in hosts.iter().enumerate() {
            let reg = HostRegistration::simple(name, &uuid(100 + n as u32), 4, 8192, 100);
            ledger.register_host(&reg, NOW_MS).await.unwrap();
        }
        let clock: SharedClock = Arc::new(ManualClock::new(NOW_MS));
        let mut settings = Settings::default();
        settings.scheduler.seed = Some(7);
        let stats = Arc::new(Stats::new(clock.clone(), 60));
        Scheduler::start(Arc::new(settings), ledger, stats, clock)
            .await
            .unwrap()
    };
    if let Some(cells) = cells {
        let mut records = crate::table::NodeRecords {
            read: true,
            ..Default::default()
        };
        for (n, (name, cell)) in hosts.iter().zip(cells).enumerate() {
            records.by_uuid.insert(
                uuid(100 + n as u32),
                crate::table::NodeRecord {
                    service_host: Arc::from(*name),
                    facts: Arc::new(crate::domain::ComputeFacts {
                        cell_uuid: Some(cell.to_string()),
                        ..Default::default()
                    }),
                    up: true,
                    disabled: false,
                    forced_down: false,
                },
            );
        }
        s.ledger().table().set_records(Arc::new(records));
    }
    s
}

/// A multi-create of `instances` (1 VCPU each) with alternates, in a group of `policy`
/// when given.
fn multi_create(instances: &[String], policy: Option<&str>) -> SelectDestinationsArgs {
    let flavor = object(
        "Flavor",
        "1.2",
        json!({"name": "f1", "vcpus": 1, "memory_mb": 512, "root_gb": 1}),
    );
    let mut data = json!({"flavor": flavor, "instance_uuid": instances[0],
        "num_instances": instances.len(), "project_id": "p", "user_id": "u"});
    if let Some(policy) = policy {
        data["instance_group"] = object(
            "InstanceGroup",
            "1.11",
            json!({"policy": policy, "members": instances, "hosts": [], "_rules": {}}),
        );
        data["scheduler_hints"] = json!({"group": ["g"]});
    }
    let body = json!({"spec_obj": object("RequestSpec", "1.14", data),
        "instance_uuids": instances, "return_objects": true, "return_alternates": true});
    SelectDestinationsArgs::from_http_body(body.to_string().as_bytes()).unwrap()
}

fn hosts_of(answer: &Answer) -> Vec<Vec<String>> {
    answer
        .selections
        .iter()
        .map(|s| s.iter().map(|x| x.service_host.clone()).collect())
        .collect()
}

/// Issue 42: with an anti-affinity group Nova answered `[[host1], [host2]]` where Parasol
/// answered `[[host1, host2], [host2]]` — a reschedule of the first instance onto host2 would
/// break anti-affinity. Nova's `_get_alternate_hosts` never offers a host selected for
/// another instance of the call.
#[tokio::test]
async fn multi_create_alternates_never_name_a_host_chosen_for_another_instance() {
    let dir = tempfile::tempdir().unwrap();
    let s = scheduler_over(&dir, &["host1", "host2"], None).await;
    let answer = s
        .select(multi_create(&[uuid(1), uuid(2)], Some("anti-affinity")))
        .await
        .unwrap();
    let got = hosts_of(&answer);
    assert_eq!(got.len(), 2);
    assert_ne!(got[0][0], got[1][0], "anti-affinity spreads");
    assert_eq!(
        got,
        [vec![got[0][0].clone()], vec![got[1][0].clone()]],
        "no alternate was selected for another instance"
    );
    // Without a group too: the other instance's host is no alternate.
    let dir = tempfile::tempdir().unwrap();
    let s = scheduler_over(&dir, &["host1", "host2", "host3"], None).await;
    let answer = s
        .select(multi_create(&[uuid(3), uuid(4)], None))
        .await
        .unwrap();
    let got = hosts_of(&answer);
    let selected: Vec<&String> = got.iter().map(|s| &s[0]).collect();
    for (i, hosts) in got.iter().enumerate() {
        for alt in &hosts[1..] {
            assert!(
                !selected.contains(&alt),
                "instance {i}'s alternate {alt} was selected: {got:?}"
            );
        }
    }
}

/// Issue 42: Parasol offered `[host1, host2, host3]` with host2 in another cell; Nova's
/// alternates are only hosts of the selected host's cell (a reschedule stays in the cell).
#[tokio::test]
async fn alternates_come_only_from_the_selected_hosts_cell() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["host1", "host2", "host3", "host4"];
    let cells = ["cell-a", "cell-b", "cell-a", "cell-b"];
    let s = scheduler_over(&dir, &names, Some(&cells)).await;
    let answer = s.select(multi_create(&[uuid(1)], None)).await.unwrap();
    let one = &answer.selections[0];
    assert!(
        one.len() > 1,
        "some alternate in the cell: {:?}",
        hosts_of(&answer)
    );
    for alt in &one[1..] {
        assert_eq!(alt.cell_uuid, one[0].cell_uuid, "{:?}", hosts_of(&answer));
    }
}
