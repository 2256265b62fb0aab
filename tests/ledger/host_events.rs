//! Issue 40, defects 3 and 5, through every path a host-state event takes: SQLite's hot
//! writer (a single heartbeat, a batch of host-state events), the general path's coalesced
//! batch (a batch with another kind of message; every batch on PostgreSQL) and its savepoint
//! pass (a batch with a rejected message), and the Placement sync's registration.
//! - A compute node re-created under a new uuid with the same (host, node) replaces the old
//!   node when it holds no allocation, or retires it beside the new one while it does;
//!   never a rejection.
//! - An event sent before its host's newest counts as a heartbeat and changes no inventory,
//!   until the host's events have been older for longer than `host_timeout_s`.

use super::delete_end;
use crate::on_both_engines;
use crate::support::ledger;
use parasol::clock::{Clock, ManualClock, SharedClock};
use parasol::domain::{ClassId, HostState, Inventory, Resources};
use parasol::ledger::{ClaimOutcome, HostRegistration, Ledger};
use parasol::notifications::{Applied, Ingest, Outcome};
use parasol::nova::{HostEvent, HostStatePayload, Notification};
use parasol::stats::Stats;
use std::sync::Arc;

#[derive(Clone, Copy, Debug)]
enum Path {
    /// `Ingest::apply` (HTTP, RPC casts): SQLite's hot writer for a heartbeat.
    Single,
    /// A consumer batch of host-state events: SQLite's hot writer's batch.
    Batch,
    /// A batch with an instance message: the general path, coalesced.
    Mixed,
    /// A batch with a rejected message: the general path's savepoint pass.
    Savepoint,
}

const PATHS: [Path; 4] = [Path::Single, Path::Batch, Path::Mixed, Path::Savepoint];

fn id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A `compute.host.state` event of node `host` (host = node) of uuid `uuid`, `vcpu` VCPUs,
/// sent at `at` (the envelope's timestamp).
fn state(host: &str, uuid: &str, vcpu: i64, at: Option<&str>) -> Notification {
    Notification {
        message_id: id(),
        event_type: "compute.host.state".into(),
        publisher_id: Some(format!("parasol-host:{host}")),
        timestamp: at.map(str::to_string),
        event: HostEvent::HostState(HostStatePayload {
            compute_node_uuid: uuid.to_string(),
            node: host.to_string(),
            host: host.to_string(),
            availability_zone: None,
            up: true,
            disabled: false,
            inventory: [("VCPU".to_string(), Inventory::of(vcpu))].into(),
            traits: Vec::new(),
            aggregates: Vec::new(),
            usage: None,
            instance_usage: None,
            instance_qos: None,
        }),
    }
}

async fn send(ingest: &Ingest, path: Path, n: &Notification, host: &str) -> Outcome {
    match path {
        Path::Single => ingest.apply(n).await.map_err(|e| e.to_string()),
        Path::Batch => ingest.apply_batch(&[n]).await.unwrap().remove(0),
        Path::Mixed => {
            let other = delete_end(&id(), &id(), host);
            let mut out = ingest.apply_batch(&[n, &other]).await.unwrap();
            assert_eq!(out[1], Ok(Applied::Applied), "{out:?}");
            out.remove(0)
        }
        Path::Savepoint => {
            let bad = delete_end(&id(), &id(), "no-such-host");
            let mut out = ingest.apply_batch(&[n, &bad]).await.unwrap();
            assert!(out[1].is_err(), "{out:?}");
            out.remove(0)
        }
    }
}

fn ingest(ledger: &Ledger, clock: &Arc<ManualClock>) -> Ingest {
    let clock: SharedClock = clock.clone();
    Ingest::new(
        ledger.clone(),
        clock.clone(),
        Arc::new(Stats::new(clock, 60)),
    )
}

fn vcpu_total(h: &HostState) -> i64 {
    h.profile.inventory(ClassId::VCPU).map_or(0, |i| i.total)
}

/// The hosts of service host `host`, from the ledger itself (not the table), by id.
async fn rows_of(ledger: &Ledger, host: &str) -> Vec<parasol::domain::HostState> {
    let rows = ledger.load_hosts(None).await.unwrap();
    rows.into_iter()
        .filter(|r| &*r.profile.host == host)
        .collect()
}

async fn a_re_created_compute_node_replaces_or_retires_the_old_one(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let clock = Arc::new(ManualClock::new(1_000_000));
    let ingest = ingest(&ledger, &clock);
    let mut replaced = 0;
    for path in PATHS {
        let (free, busy) = (format!("free-{path:?}"), format!("busy-{path:?}"));
        let (free_old, free_new, busy_old, busy_new) = (id(), id(), id(), id());
        for (host, uuid) in [(&free, &free_old), (&busy, &busy_old)] {
            let out = send(&ingest, path, &state(host, uuid, 8, None), host).await;
            assert_eq!(out, Ok(Applied::Applied), "{path:?}: {host}");
        }
        let busy_id = ledger.table().by_uuid(&busy_old).unwrap().id;
        let instance = id();
        let claimed = ledger
            .claim(busy_id, &instance, &Resources::new(2, 0, 0), 1)
            .await
            .unwrap();
        assert_eq!(claimed, ClaimOutcome::Claimed);

        // Both nodes re-created (service deleted and created again): same names, new uuids,
        // each event twice (the second a heartbeat of the new node).
        for (host, uuid) in [(&free, &free_new), (&busy, &busy_new)] {
            for _ in 0..2 {
                let out = send(&ingest, path, &state(host, uuid, 16, None), host).await;
                assert_eq!(out, Ok(Applied::Applied), "{path:?}: {host}");
            }
        }
        replaced += 2;

        // Free: its row is the new node's.
        let rows = rows_of(&ledger, &free).await;
        assert_eq!(rows.len(), 1, "{path:?}: {rows:?}");
        assert_eq!(&*rows[0].profile.uuid, free_new.as_str());
        assert_eq!(&*rows[0].profile.node, free.as_str());
        let h = ledger.table().by_uuid(&free_new).expect("in the table");
        assert_eq!(vcpu_total(&h), 16);
        assert!(ledger.table().by_uuid(&free_old).is_none());

        // Busy: the old node is kept with its allocation, unschedulable and renamed; the new
        // one registered beside it under the names.
        let rows = rows_of(&ledger, &busy).await;
        assert_eq!(rows.len(), 2, "{path:?}: {rows:?}");
        let old = rows.iter().find(|r| *r.profile.uuid == busy_old).unwrap();
        let new = rows.iter().find(|r| *r.profile.uuid == busy_new).unwrap();
        assert_eq!(old.id, busy_id);
        assert_eq!(old.used.get(ClassId::VCPU), 2);
        assert!(old.forced_down && old.disabled && !old.up, "{old:?}");
        assert_ne!(&*old.profile.node, busy.as_str());
        assert_eq!(&*new.profile.node, busy.as_str());
        assert!(!new.forced_down && !new.disabled && new.up);
        assert_eq!(new.used.get(ClassId::VCPU), 0);
        let old_in_table = ledger.table().get(busy_id).unwrap();
        assert!(old_in_table.forced_down && old_in_table.disabled);
        assert_eq!(
            ledger.table().by_name(&busy, Some(&busy)).unwrap().id,
            new.id,
            "the names lead to the new node"
        );
        assert_eq!(
            ledger.table().host_counters().node_replaced.get(),
            replaced,
            "{path:?}"
        );

        // A late event of the retired node is taken and changes nothing.
        let out = send(&ingest, path, &state(&busy, &busy_old, 4, None), &busy).await;
        assert_eq!(out, Ok(Applied::Applied), "{path:?}");
        let again = rows_of(&ledger, &busy).await;
        assert_eq!(again, rows, "{path:?}");

        // A service update of the host (enabled, not forced down) leaves it unschedulable.
        let update = Notification {
            message_id: id(),
            event_type: "service.update".into(),
            publisher_id: None,
            timestamp: None,
            event: HostEvent::ServiceUpdate {
                host: busy.clone(),
                disabled: false,
                forced_down: false,
            },
        };
        let out = send(&ingest, path, &update, &busy).await;
        assert_eq!(out, Ok(Applied::Applied), "{path:?}");
        let old = ledger.table().get(busy_id).unwrap();
        assert!(old.forced_down && old.disabled, "{path:?}: {old:?}");
        let new = ledger.table().by_uuid(&busy_new).unwrap();
        assert!(!new.forced_down && !new.disabled, "{path:?}");

        // Its instance deleted, the retired node goes from the ledger and the table.
        let deleted = delete_end(&id(), &instance, &busy);
        assert_eq!(
            send(&ingest, path, &deleted, &busy).await,
            Ok(Applied::Applied),
            "{path:?}"
        );
        let rows = rows_of(&ledger, &busy).await;
        assert_eq!(rows.len(), 1, "{path:?}: {rows:?}");
        assert_eq!(&*rows[0].profile.uuid, busy_new.as_str());
        assert!(ledger.table().get(busy_id).is_none(), "{path:?}");
        assert!(ledger.table().by_uuid(&busy_old).is_none(), "{path:?}");
        assert_eq!(ledger.table().by_uuid(&busy_new).unwrap().id, new.id);
    }
}
on_both_engines!(
    a_re_created_compute_node_replaces_or_retires_the_old_one,
    super::a_re_created_compute_node_replaces_or_retires_the_old_one
);

/// The Placement sync registers a re-created provider the same way.
async fn the_placement_sync_registers_a_re_created_node(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let (old, new) = (id(), id());
    let a = ledger
        .register_host(&HostRegistration::simple("pl", &old, 4, 4096, 40), 1)
        .await
        .unwrap();
    ledger
        .claim(a, "i1", &Resources::new(1, 0, 0), 1)
        .await
        .unwrap();
    let b = ledger
        .register_host(&HostRegistration::simple("pl", &new, 8, 4096, 40), 2)
        .await
        .expect("registered beside the old node");
    assert_ne!(a, b);
    let retired = ledger.table().get(a).unwrap();
    assert!(retired.forced_down && retired.disabled);
    // A node with no allocation is replaced: its row is the new node's.
    let newer = id();
    let c = ledger
        .register_host(&HostRegistration::simple("pl", &newer, 16, 4096, 40), 3)
        .await
        .unwrap();
    assert_eq!(c, b);
    assert!(ledger.table().by_uuid(&new).is_none());
    assert_eq!(vcpu_total(&ledger.table().get(c).unwrap()), 16);
    assert_eq!(ledger.table().host_counters().node_replaced.get(), 2);
}
on_both_engines!(
    the_placement_sync_registers_a_re_created_node,
    super::the_placement_sync_registers_a_re_created_node
);

async fn an_older_host_state_event_is_a_heartbeat_only(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let clock = Arc::new(ManualClock::new(1_000_000));
    let ingest = ingest(&ledger, &clock);
    ledger.table().set_event_clock_reset_after_ms(60_000);
    let mut older = 0;
    for path in PATHS {
        let host = format!("clock-{path:?}");
        let uuid = id();
        let at = |t: &str| Some(format!("2026-12-01 {t}"));
        let step = |vcpu: i64, t: &str| {
            let n = state(&host, &uuid, vcpu, at(t).as_deref());
            let ingest = &ingest;
            let host = host.clone();
            async move { send(ingest, path, &n, &host).await }
        };
        let vcpu = |ledger: &Ledger| {
            let h = ledger.table().by_uuid(&uuid).unwrap();
            (vcpu_total(&h), h.last_seen_ms)
        };
        assert_eq!(step(8, "23:59:59.000000").await, Ok(Applied::Applied));
        assert_eq!(vcpu(&ledger), (8, clock.now_ms()));

        // Sent four hours before the newest: liveness by the time it came, no inventory.
        clock.advance_ms(1_000);
        assert_eq!(step(4, "20:00:00.000000").await, Ok(Applied::Applied));
        older += 1;
        assert_eq!(vcpu(&ledger), (8, clock.now_ms()), "{path:?}");
        let row = &ledger
            .load_hosts(Some(&[ledger.table().by_uuid(&uuid).unwrap().id]))
            .await
            .unwrap()[0];
        assert_eq!(row.profile.inventory(ClassId::VCPU).unwrap().total, 8);
        assert_eq!(row.last_seen_ms, clock.now_ms(), "{path:?}: the ledger's");
        assert_eq!(ledger.table().host_counters().older_events.get(), older);

        // A newer one is taken.
        clock.advance_ms(1_000);
        assert_eq!(step(6, "23:59:59.500000").await, Ok(Applied::Applied));
        assert_eq!(vcpu(&ledger).0, 6, "{path:?}");

        // The host's clock was set back: its events stay older, and once they have for
        // longer than host_timeout_s they are taken again.
        clock.advance_ms(1_000);
        assert_eq!(step(2, "21:00:00.000000").await, Ok(Applied::Applied));
        clock.advance_ms(30_000);
        assert_eq!(step(2, "21:00:30.000000").await, Ok(Applied::Applied));
        older += 2;
        assert_eq!(vcpu(&ledger).0, 6, "{path:?}");
        clock.advance_ms(31_000);
        assert_eq!(step(3, "21:01:01.000000").await, Ok(Applied::Applied));
        assert_eq!(vcpu(&ledger).0, 3, "{path:?}: taken after host_timeout_s");
        clock.advance_ms(1_000);
        assert_eq!(step(5, "21:01:02.000000").await, Ok(Applied::Applied));
        assert_eq!(vcpu(&ledger).0, 5, "{path:?}");
        assert_eq!(ledger.table().host_counters().older_events.get(), older);
    }
}
on_both_engines!(
    an_older_host_state_event_is_a_heartbeat_only,
    super::an_older_host_state_event_is_a_heartbeat_only
);

/// A retired node whose last allocation goes by `Ledger::release` (a failed multi-create) or by
/// the claim expiry leaves the live table too, not only when a notification releases it.
async fn a_retired_node_leaves_the_table_with_its_last_allocation_however_it_goes(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    for (i, expire) in [false, true].into_iter().enumerate() {
        let name = format!("rt{i}");
        let old = ledger
            .register_host(&HostRegistration::simple(&name, &id(), 4, 4096, 40), 1)
            .await
            .unwrap();
        let instance = format!("i{i}");
        ledger
            .claim(old, &instance, &Resources::new(1, 0, 0), 1)
            .await
            .unwrap();
        let new = ledger
            .register_host(&HostRegistration::simple(&name, &id(), 8, 4096, 40), 2)
            .await
            .unwrap();
        assert!(
            ledger.table().get(old).is_some(),
            "retired beside the new node"
        );
        if expire {
            assert_eq!(ledger.expire_claims(i64::MAX).await.unwrap().len(), 1);
        } else {
            assert!(ledger.release(&instance).await.unwrap().is_some());
        }
        assert!(ledger.table().get(old).is_none(), "expire: {expire}");
        assert!(ledger.table().get(new).is_some());
    }
}
on_both_engines!(
    a_retired_node_leaves_the_table_with_its_last_allocation_however_it_goes,
    super::a_retired_node_leaves_the_table_with_its_last_allocation_however_it_goes
);
