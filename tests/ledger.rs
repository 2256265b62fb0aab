//! The ledger against a real SQLite file and the running PostgreSQL.

mod support;

#[path = "ledger/coalescing.rs"]
mod coalescing;
#[path = "ledger/full_disk.rs"]
mod full_disk;
#[path = "ledger/host_events.rs"]
mod host_events;
#[path = "support/small_disk.rs"]
mod small_disk;

use parasol::domain::{HostId, Inventory, Resources};
use parasol::ledger::{ClaimOutcome, Ledger};
use std::sync::Arc;
use support::{ledger, registration};

async fn claim_succeeds_only_while_every_class_fits(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let host = ledger
        .register_host(&registration("c1", 4, 4096, 40), 1)
        .await
        .unwrap();
    let d = Resources::new(2, 2048, 20);
    assert_eq!(
        ledger.claim(host, "i1", &d, 1).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        ledger.claim(host, "i2", &d, 1).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        ledger
            .claim(host, "i3", &Resources::new(0, 0, 1), 1)
            .await
            .unwrap(),
        ClaimOutcome::Declined
    );
    let h = &ledger.read_hosts().await.unwrap()[0];
    assert_eq!(h.used, Resources::new(4, 4096, 40));
    assert_eq!(h.num_instances, 2);
    assert!(ledger.allocation("i3").await.unwrap().is_none());
}
on_both_engines!(
    claim_succeeds_only_while_every_class_fits,
    super::claim_succeeds_only_while_every_class_fits
);

/// A host whose provider left Placement goes with every allocation the ledger still held on
/// it (claims, confirmed instances, a move's held source), out of the ledger and the table;
/// the other hosts, their allocations and a uuid without a host are left as they are.
async fn removing_a_providers_host_takes_what_it_held_and_nothing_else(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let gone = registration("gone", 8, 8192, 80);
    let kept = registration("kept", 8, 8192, 80);
    let g = ledger.register_host(&gone, 1).await.unwrap();
    let k = ledger.register_host(&kept, 1).await.unwrap();
    for (host, instance) in [(g, "on-gone"), (k, "on-kept"), (k, "mover")] {
        let outcome = ledger
            .claim(host, instance, &Resources::new(1, 512, 1), 2)
            .await
            .unwrap();
        assert_eq!(outcome, ClaimOutcome::Claimed);
    }
    let built = create_end("built", "mover", "kept", Resources::new(1, 512, 1));
    let out = parasol::notifications::apply_batch(&ledger, &[&built], 3)
        .await
        .unwrap();
    assert!(out[0].is_ok(), "{out:?}");
    // The mover moves from `kept` to `gone`: its source is held on `kept`.
    ledger
        .claim(g, "mover", &Resources::new(2, 1024, 1), 4)
        .await
        .unwrap();
    let removed = ledger
        .remove_hosts_of_providers(&[gone.uuid.clone(), "no-such-provider".to_string()])
        .await
        .unwrap();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(
        (removed[0].id, &*removed[0].host, removed[0].released),
        (g, "gone", 2),
        "the claim and the move's destination went with the host"
    );
    let hosts = ledger.read_hosts().await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].id, k);
    assert_eq!(
        hosts[0].used,
        Resources::new(2, 1024, 2),
        "on-kept and the held source"
    );
    assert!(ledger.table().by_uuid(&gone.uuid).is_none());
    assert!(ledger.allocation("on-gone").await.unwrap().is_none());
    assert!(ledger.allocation("on-kept").await.unwrap().is_some());
    // Registered again (a node re-created under its uuid): an empty host.
    let again = ledger.register_host(&gone, 5).await.unwrap();
    let h = ledger.table().by_uuid(&gone.uuid).expect("back");
    assert_eq!((h.id, h.used), (again, Resources::ZERO));
}
on_both_engines!(
    removing_a_providers_host_takes_what_it_held_and_nothing_else,
    super::removing_a_providers_host_takes_what_it_held_and_nothing_else
);

/// A failed operation's claim follows what Placement holds of the instance, as read after the
/// failure (`Ledger::settle_failed`): a move that had not started goes back to its held source;
/// a build's claim goes when Placement holds nothing; a claim Placement holds, one made after
/// the failure (a retry), a confirmed allocation and a started move are left as they are.
async fn a_failed_operation_s_claim_follows_placement_and_nothing_else(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let (reg_a, reg_b) = (
        registration("a", 8, 8192, 80),
        registration("b", 8, 8192, 80),
    );
    let a = ledger.register_host(&reg_a, 1).await.unwrap();
    let b = ledger.register_host(&reg_b, 1).await.unwrap();
    let small = Resources::new(1, 512, 1);
    let claim = |host, id: &'static str, at: i64| {
        let ledger = ledger.clone();
        async move {
            let outcome = ledger.claim(host, id, &small, at).await.unwrap();
            assert_eq!(outcome, ClaimOutcome::Claimed, "{id}");
        }
    };
    let confirm = |id: &'static str, host: &'static str, at: i64| {
        let ledger = ledger.clone();
        async move {
            let built = create_end(&format!("built-{id}"), id, host, small);
            let out = parasol::notifications::apply_batch(&ledger, &[&built], at)
                .await
                .unwrap();
            assert!(out[0].is_ok(), "{out:?}");
        }
    };
    // A move a → b not started; a build on b; a build Placement keeps; a confirmed instance.
    claim(a, "mover", 10).await;
    confirm("mover", "a", 11).await;
    claim(b, "mover", 12).await;
    claim(b, "build", 12).await;
    claim(b, "held", 12).await;
    claim(a, "running", 12).await;
    confirm("running", "a", 13).await;
    let used = |h| {
        let uuid = if h == a { &reg_a.uuid } else { &reg_b.uuid };
        ledger.table().by_uuid(uuid).unwrap().used
    };
    assert_eq!(used(b), Resources::new(3, 1536, 3));

    // A retry's claim, made after the failure, and Placement's answer naming the host.
    assert_eq!(ledger.settle_failed("mover", &[], 11).await.unwrap(), None);
    assert_eq!(
        ledger
            .settle_failed("held", &[(b, small)], 20)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        ledger.settle_failed("running", &[], 20).await.unwrap(),
        None
    );
    assert_eq!(ledger.settle_failed("nobody", &[], 20).await.unwrap(), None);
    // A build Placement holds elsewhere (an alternate the conductor claimed) is the repair's.
    assert_eq!(
        ledger
            .settle_failed("build", &[(a, small)], 20)
            .await
            .unwrap(),
        None
    );
    // A move Placement holds on a host other than its source (a reschedule's alternate, or the
    // claim itself) is the notifications' and the repair's.
    for placed in [vec![(a, small), (b, small)], vec![(b, small)]] {
        assert_eq!(
            ledger.settle_failed("mover", &placed, 20).await.unwrap(),
            None
        );
    }

    assert_eq!(
        ledger
            .settle_failed("mover", &[(a, small)], 20)
            .await
            .unwrap(),
        Some(parasol::ledger::Settled::MoveUndone {
            destination: b,
            source: a
        })
    );
    let mover = ledger
        .allocation("mover")
        .await
        .unwrap()
        .expect("on its source");
    assert_eq!((mover.host_id, mover.confirmed), (a, true));
    assert_eq!(
        ledger.settle_failed("build", &[], 20).await.unwrap(),
        Some(parasol::ledger::Settled::Released { host: b })
    );
    assert!(ledger.allocation("build").await.unwrap().is_none());
    assert_eq!(used(b), small, "only the build Placement holds");
    assert_eq!(used(a), Resources::new(2, 1024, 2), "mover and running");
    let hosts = ledger.read_hosts().await.unwrap();
    let on = |h| hosts.iter().find(|r| r.id == h).unwrap();
    assert_eq!(
        (on(a).used, on(a).num_instances),
        (Resources::new(2, 1024, 2), 2)
    );
    assert_eq!((on(b).used, on(b).num_instances), (small, 1));
    assert!(ledger.held_moves().await.unwrap().is_empty());

    // A started move is left to its rollback or end.
    claim(b, "mover", 30).await;
    let started = parasol::nova::Notification {
        message_id: "pre".into(),
        event_type: "instance.live_migration_pre.end".into(),
        publisher_id: None,
        timestamp: None,
        event: parasol::nova::HostEvent::Move {
            instance_uuid: "mover".into(),
            step: parasol::nova::MoveStep::Started,
        },
    };
    let out = parasol::notifications::apply_batch(&ledger, &[&started], 31)
        .await
        .unwrap();
    assert!(out[0].is_ok(), "{out:?}");
    assert_eq!(
        ledger
            .settle_failed("mover", &[(a, small)], 40)
            .await
            .unwrap(),
        None
    );

    // A resize on its own host: Placement's amounts tell the claim from the source.
    let big = Resources::new(2, 1024, 1);
    claim(a, "resizer", 50).await;
    confirm("resizer", "a", 51).await;
    let outcome = ledger.claim(a, "resizer", &big, 52).await.unwrap();
    assert_eq!(outcome, ClaimOutcome::Claimed);
    assert_eq!(
        ledger
            .settle_failed("resizer", &[(a, big)], 60)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        ledger
            .settle_failed("resizer", &[(a, small)], 60)
            .await
            .unwrap(),
        Some(parasol::ledger::Settled::MoveUndone {
            destination: a,
            source: a
        })
    );
    let resizer = ledger
        .allocation("resizer")
        .await
        .unwrap()
        .expect("its source");
    assert_eq!(
        (resizer.host_id, resizer.demand, resizer.confirmed),
        (a, small, true)
    );
}
on_both_engines!(
    a_failed_operation_s_claim_follows_placement_and_nothing_else,
    super::a_failed_operation_s_claim_follows_placement_and_nothing_else
);

/// An evacuation's end (`instance.rebuild.end` on the destination): Placement keeps the
/// instance on its failed source until that compute restarts, so with a Placement sync that
/// follows such parts the held source becomes the instance's part there
/// (`<instance>@<provider uuid>`, imported, no instance), which the sync releases once
/// Placement drops it; without one it is released, as before.
async fn an_evacuation_keeps_its_source_as_placement_s_part_when_the_sync_follows_parts(
    engine: &str,
) {
    for follows in [true, false] {
        let (ledger, _db) = ledger(engine).await;
        if follows {
            ledger.table().set_follows_placement();
        }
        let (reg_a, reg_b) = (
            registration("a", 8, 8192, 80),
            registration("b", 8, 8192, 80),
        );
        let a = ledger.register_host(&reg_a, 1).await.unwrap();
        let b = ledger.register_host(&reg_b, 1).await.unwrap();
        let small = Resources::new(1, 512, 1);
        assert_eq!(
            ledger.claim(a, "vm", &small, 2).await.unwrap(),
            ClaimOutcome::Claimed
        );
        let built = create_end("built", "vm", "a", small);
        let out = parasol::notifications::apply_batch(&ledger, &[&built], 3)
            .await
            .unwrap();
        assert!(out[0].is_ok(), "{out:?}");
        // The evacuation to b: its destination claimed, the source held on a.
        assert_eq!(
            ledger.claim(b, "vm", &small, 4).await.unwrap(),
            ClaimOutcome::Claimed
        );
        let mut rebuilt = create_end("rebuilt", "vm", "b", small);
        rebuilt.event_type = "instance.rebuild.end".into();
        let out = parasol::notifications::apply_batch(&ledger, &[&rebuilt], 5)
            .await
            .unwrap();
        assert!(out[0].is_ok(), "{out:?}");
        let vm = ledger.allocation("vm").await.unwrap().expect("on b");
        assert_eq!((vm.host_id, vm.confirmed), (b, true));
        assert!(
            ledger.held_moves().await.unwrap().is_empty(),
            "the move ended"
        );
        let hosts = ledger.read_hosts().await.unwrap();
        let on = |h| hosts.iter().find(|r| r.id == h).unwrap();
        assert_eq!((on(b).used, on(b).num_instances), (small, 1));
        let part = format!("vm@{}", reg_a.uuid);
        if follows {
            assert_eq!(
                (on(a).used, on(a).num_instances),
                (small, 0),
                "Placement's part on the failed source, no instance there"
            );
            assert_eq!(
                ledger.part_keys().await.unwrap(),
                std::slice::from_ref(&part)
            );
            let held = ledger.allocation(&part).await.unwrap().expect("the part");
            assert_eq!(held.host_id, a);
            assert!(ledger.table().by_uuid(&reg_a.uuid).unwrap().used == small);
        } else {
            assert_eq!((on(a).used, on(a).num_instances), (Resources::ZERO, 0));
            assert!(ledger.allocation(&part).await.unwrap().is_none());
        }
    }
}
/// The same when the sync imported the source's part before `instance.rebuild.end` with other
/// amounts than the held source (so it did not take the held source's key): the part stays,
/// the held source goes, nothing counted twice, the notification applied.
async fn an_evacuation_with_its_part_imported_already_keeps_the_part_alone(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    ledger.table().set_follows_placement();
    let (reg_a, reg_b) = (
        registration("a", 8, 8192, 80),
        registration("b", 8, 8192, 80),
    );
    let a = ledger.register_host(&reg_a, 1).await.unwrap();
    let b = ledger.register_host(&reg_b, 1).await.unwrap();
    let (small, other) = (Resources::new(1, 512, 1), Resources::new(1, 512, 2));
    ledger.claim(a, "vm", &small, 2).await.unwrap();
    let built = create_end("built", "vm", "a", small);
    parasol::notifications::apply_batch(&ledger, &[&built], 3)
        .await
        .unwrap();
    ledger.claim(b, "vm", &small, 4).await.unwrap();
    let part = format!("vm@{}", reg_a.uuid);
    assert!(ledger
        .record_existing_allocation(a, &part, &other, 5)
        .await
        .unwrap());
    let mut rebuilt = create_end("rebuilt", "vm", "b", small);
    rebuilt.event_type = "instance.rebuild.end".into();
    let out = parasol::notifications::apply_batch(&ledger, &[&rebuilt], 6)
        .await
        .unwrap();
    assert!(out[0].is_ok(), "{out:?}");
    assert!(ledger.held_moves().await.unwrap().is_empty());
    let held = ledger.allocation(&part).await.unwrap().expect("the part");
    assert_eq!((held.host_id, held.demand), (a, other));
    let hosts = ledger.read_hosts().await.unwrap();
    let on = |h| hosts.iter().find(|r| r.id == h).unwrap();
    assert_eq!((on(a).used, on(a).num_instances), (other, 0));
    assert_eq!((on(b).used, on(b).num_instances), (small, 1));
}
on_both_engines!(
    an_evacuation_with_its_part_imported_already_keeps_the_part_alone,
    super::an_evacuation_with_its_part_imported_already_keeps_the_part_alone
);
on_both_engines!(
    an_evacuation_keeps_its_source_as_placement_s_part_when_the_sync_follows_parts,
    super::an_evacuation_keeps_its_source_as_placement_s_part_when_the_sync_follows_parts
);

/// A sync that reads Nova's conductor's swap (the instance's allocation moved to a migration
/// record) before the move's claim: the instance's confirmed allocation, which Placement no
/// longer lists there, is adopted as the move's source under the migration's key, not counted
/// twice; a move that then fails before its claim gives it back when Placement does.
async fn a_swapped_source_read_before_the_claim_is_adopted_and_given_back(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let reg = registration("a", 8, 8192, 80);
    let a = ledger.register_host(&reg, 1).await.unwrap();
    let small = Resources::new(1, 512, 1);
    assert_eq!(
        ledger.claim(a, "vm", &small, 2).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let built = create_end("built", "vm", "a", small);
    let out = parasol::notifications::apply_batch(&ledger, &[&built], 3)
        .await
        .unwrap();
    assert!(out[0].is_ok(), "{out:?}");
    // Placement still lists the instance there, or the amounts differ: nothing adopted.
    let other = Resources::new(2, 512, 1);
    for (demand, present) in [(small, vec!["vm", "mig"]), (other, vec!["mig"])] {
        let adopted = ledger
            .adopt_swapped_source(a, "mig", &demand, &present)
            .await
            .unwrap();
        assert_eq!(adopted, None);
    }
    let adopted = ledger
        .adopt_swapped_source(a, "mig", &small, &["mig"])
        .await
        .unwrap();
    assert_eq!(adopted.as_deref(), Some("vm"));
    let held = ledger.held_moves().await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!((&*held[0].instance_uuid, &*held[0].key), ("vm", "mig"));
    assert!(ledger.allocation("vm").await.unwrap().is_none());
    let h = &ledger.read_hosts().await.unwrap()[0];
    assert_eq!(
        (h.used, h.num_instances),
        (small, 1),
        "once, still an instance"
    );
    // The move fails before any claim; Placement gives the instance its allocation back.
    assert_eq!(ledger.settle_failed("vm", &[], 10).await.unwrap(), None);
    assert_eq!(
        ledger.settle_failed("vm", &[(a, small)], 10).await.unwrap(),
        Some(parasol::ledger::Settled::SourceRestored { source: a })
    );
    let vm = ledger
        .allocation("vm")
        .await
        .unwrap()
        .expect("its own again");
    assert_eq!((vm.host_id, vm.demand, vm.confirmed), (a, small, true));
    assert!(ledger.allocation("mig").await.unwrap().is_none());
    assert!(ledger.held_moves().await.unwrap().is_empty());
    let h = &ledger.read_hosts().await.unwrap()[0];
    assert_eq!((h.used, h.num_instances), (small, 1));
}
on_both_engines!(
    a_swapped_source_read_before_the_claim_is_adopted_and_given_back,
    super::a_swapped_source_read_before_the_claim_is_adopted_and_given_back
);

async fn claim_honours_reserved_and_allocation_ratio(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let mut reg = registration("c1", 8, 10_000, 100);
    reg.inventories[0].1 = Inventory::of(8).with(2, 4.0);
    reg.inventories[1].1 = Inventory::of(10_000).with(1_000, 1.5);
    let host = ledger.register_host(&reg, 1).await.unwrap();
    let h = &ledger.read_hosts().await.unwrap()[0];
    assert_eq!(*h.usable(), Resources::new(24, 13_500, 100));
    assert_eq!(
        ledger
            .claim(host, "a", &Resources::new(24, 13_500, 0), 1)
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        ledger
            .claim(host, "b", &Resources::new(1, 0, 0), 1)
            .await
            .unwrap(),
        ClaimOutcome::Declined
    );
}
on_both_engines!(
    claim_honours_reserved_and_allocation_ratio,
    super::claim_honours_reserved_and_allocation_ratio
);

async fn release_is_idempotent_and_gives_capacity_back(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let host = ledger
        .register_host(&registration("c1", 4, 4096, 40), 1)
        .await
        .unwrap();
    ledger
        .claim(host, "i1", &Resources::new(4, 4096, 40), 1)
        .await
        .unwrap();
    let released = ledger.release("i1").await.unwrap().expect("released");
    assert_eq!(released.demand, Resources::new(4, 4096, 40));
    assert!(ledger.release("i1").await.unwrap().is_none());
    let h = &ledger.read_hosts().await.unwrap()[0];
    assert_eq!(h.used, Resources::ZERO);
    assert_eq!(h.num_instances, 0);
}
on_both_engines!(
    release_is_idempotent_and_gives_capacity_back,
    super::release_is_idempotent_and_gives_capacity_back
);

async fn reclaiming_an_instance_moves_its_allocation(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let a = ledger
        .register_host(&registration("a", 4, 4096, 40), 1)
        .await
        .unwrap();
    let b = ledger
        .register_host(&registration("b", 4, 4096, 40), 1)
        .await
        .unwrap();
    ledger
        .claim(a, "i1", &Resources::new(1, 1024, 10), 1)
        .await
        .unwrap();
    ledger
        .claim(b, "i1", &Resources::new(1, 1024, 10), 1)
        .await
        .unwrap();
    let hosts = ledger.read_hosts().await.unwrap();
    assert_eq!(hosts[0].used, Resources::ZERO);
    assert_eq!(hosts[1].used, Resources::new(1, 1024, 10));
    assert_eq!(ledger.allocation("i1").await.unwrap().unwrap().host_id, b);
}
on_both_engines!(
    reclaiming_an_instance_moves_its_allocation,
    super::reclaiming_an_instance_moves_its_allocation
);

/// A reschedule whose new host turns out full in the database (another process took the room,
/// this one's table does not know yet) is declined and leaves the instance where it was: its
/// earlier allocation and usage stay, on both engines.
async fn a_declined_reschedule_keeps_the_earlier_allocation(engine: &str) {
    let (ledger, db) = ledger(engine).await;
    let a = ledger
        .register_host(&registration("a", 4, 4096, 40), 1)
        .await
        .unwrap();
    let b = ledger
        .register_host(&registration("b", 2, 2048, 20), 1)
        .await
        .unwrap();
    let d = Resources::new(1, 1024, 10);
    assert_eq!(
        ledger.claim(a, "i1", &d, 1).await.unwrap(),
        ClaimOutcome::Claimed
    );
    // A second process (its own pool and table, nobody following it here) fills b.
    let other = Ledger::open(&db.url, 2).await.unwrap();
    assert_eq!(
        other
            .claim(b, "i2", &Resources::new(2, 2048, 20), 2)
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
    // This process' table still sees b empty, so only the database can refuse the move.
    assert_eq!(
        ledger.claim(b, "i1", &d, 3).await.unwrap(),
        ClaimOutcome::Declined
    );
    let i1 = ledger.allocation("i1").await.unwrap().unwrap();
    assert_eq!((i1.host_id, i1.demand), (a, d), "i1 stays on a");
    let table = ledger.read_hosts().await.unwrap();
    assert_eq!(table[0].used, d, "the table keeps a's usage");
    assert_eq!(
        table[1].used,
        Resources::ZERO,
        "b's reservation is given back"
    );
    // The ledger, read back by a fresh connection.
    let fresh = Ledger::open(&db.url, 2).await.unwrap();
    let hosts = fresh.read_hosts().await.unwrap();
    assert_eq!(hosts[0].used, d);
    assert_eq!(hosts[0].num_instances, 1);
    assert_eq!(hosts[1].used, Resources::new(2, 2048, 20));
    assert_eq!(fresh.allocation_count().await.unwrap(), 2);
}
on_both_engines!(
    a_declined_reschedule_keeps_the_earlier_allocation,
    super::a_declined_reschedule_keeps_the_earlier_allocation
);

async fn racing_claims_never_oversubscribe(engine: &str) {
    let (ledger, db) = ledger(engine).await;
    let host = ledger
        .register_host(&registration("c1", 10, 10_000, 100), 1)
        .await
        .unwrap();
    // A second, independent connection pool stands for a second Parasol process.
    let other = parasol::ledger::Ledger::connect(&db.url, 4).await.unwrap();
    let ledgers = Arc::new([ledger.clone(), other]);
    let mut tasks = Vec::new();
    for i in 0..64 {
        let ledgers = ledgers.clone();
        tasks.push(tokio::spawn(async move {
            ledgers[i % 2]
                .claim(host, &format!("i{i}"), &Resources::new(1, 1000, 10), 1)
                .await
                .unwrap()
        }));
    }
    let mut claimed = 0;
    for t in tasks {
        if t.await.unwrap() == ClaimOutcome::Claimed {
            claimed += 1;
        }
    }
    assert_eq!(claimed, 10);
    let h = &ledger.read_hosts().await.unwrap()[0];
    assert_eq!(h.used, Resources::new(10, 10_000, 100));
    assert_eq!(ledger.allocation_count().await.unwrap(), 10);
}
on_both_engines!(
    racing_claims_never_oversubscribe,
    super::racing_claims_never_oversubscribe
);

/// A multi-create decided as one batch (`[batch] mode = "call"`) is claimed as one ledger
/// group: more claims than either engine's group limit (SQLite's writer takes 256 jobs a
/// group, PostgreSQL's queue 64 claims), one commit; a claim the table has no room for is
/// declined on its own, the others made.
async fn a_batch_of_claims_commits_as_one_group(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let host = ledger
        .register_host(&registration("c1", 300, 300_000, 3_000), 1)
        .await
        .unwrap();
    let small = ledger
        .register_host(&registration("c2", 1, 1_000, 10), 1)
        .await
        .unwrap();
    let counters = ledger.commit_counters();
    let (commits, claims) = (counters.commits.get(), counters.claims.get());
    let d = Resources::new(1, 1_000, 10);
    let too_big = Resources::new(2, 1_000, 10);
    let names: Vec<String> = (0..301).map(|i| format!("i{i}")).collect();
    let batch: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, n)| match i {
            150 => (small, n.as_str(), &too_big),
            _ => (host, n.as_str(), &d),
        })
        .collect();
    let out = ledger.claim_all(&batch, 1).await;
    let out: Vec<ClaimOutcome> = out.into_iter().map(Result::unwrap).collect();
    assert_eq!(out[150], ClaimOutcome::Declined);
    assert_eq!(
        out.iter().filter(|o| **o == ClaimOutcome::Claimed).count(),
        300
    );
    assert_eq!(counters.commits.get() - commits, 1, "one group commit");
    assert_eq!(counters.claims.get() - claims, 300);
    assert_eq!(ledger.allocation_count().await.unwrap(), 300);
    let hosts = ledger.read_hosts().await.unwrap();
    let h = hosts.iter().find(|h| h.id == host).unwrap();
    assert_eq!(h.used, Resources::new(300, 300_000, 3_000));
    assert!(ledger.allocation("i150").await.unwrap().is_none());
}
on_both_engines!(
    a_batch_of_claims_commits_as_one_group,
    super::a_batch_of_claims_commits_as_one_group
);

async fn invalid_registration_changes_nothing(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let mut reg = registration("c1", 4, 4096, 40);
    reg.inventories[2].1.total = -1;
    let err = ledger.register_host(&reg, 1).await.unwrap_err();
    assert!(err.to_string().contains("DISK_GB"), "{err}");
    assert!(ledger.read_hosts().await.unwrap().is_empty());
}
on_both_engines!(
    invalid_registration_changes_nothing,
    super::invalid_registration_changes_nothing
);

async fn reregistered_hosts_are_read_with_their_new_names_and_capacity(engine: &str) {
    let (ledger, db) = ledger(engine).await;
    let mut reg = registration("c1", 4, 4096, 40);
    let id = ledger.register_host(&reg, 1).await.unwrap();
    let before = ledger.read_hosts().await.unwrap();
    assert_eq!(&**before[0].host(), "c1");
    assert_eq!(before[0].usable().vcpu(), 4);
    // Another process re-registers the same compute node under other names and capacity.
    let other = parasol::ledger::Ledger::connect(&db.url, 2).await.unwrap();
    reg.host = "c1-renamed".into();
    reg.node = "c1-node".into();
    reg.availability_zone = "az2".into();
    reg.inventories[0].1.total = 16;
    reg.disabled = true;
    assert_eq!(other.register_host(&reg, 2).await.unwrap(), id);
    // This process' table loads the host again (on PostgreSQL the ledger's change
    // notifications ask for that; see the follow test).
    ledger.reload(&[id]).await.unwrap();
    for h in [
        ledger.read_hosts().await.unwrap().remove(0),
        ledger.table().get(id).unwrap(),
    ] {
        assert_eq!(&**h.host(), "c1-renamed");
        assert_eq!(&**h.node(), "c1-node");
        assert_eq!(&**h.availability_zone(), "az2");
        assert_eq!(*h.usable(), Resources::new(16, 4096, 40));
        assert!(h.disabled && h.up && !h.forced_down);
        assert_eq!(h.last_seen_ms, 2);
    }
    // A claim made by the other process shows in this one's next read.
    other
        .claim(id, "i1", &Resources::new(3, 100, 1), 3)
        .await
        .unwrap();
    ledger.reload(&[id]).await.unwrap();
    let h = ledger.table().get(id).unwrap();
    assert_eq!(h.used, Resources::new(3, 100, 1));
    assert_eq!(h.num_instances, 1);
}
on_both_engines!(
    reregistered_hosts_are_read_with_their_new_names_and_capacity,
    super::reregistered_hosts_are_read_with_their_new_names_and_capacity
);

async fn a_claim_its_caller_abandons_is_applied_whole_or_not_at_all(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let host = ledger
        .register_host(&registration("c1", 1000, 1_000_000, 10_000), 1)
        .await
        .unwrap();
    let demand = Resources::new(1, 100, 1);
    // Callers that give up at every point of a claim's life.
    for k in 0..200 {
        let uuid = format!("gone{k}");
        let mut claim = Box::pin(ledger.claim(host, &uuid, &demand, 1));
        // Polled k times (each poll lets the connection's thread run a little), then dropped.
        for _ in 0..k % 20 {
            if futures::poll!(&mut claim).is_ready() {
                break;
            }
            tokio::task::yield_now().await;
        }
        drop(claim);
        tokio::task::yield_now().await;
    }
    // The connection is still usable and every claim that happened is whole.
    assert_eq!(
        ledger.claim(host, "kept", &demand, 1).await.unwrap(),
        ClaimOutcome::Claimed
    );
    // Abandoned claims already queued are still committed, in groups of their own (several
    // at once on PostgreSQL): wait until none is pending in the table, not for a fixed time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while ledger.table().pending(host) != Some(Resources::ZERO) {
        assert!(
            std::time::Instant::now() < deadline,
            "claims still pending: {:?}",
            ledger.table().pending(host)
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let count = ledger.allocation_count().await.unwrap();
    assert!(count >= 1);
    let h = ledger.read_hosts().await.unwrap().remove(0);
    assert_eq!(h.num_instances, count);
    assert_eq!(h.used, Resources::new(count, 100 * count, count));
}
on_both_engines!(
    a_claim_its_caller_abandons_is_applied_whole_or_not_at_all,
    super::a_claim_its_caller_abandons_is_applied_whole_or_not_at_all
);

async fn only_imported_allocations_placement_no_longer_has_are_released(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let host = ledger
        .register_host(&registration("h", 100, 100_000, 1_000), 1)
        .await
        .unwrap();
    let d = Resources::new(1, 100, 10);
    for uuid in ["kept-import", "gone-import"] {
        assert!(ledger
            .record_existing_allocation(host, uuid, &d, 1)
            .await
            .unwrap());
    }
    assert_eq!(
        ledger.claim(host, "own", &d, 1).await.unwrap(),
        ClaimOutcome::Claimed
    );
    // Placement now has only `kept-import` on the host (and not Parasol's own claim).
    let released = ledger
        .release_vanished_imports(host, &["kept-import"])
        .await
        .unwrap();
    let names: Vec<&str> = released.iter().map(|a| a.instance_uuid.as_str()).collect();
    assert_eq!(names, ["gone-import"]);
    assert!(ledger.allocation("gone-import").await.unwrap().is_none());
    assert!(ledger.allocation("kept-import").await.unwrap().is_some());
    assert!(ledger.allocation("own").await.unwrap().is_some());
    let h = ledger.read_hosts().await.unwrap().remove(0);
    // The import counts in the usage, as an instance only once an instance message names
    // it (it may be a migration record): the own claim is the one instance.
    assert_eq!((h.used, h.num_instances), (Resources::new(2, 200, 20), 1));
    // Nothing left to release.
    let again = ledger.release_vanished_imports(host, &[]).await.unwrap();
    assert_eq!(
        again.len(),
        1,
        "kept-import goes once Placement drops it too"
    );
    assert!(ledger
        .release_vanished_imports(host, &[])
        .await
        .unwrap()
        .is_empty());
}
on_both_engines!(
    only_imported_allocations_placement_no_longer_has_are_released,
    super::only_imported_allocations_placement_no_longer_has_are_released
);

/// Runs `claims` (host, instance, time) while `blocker` holds SQLite's write lock, so that
/// they pile up in the writer's queue in this order; answers each claim's result.
async fn claims_behind_a_held_write_lock(
    ledger: &Ledger,
    blocker: &mut sqlx::SqliteConnection,
    claims: Vec<(HostId, String, i64)>,
) -> Vec<Result<ClaimOutcome, parasol::ledger::LedgerError>> {
    let demand = Resources::new(1, 1000, 10);
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for (host, uuid, now_ms) in claims {
        let before = ledger.table().pending(host);
        let claim = {
            let ledger = ledger.clone();
            tokio::spawn(async move { ledger.claim(host, &uuid, &demand, now_ms).await })
        };
        // The next claim starts only once this one is in the writer's queue: its reservation
        // shows in the table (a claim reserves and queues in one step, with no await between),
        // or it was answered without the writer (no room left in the table).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !claim.is_finished() && ledger.table().pending(host) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "a claim neither reserved nor answered"
            );
            tokio::task::yield_now().await;
        }
        tasks.push(claim);
    }
    sqlx::query("COMMIT").execute(&mut *blocker).await.unwrap();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    results
}

/// SQLite commits the claims that queue while its writer is busy together, in one
/// transaction: each must still get its own outcome, in the order the claims arrived, and a
/// reschedule in the same group must still move its allocation.
#[tokio::test]
async fn claims_queued_behind_a_busy_sqlite_writer_each_get_their_own_outcome() {
    use sqlx::Connection;
    let (ledger, db) = ledger("sqlite").await;
    let small = ledger
        .register_host(&registration("small", 5, 5_000, 50), 1)
        .await
        .unwrap();
    let big = ledger
        .register_host(&registration("big", 100, 100_000, 1_000), 1)
        .await
        .unwrap();
    let mut blocker = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    let mut claims: Vec<_> = (0..20).map(|i| (small, format!("c{i}"), 1)).collect();
    claims.push((big, "c0".into(), 2));
    let mut outcomes: Vec<ClaimOutcome> =
        claims_behind_a_held_write_lock(&ledger, &mut blocker, claims)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    let moved = outcomes.pop().unwrap();
    let claimed: Vec<usize> = (0..20)
        .filter(|&i| outcomes[i] == ClaimOutcome::Claimed)
        .collect();
    assert_eq!(
        claimed,
        vec![0, 1, 2, 3, 4],
        "the first five that arrived fit"
    );
    assert_eq!(moved, ClaimOutcome::Claimed);
    let c0 = ledger.allocation("c0").await.unwrap().unwrap();
    assert_eq!(c0.host_id, big, "the reschedule moved c0");
    let hosts = ledger.read_hosts().await.unwrap();
    let host = |id| hosts.iter().find(|h| h.id == id).unwrap();
    assert_eq!(host(small).used, Resources::new(4, 4000, 40));
    assert_eq!(host(small).num_instances, 4);
    assert_eq!(host(big).used, Resources::new(1, 1000, 10));
    assert_eq!(ledger.allocation_count().await.unwrap(), 5);
}

/// When a claim makes its group's transaction fail, the group is rolled back and retried one
/// claim at a time: only the failing claim gets the error, the others their own outcome.
#[tokio::test]
async fn a_claim_that_fails_its_group_gets_the_error_alone() {
    use sqlx::Connection;
    let (ledger, db) = ledger("sqlite").await;
    let host = ledger
        .register_host(&registration("h", 100, 100_000, 1_000), 1)
        .await
        .unwrap();
    let mut other = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    // An operator's trigger (any per-row failure would do) refuses one instance.
    sqlx::query(
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON allocations \
         WHEN NEW.instance_uuid = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned row'); END",
    )
    .execute(&mut other)
    .await
    .unwrap();
    let names = ["first", "a", "poison", "b", "c"];
    let claims = names.iter().map(|n| (host, n.to_string(), 1)).collect();
    let results = claims_behind_a_held_write_lock(&ledger, &mut other, claims).await;
    for (name, result) in names.iter().zip(&results) {
        match *name {
            "poison" => {
                let err = result.as_ref().unwrap_err().to_string();
                assert!(err.contains("poisoned row"), "{err}");
            }
            _ => assert_eq!(result.as_ref().unwrap(), &ClaimOutcome::Claimed, "{name}"),
        }
    }
    assert_eq!(ledger.allocation_count().await.unwrap(), 4);
    assert!(ledger.allocation("poison").await.unwrap().is_none());
    let h = ledger.read_hosts().await.unwrap().remove(0);
    assert_eq!(h.used, Resources::new(4, 4000, 40));
}

#[tokio::test]
async fn a_sqlite_ledger_creates_its_folder_or_names_the_file_it_cannot_open() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b/parasol.db");
    let ledger = parasol::ledger::Ledger::connect(&format!("sqlite://{}", nested.display()), 2)
        .await
        .expect("the missing folders are created");
    ledger.migrate().await.unwrap();
    assert!(nested.is_file());
    // A folder that cannot be created (its parent is a file) is named in the error.
    let blocked = nested.join("x.db");
    let err = parasol::ledger::Ledger::connect(&format!("sqlite://{}", blocked.display()), 2)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&nested.display().to_string()), "{err}");
}

/// Two processes on one PostgreSQL ledger: `a`, and `b` following the others' changes until
/// `stop` (the database is dropped with the returned handle).
async fn two_processes_on_postgres() -> (
    Ledger,
    Ledger,
    support::TestDb,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let (a, db) = ledger("postgres").await;
    let b = parasol::ledger::Ledger::open(&db.url, 4).await.unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let follow = {
        let b = b.clone();
        let stop = stop.clone();
        tokio::spawn(async move { b.follow(Arc::new(parasol::clock::SystemClock), stop).await })
    };
    (a, b, db, stop, follow)
}

/// Waits (10 s at most) until `check` holds, failing with what the following process never
/// saw.
async fn wait(what: &str, check: Box<dyn Fn() -> bool + Send>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "b never saw {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Registers host `c1` (8 VCPU, 8 GB, 80 GB) through `a` and waits until `b` has it.
async fn host_both_see(a: &Ledger, b: &Ledger) -> parasol::domain::HostId {
    let id = a
        .register_host(&registration("c1", 8, 8192, 80), 1)
        .await
        .unwrap();
    let t = b.table().clone();
    wait("the new host", Box::new(move || t.get(id).is_some())).await;
    id
}

/// PostgreSQL: each process' live table follows the hosts, claims and releases the others
/// commit, without being asked (the ledger's change notifications).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_process_table_follows_another_process_changes_on_postgres() {
    let (a, b, _db, stop, follow) = two_processes_on_postgres().await;
    let id = host_both_see(&a, &b).await;
    assert_eq!(
        a.claim(id, "i1", &Resources::new(6, 100, 1), 2)
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
    let t = b.table().clone();
    wait(
        "the claim",
        Box::new(move || {
            t.get(id)
                .is_some_and(|h| h.used == Resources::new(6, 100, 1))
        }),
    )
    .await;
    // b no longer offers the room a took: its own claim is refused in memory.
    assert_eq!(
        b.claim(id, "i2", &Resources::new(4, 100, 1), 3)
            .await
            .unwrap(),
        ClaimOutcome::Declined
    );
    a.release("i1").await.unwrap();
    let t = b.table().clone();
    wait(
        "the release",
        Box::new(move || t.get(id).is_some_and(|h| h.used == Resources::ZERO)),
    )
    .await;
    stop.cancel();
    follow.await.unwrap();
}

/// PostgreSQL: a host counts as oversubscribed (`parasol_oversubscribed_hosts`) only when
/// what the ledger committed to it exceeds what it can give. A claim this process reserved and
/// has not committed yet, on a host another process has since filled, shows in the live table
/// on top of the other's commit (the table loads `used` = committed + reserved) until the
/// ledger declines it: not an oversubscribed host (the soak of 2026-12-03 read 1 once so).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_in_flight_on_a_host_another_process_filled_is_not_oversubscription_on_postgres() {
    let (a, b, _db, stop, follow) = two_processes_on_postgres().await;
    let id = host_both_see(&a, &b).await;
    // b has room in its view and reserves it; its commit has not run yet.
    let demand = Resources::new(8, 100, 1);
    assert_eq!(
        b.table().reserve(id, &demand),
        parasol::table::Reserve::Reserved
    );
    // a fills the host and commits first; b follows a's change.
    assert_eq!(
        a.claim(id, "i1", &demand, 2).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let t = b.table().clone();
    wait(
        "a's claim under its own reservation",
        Box::new(move || {
            t.get(id)
                .is_some_and(|h| h.used == Resources::new(16, 200, 2))
        }),
    )
    .await;
    assert_eq!(
        b.table().oversubscribed(),
        0,
        "b's reservation is not an allocation: the ledger holds 8 of 8"
    );
    assert_eq!(a.table().oversubscribed(), 0);
    // The ledger declines b's claim (here: b gives its reservation back, as a declined commit
    // does), and b's view is the ledger's again.
    b.table().undo(id, &demand);
    assert_eq!(b.table().get(id).unwrap().used, demand);
    // A host really over what it can give (its inventory lowered under what runs there)
    // counts, in both processes.
    a.register_host(&registration("c1", 4, 8192, 80), 3)
        .await
        .unwrap();
    assert_eq!(a.table().oversubscribed(), 1);
    let t = b.table().clone();
    wait(
        "the lowered inventory",
        Box::new(move || t.oversubscribed() == 1),
    )
    .await;
    stop.cancel();
    follow.await.unwrap();
}

/// PostgreSQL: two processes' batches re-registering the same hosts in opposite orders lock
/// the hosts in one order (by id, as claim rounds do), so neither is rolled back as a deadlock
/// (which the consumer would take for an outage and requeue the batch after).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_taking_the_same_hosts_in_opposite_orders_do_not_deadlock_on_postgres() {
    let (a, b, _db, stop, follow) = two_processes_on_postgres().await;
    let hosts: Vec<String> = (0..8).map(|h| format!("lock-{h}")).collect();
    let event = |who: &str, round: usize, host: &str| {
        // Another size every round: a re-registration, not a heartbeat.
        let inventory = [("VCPU".to_string(), Inventory::of(8 + round as i64))].into();
        host_state_event(
            &format!("{who}-{round}-{host}"),
            host,
            inventory,
            Vec::new(),
        )
    };
    let first: Vec<_> = hosts.iter().map(|h| event("a", 0, h)).collect();
    let out = parasol::notifications::apply_batch(&a, &first.iter().collect::<Vec<_>>(), 1)
        .await
        .unwrap();
    assert!(out.iter().all(Result::is_ok), "{out:?}");
    let t = b.table().clone();
    wait("the hosts", Box::new(move || t.snapshot().len() == 8)).await;
    for round in 1..=30 {
        let forward: Vec<_> = hosts.iter().map(|h| event("a", round, h)).collect();
        let backward: Vec<_> = hosts.iter().rev().map(|h| event("b", round, h)).collect();
        let (forward, backward) = (
            forward.iter().collect::<Vec<_>>(),
            backward.iter().collect::<Vec<_>>(),
        );
        let (x, y) = tokio::join!(
            parasol::notifications::apply_batch(&a, &forward, 2),
            parasol::notifications::apply_batch(&b, &backward, 2),
        );
        for (who, out) in [("a", x), ("b", y)] {
            let out = out.unwrap_or_else(|e| panic!("round {round}, {who}: {e}"));
            assert!(
                out.iter().all(Result::is_ok),
                "round {round}, {who}: {out:?}"
            );
        }
    }
    stop.cancel();
    follow.await.unwrap();
}

/// Issue 40's soak: PostgreSQL rolling a claim group back to break a deadlock (SQLSTATE 40P01)
/// is not an outage: the group runs again and the claim is answered, not refused with 503.
/// The rollback is PostgreSQL's own error, raised twice by a trigger on the allocations (a
/// sequence counts the runs: it is not rolled back with them).
#[tokio::test]
async fn a_claim_group_rolled_back_as_a_deadlock_runs_again_on_postgres() {
    let runs = claim_through_injected_fault(
        "IF nextval('injected_faults') <= 2 THEN
           RAISE EXCEPTION 'injected deadlock' USING ERRCODE = '40P01';
         END IF;",
    )
    .await;
    assert_eq!(runs, 3, "two runs rolled back, then the one that committed");
}

/// Issue 40's soak (medium3): PostgreSQL ending the claim's session mid-statement (an operator's
/// `pg_terminate_backend`, SQLSTATE 57P01) aborts the group's transaction: nothing committed,
/// and the group runs again on a new connection instead of answering the caller 503. The
/// trigger terminates its own session the first time an allocation is inserted (a sequence
/// counts the runs: it is not rolled back with them).
#[tokio::test]
async fn a_claim_group_whose_session_is_terminated_runs_again_on_postgres() {
    let runs = claim_through_injected_fault(
        "IF nextval('injected_faults') = 1 THEN
           PERFORM pg_terminate_backend(pg_backend_pid());
           PERFORM pg_sleep(5);
         END IF;",
    )
    .await;
    assert_eq!(
        runs, 2,
        "the run whose session was ended, then the one that committed"
    );
}

/// Claims on a PostgreSQL ledger whose allocations run `fault` (PL/pgSQL, counting its runs
/// with the sequence `injected_faults`, which is not rolled back with them) before every
/// insert; the claim must be made and the ledger and table hold it. Answers the runs.
async fn claim_through_injected_fault(fault: &str) -> i64 {
    use sqlx::Connection;
    let (ledger, db) = ledger("postgres").await;
    let host = ledger
        .register_host(&registration("c1", 4, 4096, 40), 1)
        .await
        .unwrap();
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql(&format!(
        "CREATE SEQUENCE injected_faults;
         CREATE FUNCTION inject_fault() RETURNS trigger AS $$
         BEGIN
           {fault}
           RETURN NEW;
         END $$ LANGUAGE plpgsql;
         CREATE TRIGGER inject_fault BEFORE INSERT ON allocations
           FOR EACH ROW EXECUTE FUNCTION inject_fault();"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let demand = Resources::new(2, 2048, 20);
    assert_eq!(
        ledger.claim(host, "i1", &demand, 1).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert!(ledger.allocation("i1").await.unwrap().is_some());
    assert_eq!(ledger.read_hosts().await.unwrap()[0].used, demand);
    assert_eq!(ledger.table().snapshot()[0].used, demand);
    sqlx::query_scalar("SELECT last_value FROM injected_faults")
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

/// Issue 16, item 3: an error is an outage only when the ledger itself failed; what the
/// database refuses in a message's values is not (the message is dead-lettered, not requeued).
#[tokio::test]
async fn database_errors_tell_an_outage_from_a_refused_value() {
    use parasol::ledger::LedgerError;
    use sqlx::Connection;
    let db = support::postgres_db().await;
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let refused = |e: sqlx::Error| LedgerError::from(e).is_outage();
    for (sql, value, what) in [
        ("SELECT $1::text", "a\u{0}b", "a NUL byte"),
        ("SELECT 1 / $1::int", "0", "a division by zero"),
        (
            "SELECT $1::bigint + 1",
            "9223372036854775807",
            "bigint out of range",
        ),
    ] {
        let e = sqlx::query(sql)
            .bind(value)
            .execute(&mut conn)
            .await
            .unwrap_err();
        assert!(!refused(e), "{what} is the value's fault");
    }
    sqlx::query("SET lock_timeout = 1")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("SET statement_timeout = 1")
        .execute(&mut conn)
        .await
        .unwrap();
    let e = sqlx::query("SELECT pg_sleep(1)")
        .execute(&mut conn)
        .await
        .unwrap_err();
    assert!(refused(e), "a cancelled statement is the ledger's");
    let unreachable = sqlx::PgConnection::connect("postgres://postgres@127.0.0.1:1/test")
        .await
        .unwrap_err();
    assert!(refused(unreachable), "an unreachable server is an outage");
    // SQLite: a read-only database is an outage.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("x.db").display());
    let mut rw = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE t (x INTEGER NOT NULL)")
        .execute(&mut rw)
        .await
        .unwrap();
    let e = sqlx::query("INSERT INTO t VALUES (NULL)")
        .execute(&mut rw)
        .await
        .unwrap_err();
    assert!(!refused(e), "a violated constraint is the value's fault");
    let ro = format!("sqlite://{}?mode=ro", dir.path().join("x.db").display());
    let mut ro = sqlx::SqliteConnection::connect(&ro).await.unwrap();
    let e = sqlx::query("INSERT INTO t VALUES (1)")
        .execute(&mut ro)
        .await
        .unwrap_err();
    assert!(refused(e), "a read-only database is an outage");
}

/// An `instance.delete.end` for `uuid` on `host`, as Nova's compute sends it.
fn delete_end(message_id: &str, uuid: &str, host: &str) -> parasol::nova::Notification {
    let captured: serde_json::Value = serde_json::from_str(include_str!(
        "fixtures/wire/instance.delete.end-notification.json"
    ))
    .unwrap();
    let mut inner = captured["decoded_oslo_message"].clone();
    inner["message_id"] = message_id.into();
    inner["publisher_id"] = format!("nova-compute:{host}").into();
    inner["payload"]["nova_object.data"]["uuid"] = uuid.into();
    inner["payload"]["nova_object.data"]["host"] = host.into();
    parasol::nova::Notification::from_inner(&inner).unwrap()
}

/// A failed move: Nova moves the instance's allocation to the migration's uuid and back. The
/// consistency repair released the instance's allocation in between; the one re-imported
/// afterwards is the instance's (counted in `num_instances`), while a consumer the ledger never
/// held as an instance (the migration record) stays a bare allocation. Once the instance is
/// deleted, its uuid is forgotten.
async fn a_reimported_instance_counts_as_one_until_it_is_deleted(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let host = ledger
        .register_host(&registration("h", 8, 8192, 80), 1)
        .await
        .unwrap();
    let d = Resources::new(1, 512, 1);
    let vm = "11111111-1111-4111-8111-111111111111";
    let migration = "22222222-2222-4222-8222-222222222222";
    let counts = || async {
        let h = ledger.read_hosts().await.unwrap().remove(0);
        (h.used, h.num_instances)
    };
    assert_eq!(
        ledger.claim(host, vm, &d, 1).await.unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(counts().await, (d, 1));

    // The move starts: Placement holds the source under the migration's uuid, the repair
    // releases the instance's allocation and the sync imports the migration's.
    let stored = ledger.stored_allocations().await.unwrap().remove(0);
    assert!(ledger.repair_allocation(&stored, None, 2).await.unwrap());
    assert!(ledger
        .record_existing_allocation(host, migration, &d, 2)
        .await
        .unwrap());
    assert_eq!(counts().await, (d, 0), "a migration record is no instance");

    // The move fails: the allocation goes back to the instance.
    assert_eq!(
        ledger
            .release_vanished_imports(host, &[])
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(ledger
        .record_existing_allocation(host, vm, &d, 3)
        .await
        .unwrap());
    assert_eq!(counts().await, (d, 1), "the re-imported instance counts");

    // Deleted: released and forgotten, so the same uuid imported again is no instance.
    let out = parasol::notifications::apply_batch(&ledger, &[&delete_end("m1", vm, "h")], 4)
        .await
        .unwrap();
    assert_eq!(out, [Ok(parasol::notifications::Applied::Applied)]);
    assert_eq!(counts().await, (Resources::ZERO, 0));
    assert!(ledger
        .record_existing_allocation(host, vm, &d, 5)
        .await
        .unwrap());
    assert_eq!(counts().await, (d, 0), "a deleted instance is forgotten");

    // A consumer never seen stays a bare allocation.
    let stranger = "33333333-3333-4333-8333-333333333333";
    assert!(ledger
        .record_existing_allocation(host, stranger, &d, 6)
        .await
        .unwrap());
    assert_eq!(counts().await, (Resources::new(2, 1024, 2), 0));
}
on_both_engines!(
    a_reimported_instance_counts_as_one_until_it_is_deleted,
    super::a_reimported_instance_counts_as_one_until_it_is_deleted
);

/// SQLite's hot writer never checkpoints at a commit (it would hold the next group's claims):
/// its checkpoint thread copies the write-ahead log back to the database file every 512
/// writes. Read without its WAL, the database file then holds those claims.
#[tokio::test]
async fn the_hot_writers_checkpoint_thread_copies_committed_claims_to_the_database_file() {
    use sqlx::Connection;
    let (ledger, db) = ledger("sqlite").await;
    let host = ledger
        .register_host(&registration("big", 100_000, 10_000_000, 1_000_000), 1)
        .await
        .unwrap();
    let demand = Resources::new(1, 1, 1);
    let checkpoints = ledger.commit_counters().checkpoints;
    // One caller: every claim is a group of its own. A checkpoint is asked every 512 writes;
    // one that a reader kept from copying the whole log is not counted, and the next ask
    // tries again.
    let mut made = 0;
    while checkpoints.get() == 0 {
        assert!(
            made < 10 * 512,
            "{made} claims committed and no checkpoint copied the whole log"
        );
        let out = ledger.claim(host, &format!("vm{made}"), &demand, 1).await;
        assert_eq!(out.unwrap(), ClaimOutcome::Claimed);
        made += 1;
    }
    assert!(made >= 512, "a checkpoint before 512 writes ({made})");
    // The database file alone (no write-ahead log beside it) holds what the checkpoint copied.
    let file = std::path::PathBuf::from(db.url.trim_start_matches("sqlite://"));
    let copy = file.with_file_name("without-wal.db");
    std::fs::copy(&file, &copy).unwrap();
    let url = format!("sqlite://{}", copy.display());
    let mut alone = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let in_file: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM allocations")
        .fetch_one(&mut alone)
        .await
        .unwrap();
    alone.close().await.unwrap();
    assert!(
        in_file >= 512,
        "the database file alone holds {in_file} of {made} claims"
    );
}

/// A `compute.host.state` event `id` of host `host` (its node of the same name) with this
/// inventory and these traits.
pub(crate) fn host_state_event(
    id: &str,
    host: &str,
    inventory: std::collections::BTreeMap<String, Inventory>,
    traits: Vec<String>,
) -> parasol::nova::Notification {
    use parasol::nova::{HostEvent, HostStatePayload, Notification};
    Notification {
        message_id: id.to_string(),
        event_type: "compute.host.state".into(),
        publisher_id: None,
        timestamp: None,
        event: HostEvent::HostState(HostStatePayload {
            compute_node_uuid: uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host.as_bytes())
                .to_string(),
            node: host.to_string(),
            host: host.to_string(),
            availability_zone: None,
            up: true,
            disabled: false,
            inventory,
            traits,
            aggregates: Vec::new(),
            usage: None,
            instance_usage: None,
            instance_qos: None,
        }),
    }
}

/// A `compute.host.state` event of host `host` (8 VCPUs) with message id `id`.
/// Whether each of `ids` is recorded as applied.
async fn processed(ledger: &Ledger, ids: &[&str]) -> Vec<bool> {
    let mut out = Vec::new();
    for id in ids {
        out.push(ledger.is_processed(id).await.unwrap());
    }
    out
}

fn beat(id: &str, host: &str) -> parasol::nova::Notification {
    let inventory = [("VCPU".to_string(), Inventory::of(8))].into();
    host_state_event(id, host, inventory, Vec::new())
}

async fn message_ids_are_forgotten_oldest_first_once_the_retention_has_passed(engine: &str) {
    use parasol::clock::{ManualClock, SharedClock};
    let (ledger, _db) = ledger(engine).await;
    // Three messages applied at 1, 2 and 3 seconds.
    for (i, at) in [1_000i64, 2_000, 3_000].into_iter().enumerate() {
        let n = beat(&format!("m{i}"), "retention-host");
        let out = parasol::notifications::apply_batch(&ledger, &[&n], at)
            .await
            .unwrap();
        assert!(out.iter().all(|o| o.is_ok()), "{out:?}");
    }
    assert_eq!(ledger.forget_messages(1_999).await.unwrap(), 1);
    assert_eq!(
        processed(&ledger, &["m0", "m1", "m2"]).await,
        [false, true, true]
    );
    // A redelivered duplicate of a message still remembered changes nothing.
    let again =
        parasol::notifications::apply_batch(&ledger, &[&beat("m1", "retention-host")], 3_100)
            .await
            .unwrap();
    assert!(format!("{again:?}").contains("Duplicate"), "{again:?}");

    // The sweeper, on the service's clock, with a retention of 1 s: at start it forgets what is
    // older than that (m1 at 2.0 s, the clock at 3.5 s), then every second of the clock.
    let clock = Arc::new(ManualClock::new(3_500));
    let shared: SharedClock = clock.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    let sweeper = tokio::spawn(parasol::ledger::run_message_retention(
        ledger.clone(),
        shared,
        1,
        stop.clone(),
    ));
    while clock.sleepers() == 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(processed(&ledger, &["m1", "m2"]).await, [false, true]);
    clock.advance_ms(1_000);
    let mut waited = 0;
    while processed(&ledger, &["m2"]).await == [true] {
        assert!(
            waited < 500,
            "the sweep after a second of the clock forgets m2 (3.0 s)"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        waited += 1;
    }
    stop.cancel();
    sweeper.await.unwrap();
}
on_both_engines!(
    message_ids_are_forgotten_oldest_first_once_the_retention_has_passed,
    super::message_ids_are_forgotten_oldest_first_once_the_retention_has_passed
);

/// The outcomes of a batch, as `Ok(Applied)`, `Ok(Duplicate)`...
fn outcomes(out: &[Result<parasol::notifications::Applied, String>]) -> Vec<String> {
    out.iter().map(|o| format!("{o:?}")).collect()
}

/// A message is recorded under its envelope's timestamp and its id (migration 0011): the same
/// envelope again, in a later batch, in the same batch or alone, is skipped; the ids are
/// forgotten from the earliest timestamp once both sent and applied before the cut.
async fn a_redelivery_with_its_timestamp_is_skipped_and_ids_are_forgotten_by_time(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    let at = |id: &str, sent_at: &str| {
        let mut n = beat(id, "time-host");
        n.timestamp = Some(sent_at.into());
        n
    };
    let (t1, t3) = ("1970-01-01 00:00:01.000000", "1970-01-01 00:00:03.000000");
    let apply = |batch: Vec<parasol::nova::Notification>, now_ms: i64| {
        let ledger = ledger.clone();
        async move {
            let batch: Vec<&parasol::nova::Notification> = batch.iter().collect();
            let out = parasol::notifications::apply_batch(&ledger, &batch, now_ms)
                .await
                .unwrap();
            outcomes(&out)
        }
    };
    assert_eq!(
        apply(vec![at("a", t1), at("b", t1)], 1_000).await,
        ["Ok(Applied)", "Ok(Applied)"]
    );
    assert_eq!(
        apply(vec![at("a", t1), at("c", t3), at("c", t3)], 3_000).await,
        ["Ok(Duplicate)", "Ok(Applied)", "Ok(Duplicate)"]
    );
    assert_eq!(
        parasol::notifications::apply(&ledger, &at("b", t1), 3_000)
            .await
            .unwrap(),
        parasol::notifications::Applied::Duplicate
    );
    // Sent at 1 s, applied at 3 s (it waited in the queue).
    assert_eq!(apply(vec![at("d", t1)], 3_000).await, ["Ok(Applied)"]);
    // At 2 s: a and b go; d, applied at 3 s, waits for its own retention; c was sent at 3 s.
    assert_eq!(ledger.forget_messages(1_999).await.unwrap(), 2);
    assert_eq!(
        processed(&ledger, &["a", "b", "c", "d"]).await,
        [false, false, true, true]
    );
    assert_eq!(ledger.forget_messages(3_000).await.unwrap(), 2);
    assert_eq!(processed(&ledger, &["c", "d"]).await, [false, false]);
}
on_both_engines!(
    a_redelivery_with_its_timestamp_is_skipped_and_ids_are_forgotten_by_time,
    super::a_redelivery_with_its_timestamp_is_skipped_and_ids_are_forgotten_by_time
);

/// The migrations up to 0010 (before the ids were keyed by time).
fn before_0011(m: sqlx::migrate::Migrator) -> sqlx::migrate::Migrator {
    let migrations: Vec<_> = m
        .migrations
        .iter()
        .filter(|m| m.version < 11)
        .cloned()
        .collect();
    sqlx::migrate::Migrator {
        migrations: migrations.into(),
        ..m
    }
}

/// A ledger with ids recorded before migration 0011 keeps them (keyed ("", id)) and skips
/// their redelivery, without a timestamp (a cast) and with one (a notification's envelope
/// carries it, a key of its own), in a batch and alone.
async fn ids_recorded_before_the_time_key_are_kept(engine: &str) {
    use sqlx::Connection;
    let db = support::db(engine).await;
    let old = "INSERT INTO processed_messages (message_id, processed_ms) VALUES ('old-1', 1000)";
    if engine == "sqlite" {
        let options: sqlx::sqlite::SqliteConnectOptions = db.url.parse().unwrap();
        let mut conn = sqlx::SqliteConnection::connect_with(&options.create_if_missing(true))
            .await
            .unwrap();
        before_0011(sqlx::migrate!("./migrations/sqlite"))
            .run(&mut conn)
            .await
            .unwrap();
        sqlx::query(old).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    } else {
        let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
        before_0011(sqlx::migrate!("./migrations/postgres"))
            .run(&mut conn)
            .await
            .unwrap();
        sqlx::query(old).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }
    let ledger = Ledger::open(&db.url, 8).await.unwrap();
    assert!(ledger.is_processed("old-1").await.unwrap());
    let again = parasol::notifications::apply_batch(&ledger, &[&beat("old-1", "old-host")], 2_000)
        .await
        .unwrap();
    assert_eq!(outcomes(&again), ["Ok(Duplicate)"]);
    let mut stamped = beat("old-1", "old-host");
    stamped.timestamp = Some("2026-11-27 18:00:00.000000".into());
    let again = parasol::notifications::apply_batch(&ledger, &[&stamped], 2_000)
        .await
        .unwrap();
    assert_eq!(
        outcomes(&again),
        ["Ok(Duplicate)"],
        "with a timestamp, in a batch"
    );
    let alone = parasol::notifications::apply(&ledger, &stamped, 2_000).await;
    assert!(
        matches!(alone, Ok(parasol::notifications::Applied::Duplicate)),
        "with a timestamp, alone: {alone:?}"
    );
    // The writer remembers a ledger without such ids, never one with them: after a new
    // message alone, the old id is still found.
    let mut fresh = beat("new-1", "old-host");
    fresh.timestamp = Some("2026-11-27 18:00:01.000000".into());
    let applied = parasol::notifications::apply(&ledger, &fresh, 2_000).await;
    assert!(
        matches!(applied, Ok(parasol::notifications::Applied::Applied)),
        "{applied:?}"
    );
    let alone = parasol::notifications::apply(&ledger, &stamped, 2_000).await;
    assert!(
        matches!(alone, Ok(parasol::notifications::Applied::Duplicate)),
        "with a timestamp, alone, after another message: {alone:?}"
    );
    assert_eq!(
        recorded_keys(engine, &db.url, "old-1").await,
        1,
        "a skipped redelivery records no key of its own"
    );
    // Still forgotten by the time it was applied.
    assert_eq!(ledger.forget_messages(999).await.unwrap(), 0);
    assert_eq!(ledger.forget_messages(1_000).await.unwrap(), 1);
    assert!(!ledger.is_processed("old-1").await.unwrap());
}
on_both_engines!(
    ids_recorded_before_the_time_key_are_kept,
    super::ids_recorded_before_the_time_key_are_kept
);

/// How many keys record `message_id`, read over a connection of its own.
async fn recorded_keys(engine: &str, url: &str, message_id: &str) -> i64 {
    use sqlx::Connection;
    let sql = "SELECT COUNT(*) FROM processed_messages WHERE message_id = $1";
    if engine == "sqlite" {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql)
            .bind(message_id)
            .fetch_one(&mut c)
            .await
            .unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql)
            .bind(message_id)
            .fetch_one(&mut c)
            .await
            .unwrap()
    }
}

/// An `instance.create.end` for `uuid` on `host` with amounts `demand`.
fn create_end(
    message_id: &str,
    uuid: &str,
    host: &str,
    demand: Resources,
) -> parasol::nova::Notification {
    parasol::nova::Notification {
        message_id: message_id.into(),
        event_type: "instance.create.end".into(),
        publisher_id: None,
        timestamp: None,
        event: parasol::nova::HostEvent::Upsert {
            instance_uuid: uuid.into(),
            host: host.into(),
            node: None,
            demand,
            flavor: "f".into(),
        },
    }
}

/// An instance's notifications applied out of order: its `instance.delete.end` before its
/// `instance.create.end` (a quorum queue's redelivery, or two processes sharing the queue). The
/// deletion is remembered, so the late creation brings no allocation back, on a host either
/// batch; the memory lasts `[ledger] message_retention_s`, as the ids do.
async fn a_creation_applied_after_its_instance_s_deletion_allocates_nothing(engine: &str) {
    let (ledger, _db) = ledger(engine).await;
    ledger
        .register_host(&registration("h", 8, 8192, 80), 1)
        .await
        .unwrap();
    let d = Resources::new(2, 1024, 10);
    let (vm, other) = (
        "44444444-4444-4444-8444-444444444444",
        "55555555-5555-4555-8555-555555555555",
    );
    let used = || async { ledger.read_hosts().await.unwrap().remove(0).used };
    let applied = [Ok(parasol::notifications::Applied::Applied)];
    // In separate batches, then the pair of another instance in one batch.
    let out = parasol::notifications::apply_batch(&ledger, &[&delete_end("d1", vm, "h")], 1_000)
        .await
        .unwrap();
    assert_eq!(out, applied);
    let out = parasol::notifications::apply_batch(&ledger, &[&create_end("c1", vm, "h", d)], 1_100)
        .await
        .unwrap();
    assert_eq!(out, applied);
    assert_eq!(
        used().await,
        Resources::ZERO,
        "the deleted instance holds nothing"
    );
    let (d2, c2) = (
        delete_end("d2", other, "h"),
        create_end("c2", other, "h", d),
    );
    let out = parasol::notifications::apply_batch(&ledger, &[&d2, &c2], 1_200)
        .await
        .unwrap();
    assert_eq!(out, [applied[0].clone(), applied[0].clone()]);
    assert_eq!(used().await, Resources::ZERO);
    assert!(ledger.stored_allocations().await.unwrap().is_empty());

    // In order, an instance is created and then deleted as before.
    let third = "66666666-6666-4666-8666-666666666666";
    let create = create_end("c3", third, "h", d);
    parasol::notifications::apply_batch(&ledger, &[&create], 1_300)
        .await
        .unwrap();
    assert_eq!(used().await, d);
    parasol::notifications::apply_batch(&ledger, &[&delete_end("d3", third, "h")], 1_400)
        .await
        .unwrap();
    assert_eq!(used().await, Resources::ZERO);

    // Forgotten with the ids: a creation after that is applied (Nova never reuses a uuid).
    ledger.forget_messages(1_000).await.unwrap();
    let late = create_end("c4", vm, "h", d);
    parasol::notifications::apply_batch(&ledger, &[&late], 2_000)
        .await
        .unwrap();
    assert_eq!(used().await, d, "remembered no longer than the retention");
}
on_both_engines!(
    a_creation_applied_after_its_instance_s_deletion_allocates_nothing,
    super::a_creation_applied_after_its_instance_s_deletion_allocates_nothing
);

/// Per host id: the instance count its row keeps (PostgreSQL, migration 0010; SQLite keeps
/// none and counts at load, so it answers the count there too) and the count of its
/// allocations, read over a connection of its own (not the ledger's).
async fn counted_instances(engine: &str, url: &str) -> Vec<(i64, i64, i64)> {
    use sqlx::Connection;
    let count = "(SELECT COUNT(*) FROM allocations a WHERE a.host_id = h.id AND a.instance)";
    if engine == "sqlite" {
        let sql = format!("SELECT h.id, {count}, {count} FROM hosts h ORDER BY h.id");
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_as(&sql).fetch_all(&mut c).await.unwrap()
    } else {
        let sql = format!("SELECT h.id, h.instances, {count} FROM hosts h ORDER BY h.id");
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_as(&sql).fetch_all(&mut c).await.unwrap()
    }
}

/// Each host's instance count follows whatever inserts, deletes, moves or flags allocations:
/// claims, a reschedule, releases, imports and the instance message that makes an imported
/// consumer an instance. On PostgreSQL the host's row keeps it (migration 0010); the row, a
/// count of the allocations, the live table and a load from the ledger agree after each step.
async fn the_kept_instance_count_follows_every_allocation_write(engine: &str) {
    let (ledger, db) = ledger(engine).await;
    let h1 = ledger
        .register_host(&registration("h1", 8, 8192, 80), 1)
        .await
        .unwrap();
    let h2 = ledger
        .register_host(&registration("h2", 8, 8192, 80), 1)
        .await
        .unwrap();
    let d = Resources::new(1, 512, 1);
    let (i1, i2, i3) = (
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
        "33333333-3333-4333-8333-333333333333",
    );
    let check = |want: [i64; 2], what: &'static str| {
        let (ledger, url) = (ledger.clone(), db.url.clone());
        async move {
            let rows = counted_instances(engine, &url).await;
            let kept: Vec<(i64, i64)> = rows.iter().map(|r| (r.1, r.2)).collect();
            assert_eq!(
                kept,
                vec![(want[0], want[0]), (want[1], want[1])],
                "{what}: (kept, counted) per host"
            );
            let table: Vec<i64> = ledger
                .read_hosts()
                .await
                .unwrap()
                .iter()
                .map(|h| h.num_instances)
                .collect();
            assert_eq!(table, want, "{what}: the live table");
            ledger.reload_all().await.unwrap();
            let loaded: Vec<i64> = ledger
                .read_hosts()
                .await
                .unwrap()
                .iter()
                .map(|h| h.num_instances)
                .collect();
            assert_eq!(loaded, want, "{what}: loaded from the ledger");
        }
    };
    for (uuid, host) in [(i1, h1), (i2, h1), (i3, h2)] {
        assert_eq!(
            ledger.claim(host, uuid, &d, 2).await.unwrap(),
            ClaimOutcome::Claimed
        );
    }
    check([2, 1], "three claims").await;
    assert_eq!(
        ledger.claim(h2, i2, &d, 3).await.unwrap(),
        ClaimOutcome::Claimed
    );
    check([1, 2], "a reschedule").await;
    ledger.release(i1).await.unwrap();
    ledger.release(i1).await.unwrap();
    check([0, 2], "a release, twice").await;
    let stranger = "44444444-4444-4444-8444-444444444444";
    assert!(ledger
        .record_existing_allocation(h1, stranger, &d, 4)
        .await
        .unwrap());
    check([0, 2], "an imported consumer").await;
    let out =
        parasol::notifications::apply_batch(&ledger, &[&create_end("m1", stranger, "h1", d)], 5)
            .await
            .unwrap();
    assert_eq!(out, [Ok(parasol::notifications::Applied::Applied)]);
    check(
        [1, 2],
        "the imported consumer named by its instance.create.end",
    )
    .await;
    let out = parasol::notifications::apply_batch(
        &ledger,
        &[&create_end("m2", i3, "h2", d), &delete_end("m3", i2, "h2")],
        6,
    )
    .await
    .unwrap();
    assert_eq!(out.len(), 2);
    check([1, 1], "a build confirmed and an instance deleted").await;
}
on_both_engines!(
    the_kept_instance_count_follows_every_allocation_write,
    super::the_kept_instance_count_follows_every_allocation_write
);

/// PostgreSQL's migration 0010 counts the instances a ledger already holds into their hosts'
/// rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_instance_count_migration_counts_existing_allocations_on_postgres() {
    use sqlx::Connection;
    let db = support::db("postgres").await;
    let setup = [
        "INSERT INTO hosts (id, host, node, uuid) VALUES (1, 'a', 'a', 'ua'), (2, 'b', 'b', 'ub'), \
         (3, 'c', 'c', 'uc')",
        "INSERT INTO allocations (instance_uuid, host_id, resources, created_ms, instance) VALUES \
         ('i1', 1, '{}', 0, TRUE), ('i2', 1, '{}', 0, TRUE), ('i3', 1, '{}', 0, FALSE), \
         ('i4', 2, '{}', 0, TRUE)",
    ];
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut migrator = sqlx::migrate!("./migrations/postgres");
    migrator.migrations = migrator
        .migrations
        .iter()
        .filter(|m| m.version < 10)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    migrator.run(&mut conn).await.unwrap();
    for sql in setup {
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
    let ledger = Ledger::open(&db.url, 2).await.unwrap();
    let counts: Vec<i64> = ledger
        .read_hosts()
        .await
        .unwrap()
        .iter()
        .map(|h| h.num_instances)
        .collect();
    assert_eq!(counts, [2, 1, 0]);
    let rows = counted_instances("postgres", &db.url).await;
    assert_eq!(rows, [(1, 2, 2), (2, 1, 1), (3, 0, 0)]);
}

/// PostgreSQL: an allocation that becomes an instance (the `instance.create.end` of a consumer
/// imported from Placement) changes its host's instance count, and the other processes see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_process_sees_an_imported_consumer_become_an_instance_on_postgres() {
    let (a, b, _db, stop, follow) = two_processes_on_postgres().await;
    let id = a
        .register_host(&registration("c1", 8, 8192, 80), 1)
        .await
        .unwrap();
    let d = Resources::new(1, 512, 1);
    let vm = "44444444-4444-4444-8444-444444444444";
    assert!(a.record_existing_allocation(id, vm, &d, 2).await.unwrap());
    let t = b.table().clone();
    wait(
        "the imported allocation",
        Box::new(move || t.get(id).is_some_and(|h| h.used == d)),
    )
    .await;
    assert_eq!(b.table().get(id).unwrap().num_instances, 0);
    let out = parasol::notifications::apply_batch(&a, &[&create_end("m1", vm, "c1", d)], 3)
        .await
        .unwrap();
    assert_eq!(out, [Ok(parasol::notifications::Applied::Applied)]);
    assert_eq!(a.table().get(id).unwrap().num_instances, 1);
    let t = b.table().clone();
    wait(
        "the consumer counted as an instance",
        Box::new(move || t.get(id).is_some_and(|h| h.num_instances == 1)),
    )
    .await;
    stop.cancel();
    follow.await.unwrap();
}

/// Runs `statement` (when given) on the ledger's database, then answers its count of hosts.
async fn hosts_after(engine: &str, url: &str, statement: Option<&str>) -> i64 {
    use sqlx::Connection;
    let count = "SELECT COUNT(*) FROM hosts";
    if engine == "sqlite" {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        if let Some(s) = statement {
            sqlx::query(s).execute(&mut c).await.unwrap();
        }
        sqlx::query_scalar(count).fetch_one(&mut c).await.unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        if let Some(s) = statement {
            sqlx::query(s).execute(&mut c).await.unwrap();
        }
        sqlx::query_scalar(count).fetch_one(&mut c).await.unwrap()
    }
}

/// A ledger a later Parasol migrated (here: a migration row this binary has no file for) is
/// refused at open with an error that says so and what to do, and left as it was.
async fn a_ledger_migrated_by_a_later_version_is_refused_with_what_to_do(engine: &str) {
    let (ledger, db) = ledger(engine).await;
    ledger
        .register_host(&registration("h1", 8, 8192, 100), 0)
        .await
        .unwrap();
    ledger.close().await;
    drop(ledger);
    let checksum = if engine == "sqlite" {
        "X'00'"
    } else {
        "'\\x00'::bytea"
    };
    let insert = format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
         execution_time) VALUES (9999, 'from a later parasol', TRUE, {checksum}, 0)"
    );
    assert_eq!(hosts_after(engine, &db.url, Some(&insert)).await, 1);
    let e = Ledger::open(&db.url, 2)
        .await
        .expect_err("a ledger with an unknown migration is refused");
    let message = e.to_string();
    assert!(
        message.contains("migration 9999")
            && message.contains("a later version of Parasol migrated it")
            && message.contains("restore the ledger's backup"),
        "{message}"
    );
    assert!(!e.is_outage(), "not something a retry mends: {message}");
    // Left as it was: the host is still there once the later version runs again.
    assert_eq!(hosts_after(engine, &db.url, None).await, 1);
}
on_both_engines!(
    a_ledger_migrated_by_a_later_version,
    super::a_ledger_migrated_by_a_later_version_is_refused_with_what_to_do
);

/// A first run (`parasol serve` on the embedded default, an empty ledger in the data folder)
/// writes out a small log: the folder holds a few MiB, not the log's 256 MiB working size
/// (`[ledger] wal_prewrite_mib`, the default, is only the ceiling).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_run_writes_out_a_small_log_not_the_working_size() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut settings = parasol::configuration::Settings::default();
    assert_eq!(settings.ledger.wal_prewrite_mib, 256, "the default");
    settings.ledger.data_dir = data.clone();
    settings.amqp.url = String::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let app = parasol::startup::Application::build_with(
        settings,
        listener,
        Arc::new(parasol::clock::SystemClock),
    )
    .await
    .expect("the service builds");
    let sizes: Vec<(String, u64)> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    let log = sizes
        .iter()
        .find(|(name, _)| name == "parasol.db-wal")
        .map(|(_, len)| *len);
    assert_eq!(log, Some(1 << 20), "written out to its floor: {sizes:?}");
    let total: u64 = sizes.iter().map(|(_, len)| len).sum();
    assert!(total < 2 << 20, "the data folder after start: {sizes:?}");
    drop(app);
}

/// Issue 40 (soak short1: 23 boots found their host given away): two processes consume one
/// notification queue and share a PostgreSQL ledger. A claim's confirmation may be in the other
/// process's hands or behind its backlog: one process's own mark having passed the claim's
/// deadline must not expire it while the other's has not.
#[tokio::test]
async fn a_claim_does_not_expire_while_another_process_on_the_ledger_lags_on_postgres() {
    const T0: i64 = 1_800_000_000_000;
    const TTL_MS: u64 = 600_000;
    let (a, db) = ledger("postgres").await;
    let b = Ledger::open(&db.url, 4).await.expect("second process");
    a.ingest_mark().watch();
    b.ingest_mark().watch();
    let host = a
        .register_host(&registration("c1", 8, 8192, 80), T0)
        .await
        .unwrap();
    let size = Resources::new(1, 1024, 10);
    assert_eq!(
        a.claim(host, "i1", &size, T0).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let now = T0 + 10 * TTL_MS as i64;
    // a has caught up; b still works through a backlog sent a second after the claim.
    a.ingest_mark().idle_since(now);
    b.ingest_mark().taken(1);
    b.ingest_mark().applied(1, Some(T0 + 1_000));
    assert!(b
        .sweep_expired_claims(now, TTL_MS)
        .await
        .unwrap()
        .is_empty());
    let swept = a.sweep_expired_claims(now, TTL_MS).await.unwrap();
    assert!(swept.is_empty(), "a expired {swept:?} while b lags");
    assert!(a.allocation("i1").await.unwrap().is_some());
    // b catches up: both marks have passed the deadline, and the claim nothing confirmed goes.
    b.ingest_mark().idle_since(now);
    let swept = b.sweep_expired_claims(now, TTL_MS).await.unwrap();
    let swept: Vec<&str> = swept.iter().map(|x| x.instance_uuid.as_str()).collect();
    assert_eq!(swept, vec!["i1"]);
}

/// A process killed mid-backlog holds the others' expiry back only while its word holds (three
/// of its sweep intervals: its unapplied messages went back to the queue); one stopped cleanly
/// withdraws its mark at once.
#[tokio::test]
async fn a_lagging_process_holds_expiry_back_only_while_its_mark_holds_on_postgres() {
    const T0: i64 = 1_800_000_000_000;
    const TTL_MS: u64 = 600_000;
    let interval = parasol::ledger::sweep_interval_ms(TTL_MS) as i64;
    let (a, db) = ledger("postgres").await;
    let b = Ledger::open(&db.url, 4).await.expect("second process");
    let c = Ledger::open(&db.url, 4).await.expect("third process");
    for l in [&a, &b, &c] {
        l.ingest_mark().watch();
    }
    let host = a
        .register_host(&registration("c1", 8, 8192, 80), T0)
        .await
        .unwrap();
    let size = Resources::new(1, 1024, 10);
    for id in ["i1", "i2"] {
        a.claim(host, id, &size, T0).await.unwrap();
    }
    let now = T0 + 10 * TTL_MS as i64;
    a.ingest_mark().idle_since(now + 10 * interval);
    // b lags, publishes its mark, then dies (publishes nothing more).
    b.ingest_mark().applied(0, Some(T0 + 1_000));
    b.sweep_expired_claims(now, TTL_MS).await.unwrap();
    assert!(a
        .sweep_expired_claims(now + 2 * interval, TTL_MS)
        .await
        .unwrap()
        .is_empty());
    // c lags and stops cleanly.
    c.ingest_mark().applied(0, Some(T0 + 1_000));
    c.sweep_expired_claims(now + 2 * interval, TTL_MS)
        .await
        .unwrap();
    // Past b's word, c still holds a back; once c withdraws, both claims go.
    assert!(a
        .sweep_expired_claims(now + 3 * interval, TTL_MS)
        .await
        .unwrap()
        .is_empty());
    c.withdraw_mark().await.unwrap();
    let swept = a
        .sweep_expired_claims(now + 3 * interval, TTL_MS)
        .await
        .unwrap();
    assert_eq!(swept.len(), 2, "{swept:?}");
}
