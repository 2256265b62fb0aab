use super::effect::registration;
use super::*;
use crate::ledger::Ledger;
use crate::nova::{HostEvent, Notification};
use serde_json::{json, Value};

/// A fixed UUID per name: the codec takes instance and compute node ids as UUIDs only.
fn uuid_of(name: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).to_string()
}

fn host_state(id: &str, host: &str, vcpu: i64) -> Value {
    json!({"message_id": id, "event_type": "compute.host.state", "payload": {
        "host": host, "compute_node_uuid": uuid_of(host),
        "inventory": {"VCPU": {"total": vcpu}, "MEMORY_MB": {"total": 4096}, "DISK_GB": {"total": 100}}}})
}

fn create_end(id: &str, instance: &str, host: &str, vcpus: i64) -> Value {
    instance_end("instance.create.end", id, instance, host, vcpus)
}

fn instance_end(event: &str, id: &str, instance: &str, host: &str, vcpus: i64) -> Value {
    let flavor = json!({"nova_object.name": "FlavorPayload", "nova_object.namespace": "nova",
        "nova_object.version": "1.4", "nova_object.data": {"flavorid": "1", "name": "f",
        "vcpus": vcpus, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}});
    json!({"message_id": id, "event_type": event, "payload": {
        "nova_object.name": "InstanceCreatePayload", "nova_object.namespace": "nova",
        "nova_object.version": "1.13", "nova_object.data": {
            "uuid": uuid_of(instance), "host": host, "node": host, "flavor": flavor}}})
}

async fn ledger() -> (Ledger, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("l.db").display());
    let ledger = Ledger::connect(&url, 2).await.unwrap();
    ledger.migrate().await.unwrap();
    (ledger, dir)
}

#[tokio::test]
async fn a_rejected_message_rolls_back_alone_and_duplicates_within_a_batch_are_skipped() {
    let (ledger, _dir) = ledger().await;
    let mut batch: Vec<Notification> = [
        host_state("m1", "a", 8),
        create_end("m2", "vm-negative", "a", 1),
        create_end("m3", "vm-ghost", "ghost", 1),
        host_state("m1", "a", 8),
        create_end("m5", "vm", "a", 2),
        create_end("m5", "vm", "a", 2),
    ]
    .iter()
    .map(|v| Notification::from_inner(v).unwrap_or_else(|e| panic!("{v}: {e}")))
    .collect();
    // The codec refuses negative sizes; built by hand, validation refuses them too.
    if let HostEvent::Upsert { demand, .. } = &mut batch[1].event {
        *demand = crate::domain::Resources::new(-1, 512, 1);
    }
    let refs: Vec<&Notification> = batch.iter().collect();
    let out = apply_batch(&ledger, &refs, 0).await.unwrap();
    assert_eq!(out[0], Ok(Applied::Applied));
    assert!(
        out[1].as_ref().unwrap_err().contains("negative"),
        "{:?}",
        out[1]
    );
    assert!(
        out[2]
            .as_ref()
            .unwrap_err()
            .contains("unknown host \"ghost\""),
        "{:?}",
        out[2]
    );
    assert_eq!(
        out[3..],
        [
            Ok(Applied::Duplicate),
            Ok(Applied::Applied),
            Ok(Applied::Duplicate)
        ]
    );
    // The rejected message left no trace, not even its id: a redelivery is judged afresh.
    assert!(!ledger.is_processed("m3").await.unwrap());
    assert!(ledger.is_processed("m5").await.unwrap());
    let hosts = ledger.read_hosts().await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].used, crate::domain::Resources::new(2, 512, 1));
    // Across batches too.
    let again = apply_batch(&ledger, &refs[4..5], 0).await.unwrap();
    assert_eq!(again, vec![Ok(Applied::Duplicate)]);
}

#[tokio::test]
async fn a_clean_batch_records_every_id_once_and_skips_duplicates_and_invalid_messages() {
    let (ledger, _dir) = ledger().await;
    let mut batch: Vec<Notification> = [
        host_state("m1", "a", 8),
        create_end("m2", "vm-negative", "a", 1),
        create_end("m5", "vm", "a", 2),
        create_end("m5", "vm", "a", 2),
        host_state("m1", "a", 8),
    ]
    .iter()
    .map(|v| Notification::from_inner(v).unwrap())
    .collect();
    if let HostEvent::Upsert { demand, .. } = &mut batch[1].event {
        *demand = crate::domain::Resources::new(-1, 512, 1);
    }
    let refs: Vec<&Notification> = batch.iter().collect();
    let out = apply_batch(&ledger, &refs, 0).await.unwrap();
    assert_eq!(out[0], Ok(Applied::Applied));
    assert!(out[1].is_err(), "{:?}", out[1]);
    assert_eq!(
        out[2..],
        [
            Ok(Applied::Applied),
            Ok(Applied::Duplicate),
            Ok(Applied::Duplicate)
        ]
    );
    // The invalid message is not recorded: it is dead-lettered, not marked as done.
    assert!(!ledger.is_processed("m2").await.unwrap());
    assert!(ledger.is_processed("m1").await.unwrap() && ledger.is_processed("m5").await.unwrap());
    let hosts = ledger.read_hosts().await.unwrap();
    assert_eq!(hosts[0].used, crate::domain::Resources::new(2, 512, 1));
    assert_eq!(hosts[0].num_instances, 1);
    // The next batch: an old id is a duplicate, a new one applies.
    let next: Vec<Notification> = [
        create_end("m5", "vm", "a", 2),
        create_end("m6", "vm2", "a", 1),
    ]
    .iter()
    .map(|v| Notification::from_inner(v).unwrap())
    .collect();
    let out = apply_batch(&ledger, &next.iter().collect::<Vec<_>>(), 0)
        .await
        .unwrap();
    assert_eq!(out, vec![Ok(Applied::Duplicate), Ok(Applied::Applied)]);
    assert_eq!(
        ledger.read_hosts().await.unwrap()[0].used,
        crate::domain::Resources::new(3, 1024, 2)
    );
}

/// A consumer imported from Placement may be a migration record holding a move's source (Nova
/// moves the source allocation to the migration's uuid): its usage counts at once, as an
/// instance only once an instance message names it.
#[tokio::test]
async fn an_imported_consumer_counts_as_an_instance_only_once_named() {
    let (ledger, _dir) = ledger().await;
    let setup = [Notification::from_inner(&host_state("m1", "a", 8)).unwrap()];
    apply_batch(&ledger, &setup.iter().collect::<Vec<_>>(), 0)
        .await
        .unwrap();
    let host = ledger.read_hosts().await.unwrap()[0].id;
    let small = crate::domain::Resources::new(1, 512, 1);
    for consumer in ["migration", "vm-before-parasol"] {
        assert!(ledger
            .record_existing_allocation(host, &uuid_of(consumer), &small, 0)
            .await
            .unwrap());
    }
    let h = &ledger.read_hosts().await.unwrap()[0];
    assert_eq!(
        (h.used, h.num_instances),
        (crate::domain::Resources::new(2, 1024, 2), 0)
    );
    let named = Notification {
        message_id: "m2".into(),
        event_type: "update_instance_info".into(),
        publisher_id: None,
        timestamp: None,
        event: HostEvent::UpdateInstanceInfo {
            host: "a".into(),
            instance_uuids: vec![uuid_of("vm-before-parasol")],
        },
    };
    let out = apply_batch(&ledger, &[&named], 0).await.unwrap();
    assert_eq!(out, vec![Ok(Applied::Applied)]);
    let h = &ledger.read_hosts().await.unwrap()[0];
    assert_eq!(
        (h.used, h.num_instances),
        (crate::domain::Resources::new(2, 1024, 2), 1)
    );
    assert_eq!(
        ledger.table().get(host).unwrap().num_instances,
        1,
        "the table too"
    );
    // Parasol's own claim is an instance from the start.
    ledger
        .claim(host, &uuid_of("vm-new"), &small, 0)
        .await
        .unwrap();
    assert_eq!(ledger.read_hosts().await.unwrap()[0].num_instances, 2);
}

/// Applies each message through `ingest` as its own concurrent call (as HTTP posts are), in
/// this order, while the test holds the ledger's writer: none may answer before its commit.
async fn apply_each_unanswered(
    ingest: &std::sync::Arc<crate::notifications::Ingest>,
    messages: impl IntoIterator<Item = Value>,
) -> Vec<tokio::task::JoinHandle<Result<Applied, ApplyError>>> {
    let mut calls = Vec::new();
    for v in messages {
        let n = Notification::from_inner(&v).unwrap();
        let ingest = ingest.clone();
        calls.push(tokio::spawn(async move { ingest.apply(&n).await }));
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        calls.iter().all(|c| !c.is_finished()),
        "nothing answers before its commit"
    );
    calls
}

/// Single messages applied concurrently through `Ingest` (as HTTP posts are) are grouped
/// while the writer is busy, and each caller still gets its own message's outcome, after its
/// commit: applied, duplicate (the same id twice) or rejected (an unknown host) alone.
/// (`instance.unshelve.end`: messages the hot writer does not take; see the next test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_single_messages_are_applied_in_groups_each_with_its_outcome() {
    use crate::clock::{SharedClock, SystemClock};
    use crate::notifications::Ingest;
    use std::sync::Arc;
    let (ledger, _dir) = ledger().await;
    let clock: SharedClock = Arc::new(SystemClock);
    let stats = Arc::new(crate::stats::Stats::new(clock.clone(), 60));
    let ingest = Arc::new(Ingest::new(ledger.clone(), clock, stats));
    let register = Notification::from_inner(&host_state("r", "a", 64)).unwrap();
    assert_eq!(ingest.apply(&register).await.unwrap(), Applied::Applied);
    // Hold the writer so that every message below queues behind it.
    let held = ledger.hold_writer().await;
    let unshelve =
        |id: &str, vm: &str, host| instance_end("instance.unshelve.end", id, vm, host, 1);
    let messages = (0..40).map(|i| match i {
        39 => unshelve("m-ghost", "vm-ghost", "ghost"),
        38 => unshelve("m0", "vm0", "a"),
        _ => unshelve(&format!("m{i}"), &format!("vm{i}"), "a"),
    });
    let calls = apply_each_unanswered(&ingest, messages).await;
    assert_eq!(
        ingest.queue_len(),
        40,
        "all 40 wait for the writer together"
    );
    drop(held);
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.unwrap());
    }
    for (i, o) in outcomes.iter().enumerate().take(38).skip(1) {
        assert_eq!(o.as_ref().unwrap(), &Applied::Applied, "m{i}");
    }
    // m0 twice: whichever queued first is applied, the other is a duplicate.
    let mut twice = [
        *outcomes[0].as_ref().unwrap(),
        *outcomes[38].as_ref().unwrap(),
    ];
    twice.sort_by_key(|a| a.as_str());
    assert_eq!(twice, [Applied::Applied, Applied::Duplicate]);
    match &outcomes[39] {
        Err(ApplyError::Rejected(reason)) => assert!(reason.contains("unknown host"), "{reason}"),
        other => panic!("ghost: {other:?}"),
    }
    let hosts = ledger.read_hosts().await.unwrap();
    assert_eq!(
        hosts[0].used,
        crate::domain::Resources::new(38, 38 * 512, 38)
    );
    assert!(ledger.is_processed("m37").await.unwrap());
    assert!(!ledger.is_processed("m-ghost").await.unwrap());
}

/// The fast pass's flush must write on its own: a statement of it that fails sends the batch
/// to the savepoint pass, which writes host states one by one and so hides the failure from
/// every test of whole batches. Hence this direct test of the flush.
#[tokio::test]
async fn the_batch_flush_itself_writes_registrations_and_heartbeats() {
    let (ledger, _dir) = ledger().await;
    let first = Notification::from_inner(&host_state("m1", "a", 8)).unwrap();
    apply_batch(&ledger, &[&first], 0).await.unwrap();
    let reg = |v: Value| match Notification::from_inner(&v).unwrap().event {
        HostEvent::HostState(p) => registration(&p).unwrap(),
        other => panic!("not a host state: {other:?}"),
    };
    let mut beat = reg(host_state("m2", "a", 8));
    beat.up = false;
    let new = reg(host_state("m3", "b", 16));
    let beats = ledger.flush_alone(&[beat, new], 7).await;
    assert_eq!(beats, 1, "the same profile is a heartbeat");
    // Read back from the database (the live table takes a batch's effects only once it has
    // committed, in `settle_table`).
    ledger.reload_all().await.unwrap();
    let hosts = ledger.read_hosts().await.unwrap();
    let a = hosts.iter().find(|h| &*h.profile.host == "a").unwrap();
    assert!(!a.up);
    assert_eq!(a.last_seen_ms, 7);
    let b = hosts.iter().find(|h| &*h.profile.host == "b").unwrap();
    let vcpu = b.profile.inventory(crate::domain::ClassId::VCPU).unwrap();
    assert_eq!(vcpu.total, 16);
}

/// Heartbeats and builds' confirmations go to SQLite's hot writer: each caller gets its
/// message's outcome after the group holding it committed, exactly once (a repeated id is a
/// duplicate), the table takes the heartbeat's liveness, and an `instance.create.end` that
/// confirms no claim of Parasol's is handed to the general path, which records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_and_build_confirmations_are_applied_once_by_the_hot_writer() {
    use crate::clock::{ManualClock, SharedClock};
    use crate::notifications::Ingest;
    use std::sync::Arc;
    let (ledger, _dir) = ledger().await;
    let clock: SharedClock = Arc::new(ManualClock::new(1_000));
    let stats = Arc::new(crate::stats::Stats::new(clock.clone(), 60));
    let ingest = Arc::new(Ingest::new(ledger.clone(), clock.clone(), stats));
    let register = Notification::from_inner(&host_state("r", "a", 64)).unwrap();
    assert_eq!(ingest.apply(&register).await.unwrap(), Applied::Applied);
    let host = ledger.table().by_name("a", None).unwrap().id;
    let small = crate::domain::Resources::new(1, 512, 1);
    for vm in ["vm1", "vm2"] {
        let claimed = ledger.claim(host, &uuid_of(vm), &small, 0).await.unwrap();
        assert_eq!(claimed, crate::ledger::ClaimOutcome::Claimed);
    }
    // Hold the writer: the messages below wait in the hot writer's queue, then commit together.
    let held = ledger.hold_writer().await;
    let mut down = host_state("beat", "a", 64);
    down["payload"]["up"] = json!(false);
    let messages = [
        down,
        create_end("c1", "vm1", "a", 1),
        create_end("c1", "vm1", "a", 1),
        create_end("c2", "vm2", "a", 1),
        create_end("c3", "vm3", "a", 1),
    ];
    let calls = apply_each_unanswered(&ingest, messages).await;
    assert!(
        ledger.table().get(host).unwrap().up,
        "nor changes the table"
    );
    drop(held);
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.unwrap().unwrap());
    }
    let mut c1 = [outcomes[1], outcomes[2]];
    c1.sort_by_key(|a| a.as_str());
    assert_eq!(c1, [Applied::Applied, Applied::Duplicate]);
    assert_eq!(outcomes[0], Applied::Applied);
    assert_eq!(outcomes[3], Applied::Applied);
    assert_eq!(
        outcomes[4],
        Applied::Applied,
        "vm3 recorded by the general path"
    );
    let h = ledger.table().get(host).unwrap();
    assert!(!h.up, "the heartbeat's liveness is in the table");
    assert_eq!(h.last_seen_ms, 1_000);
    assert_eq!(h.num_instances, 3);
    for vm in ["vm1", "vm2", "vm3"] {
        let a = ledger.allocation(&uuid_of(vm)).await.unwrap().unwrap();
        assert!(a.confirmed, "{vm} confirmed");
    }
    let stored = ledger.read_hosts().await.unwrap().remove(0);
    assert!(!stored.up);
    assert_eq!(stored.last_seen_ms, 1_000);
    assert_eq!(stored.used, crate::domain::Resources::new(3, 3 * 512, 3));
    for id in ["beat", "c1", "c2", "c3"] {
        assert!(ledger.is_processed(id).await.unwrap(), "{id}");
    }
}

/// Hosts, inventories, allocations and message ids as text lines, in a fixed order.
async fn dump(ledger: &Ledger) -> Vec<String> {
    ledger.dump_sqlite().await
}

/// A seeded stream of host-state events only (what the hot writer takes as a whole batch):
/// classes that come, go and come back empty, a class still in use when it goes, traits,
/// liveness, repeated ids, invalid events and events Parasol does not act on.
fn host_state_stream(seed: u64, count: usize) -> Vec<Notification> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let h = if i < 6 { i } else { rng.gen_range(0..6) };
        let host = format!("h{h}");
        let id = if i > 10 && rng.gen_bool(0.05) {
            format!("m{}", rng.gen_range(0..i))
        } else {
            format!("m{i}")
        };
        let vcpu = [8, 16, 32][rng.gen_range(0..3)];
        let mut inventory = json!({
            "VCPU": {"total": vcpu},
            "MEMORY_MB": {"total": 4096, "reserved": rng.gen_range(0..2) * 512, "allocation_ratio": 1.5},
        });
        if i < 6 || rng.gen_bool(0.7) {
            inventory["DISK_GB"] = json!({"total": 100});
        }
        if i < 6 || rng.gen_bool(0.4) {
            inventory["CUSTOM_GPU"] = json!({"total": rng.gen_range(0..3)});
        }
        let mut v = json!({"message_id": id, "event_type": "compute.host.state", "payload": {
            "host": host, "compute_node_uuid": uuid_of(&host), "up": rng.gen_bool(0.9),
            "disabled": rng.gen_bool(0.1), "inventory": inventory,
            "traits": if rng.gen_bool(0.5) { json!(["HW_CPU_X86_AVX2"]) } else { json!([]) }}});
        match rng.gen_range(0..100) {
            // Refused by validation (max_unit below min_unit), not by the codec.
            0..=2 => v["payload"]["inventory"]["VCPU"]["max_unit"] = json!(0),
            3..=5 => {
                v = json!({"message_id": id, "event_type": "compute.metrics.update", "payload": {}})
            }
            _ => {}
        }
        let n = Notification::from_inner(&v).unwrap_or_else(|e| panic!("{v}: {e}"));
        out.push(n);
    }
    out
}

/// A batch of host-state events applied by the hot writer leaves the ledger, the outcomes and
/// the live table exactly as the general path (sqlx's statements with JSON parameters) does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hot_writer_applies_a_batch_of_host_state_events_as_the_general_path_does() {
    for seed in [1, 2, 3] {
        let messages = host_state_stream(seed, 600);
        let (hot, _hot_dir) = ledger().await;
        let (general, _general_dir) = ledger().await;
        let (mut hot_outcomes, mut general_outcomes) = (Vec::new(), Vec::new());
        let mut at = 0;
        let mut k = 0;
        while at < messages.len() {
            let size = [1, 9, 60, 150][k % 4].min(messages.len() - at);
            let batch: Vec<&Notification> = messages[at..at + size].iter().collect();
            let now_ms = 1_000 + k as i64;
            let before = dump(&hot).await;
            hot_outcomes.extend(apply_batch(&hot, &batch, now_ms).await.unwrap());
            // The general path taken directly (`apply_batch` would give it to the hot writer).
            let taken: Vec<crate::ledger::Message> = batch.iter().map(|n| message_of(n)).collect();
            let (_, outcomes) = general
                .apply_taken(|| taken.iter().collect(), |m| *m, || now_ms)
                .await;
            general_outcomes.extend(outcomes.unwrap());
            assert_eq!(hot_outcomes, general_outcomes, "seed {seed}, batch {k}");
            let applied = dump(&hot).await;
            assert_eq!(applied, dump(&general).await, "seed {seed}, batch {k}");
            if size > 1 {
                assert_ne!(before, applied, "seed {seed}, batch {k} wrote nothing");
            }
            let table = |l: &Ledger| format!("{:?}", l.table().snapshot());
            assert_eq!(table(&hot), table(&general), "seed {seed}, batch {k}");
            // And the table is what the ledger holds.
            let kept = table(&hot);
            hot.reload_all().await.unwrap();
            assert_eq!(table(&hot), kept, "seed {seed}, batch {k}");
            if k == 3 {
                // Usage on every host (all registered by now), a GPU among it where there is
                // one, so that a class that goes while in use stays with no capacity and the
                // others are dropped.
                for l in [&hot, &general] {
                    for h in 0..6 {
                        let host = l.table().by_name(&format!("h{h}"), None).unwrap();
                        let gpu = crate::domain::ClassId::intern("CUSTOM_GPU").unwrap();
                        // No disk: some of the stream's events report none.
                        let mut demand = crate::domain::Resources::new(1, 512, 0);
                        if host.profile.inventory(gpu).is_some_and(|i| i.total > 0) {
                            demand.set(gpu, 1);
                        }
                        let vm = uuid_of(&format!("vm{h}"));
                        let claimed = l.claim(host.id, &vm, &demand, 0).await.unwrap();
                        assert_eq!(claimed, crate::ledger::ClaimOutcome::Claimed, "h{h}");
                    }
                }
            }
            at += size;
            k += 1;
        }
        let kinds = |o: &[Outcome]| {
            o.iter()
                .map(|o| match o {
                    Ok(a) => a.as_str(),
                    Err(_) => "rejected",
                })
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(
            kinds(&hot_outcomes).into_iter().collect::<Vec<_>>(),
            ["applied", "duplicate", "rejected", "unknown_event"],
            "seed {seed}: every kind of outcome"
        );
        let inventories = dump(&hot).await;
        assert!(
            inventories
                .iter()
                .any(|l| l.starts_with("inventory") && l.contains("CUSTOM_GPU 0 0")),
            "seed {seed}: a GPU row kept with no capacity: {inventories:#?}"
        );
    }
}

/// 240 messages on `hosts`: heartbeats, the confirmations of claims `vm0` … `vm59` (each
/// sent once, in order, the one before now and then repeated) and now and then an
/// `instance.create.end` of an instance with no claim (`stray…`, message id `s…`).
fn confirmation_stream(seed: u64, hosts: &[String]) -> Vec<Notification> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut messages = Vec::new();
    let mut vm = 0;
    for i in 0..240 {
        let v = match rng.gen_range(0..40) {
            0 => create_end(&format!("s{i}"), &format!("stray{i}"), &hosts[i % 6], 1),
            1 if vm > 0 => create_end(
                &format!("c{}", vm - 1),
                &format!("vm{}", vm - 1),
                &hosts[(vm - 1) % 6],
                1,
            ),
            2..=20 if vm < 60 => {
                vm += 1;
                create_end(
                    &format!("c{}", vm - 1),
                    &format!("vm{}", vm - 1),
                    &hosts[(vm - 1) % 6],
                    1,
                )
            }
            _ => host_state(&format!("b{i}"), &hosts[rng.gen_range(0..6)], 64),
        };
        messages.push(Notification::from_inner(&v).unwrap_or_else(|e| panic!("{v}: {e}")));
    }
    assert_eq!(vm, 60, "every claim's confirmation is sent");
    messages
}

/// Heartbeats and builds' confirmations as a consumer's batches bring them (every decision's
/// `instance.create.end` among the hosts' heartbeats), with repeated ids and now and then an
/// `instance.create.end` of an instance Parasol holds no claim for (the general path records
/// its allocation), for the hot writer's batch: outcomes, ledger and live table are exactly
/// what the general path leaves, and every claim ends confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hot_writer_applies_heartbeats_with_build_confirmations_as_the_general_path_does() {
    let (hot, _hot_dir) = ledger().await;
    let (general, _general_dir) = ledger().await;
    let hosts: Vec<String> = (0..6).map(|h| format!("h{h}")).collect();
    let registrations: Vec<Notification> = hosts
        .iter()
        .map(|h| Notification::from_inner(&host_state(&format!("r-{h}"), h, 64)).unwrap())
        .collect();
    let small = crate::domain::Resources::new(1, 256, 1);
    for l in [&hot, &general] {
        apply_batch(l, &registrations.iter().collect::<Vec<_>>(), 0)
            .await
            .unwrap();
        for vm in 0..60 {
            let host = l.table().by_name(&hosts[vm % 6], None).unwrap().id;
            let claimed = l.claim(host, &uuid_of(&format!("vm{vm}")), &small, 0).await;
            assert_eq!(claimed.unwrap(), crate::ledger::ClaimOutcome::Claimed);
        }
    }
    let messages = confirmation_stream(7, &hosts);
    let (mut at, mut k) = (0, 0);
    let (mut whole, mut handed_on) = (0, 0);
    while at < messages.len() {
        let size = [1, 3, 9, 20][k % 4].min(messages.len() - at);
        let batch: Vec<&Notification> = messages[at..at + size].iter().collect();
        let now_ms = 1_000 + k as i64;
        let applied_before = hot.hot_writer().batches_applied();
        let hot_outcomes = apply_batch(&hot, &batch, now_ms).await.unwrap();
        // A batch with a confirmation of no claim is the general path's; any other, the hot
        // writer's.
        let stray = batch.iter().any(|n| n.message_id.starts_with('s'));
        assert_eq!(
            hot.hot_writer().batches_applied() - applied_before,
            u64::from(!stray),
            "batch {k}"
        );
        whole += usize::from(!stray);
        handed_on += usize::from(stray);
        let taken: Vec<crate::ledger::Message> = batch.iter().map(|n| message_of(n)).collect();
        let (_, general_outcomes) = general
            .apply_taken(|| taken.iter().collect(), |m| *m, || now_ms)
            .await;
        assert_eq!(hot_outcomes, general_outcomes.unwrap(), "batch {k}");
        assert_eq!(dump(&hot).await, dump(&general).await, "batch {k}");
        let table = |l: &Ledger| format!("{:?}", l.table().snapshot());
        assert_eq!(table(&hot), table(&general), "batch {k}");
        let kept = table(&hot);
        hot.reload_all().await.unwrap();
        assert_eq!(
            table(&hot),
            kept,
            "batch {k}: the table is what the ledger holds"
        );
        at += size;
        k += 1;
    }
    assert!(
        whole > 0 && handed_on > 0,
        "{whole} batches whole, {handed_on} handed on"
    );
    for vm in 0..60 {
        let a = hot
            .allocation(&uuid_of(&format!("vm{vm}")))
            .await
            .unwrap()
            .unwrap();
        assert!(a.confirmed, "vm{vm} confirmed");
    }
    let strays = messages
        .iter()
        .filter(|n| n.message_id.starts_with('s'))
        .count();
    assert!(strays > 0, "the stream holds confirmations of no claim");
    for n in messages.iter().filter(|n| n.message_id.starts_with('s')) {
        assert!(
            hot.is_processed(&n.message_id).await.unwrap(),
            "{}",
            n.message_id
        );
    }
}

/// A registration the database refuses (here a trigger refuses host "refused"; another
/// compute node under the same host and node names is no longer refused: see
/// `tests/ledger/host_events.rs`) rolls the hot writer's job back: the general path rejects
/// that message alone, with the database's reason, and applies the rest of its batch.
#[tokio::test]
async fn a_registration_the_database_refuses_is_rejected_alone() {
    let (ledger, _dir) = ledger().await;
    let first = Notification::from_inner(&host_state("m1", "a", 8)).unwrap();
    apply_batch(&ledger, &[&first], 0).await.unwrap();
    ledger.refuse_new_host("refused").await;
    let clash = host_state("m2", "refused", 8);
    let batch: Vec<Notification> = [host_state("m3", "b", 4), clash, host_state("m4", "a", 16)]
        .iter()
        .map(|v| Notification::from_inner(v).unwrap())
        .collect();
    let out = apply_batch(&ledger, &batch.iter().collect::<Vec<_>>(), 1)
        .await
        .unwrap();
    assert_eq!(out[0], Ok(Applied::Applied));
    assert!(
        out[1]
            .as_ref()
            .unwrap_err()
            .contains("the ledger refused it"),
        "{:?}",
        out[1]
    );
    assert_eq!(out[2], Ok(Applied::Applied));
    assert!(!ledger.is_processed("m2").await.unwrap());
    for id in ["m1", "m3", "m4"] {
        assert!(ledger.is_processed(id).await.unwrap(), "{id}");
    }
    let a = ledger.table().by_name("a", None).unwrap();
    let vcpu = a.profile.inventory(crate::domain::ClassId::VCPU).unwrap();
    assert_eq!(vcpu.total, 16);
    assert!(ledger.table().by_name("b", None).is_some());
}

/// With Nova's records laid over the table (`[nova_db]`: the node's facts and its service
/// host), an event that changes nothing of a host is still a heartbeat, and one that changes
/// its size is not; nor is one of a host the records renamed until the event's name is the
/// ledger's too.
#[tokio::test]
async fn an_unchanged_host_with_nova_s_records_is_a_heartbeat() {
    use crate::domain::ComputeFacts;
    use crate::ledger::heartbeat_of;
    use crate::table::{NodeRecord, NodeRecords};
    use std::sync::Arc;
    let (ledger, _dir) = ledger().await;
    let first = [host_state("m1", "a", 8), host_state("m2", "b", 8)]
        .map(|v| Notification::from_inner(&v).unwrap());
    apply_batch(&ledger, &first.iter().collect::<Vec<_>>(), 1)
        .await
        .unwrap();
    let table = ledger.table();
    let id = |name: &str| table.by_uuid(&uuid_of(name)).expect("registered").id;
    let record = |service_host: &str| NodeRecord {
        service_host: service_host.into(),
        facts: Arc::new(ComputeFacts {
            hypervisor_type: "QEMU".into(),
            ..Default::default()
        }),
        up: true,
        disabled: false,
        forced_down: false,
    };
    let mut records = NodeRecords::default();
    records.by_uuid.insert(uuid_of("a"), record("a"));
    // The ledger's row says "b", Nova's records "b-svc".
    records.by_uuid.insert(uuid_of("b"), record("b-svc"));
    table.set_records(Arc::new(records));
    let a = table.by_uuid(&uuid_of("a")).unwrap();
    assert!(a.profile.facts.is_some() && !a.profile.renamed);
    assert!(table.by_uuid(&uuid_of("b")).unwrap().profile.renamed);
    let registration_of = |event: &Value| {
        let n = Notification::from_inner(event).unwrap();
        let HostEvent::HostState(p) = &n.event else {
            panic!("a host-state event")
        };
        registration(p).unwrap()
    };
    let same = registration_of(&host_state("m3", "a", 8));
    assert_eq!(heartbeat_of(table, &same), Some(id("a")));
    let bigger = registration_of(&host_state("m4", "a", 16));
    assert_eq!(heartbeat_of(table, &bigger), None);
    let b_svc = |id: &str| {
        json!({"message_id": id, "event_type": "compute.host.state", "payload": {
            "host": "b-svc", "node": "b", "compute_node_uuid": uuid_of("b"),
            "inventory": {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096},
                          "DISK_GB": {"total": 100}}}})
    };
    assert_eq!(heartbeat_of(table, &registration_of(&b_svc("m5"))), None);
    let renaming = Notification::from_inner(&b_svc("m5")).unwrap();
    apply_batch(&ledger, &[&renaming], 2).await.unwrap();
    assert!(!table.by_uuid(&uuid_of("b")).unwrap().profile.renamed);
    let again = registration_of(&b_svc("m6"));
    assert_eq!(heartbeat_of(table, &again), Some(id("b")));
}

/// The VCPU row of host `name` in the ledger file: (total, usable).
async fn vcpu_row(ledger: &Ledger, name: &str) -> (i64, i64) {
    ledger.vcpu_row(name).await
}

/// The hot writer remembers the inventory rows it wrote (`known_rows`) and writes a
/// re-registration's rows only where they differ from them; rows another connection changed
/// since (another process, `sqlite3` by hand, sqlx's writes) are read again, not trusted from
/// memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_another_connection_changed_are_written_again_by_a_re_registration() {
    let (ledger, dir) = ledger().await;
    let first = Notification::from_inner(&host_state("m1", "a", 8)).unwrap();
    apply_batch(&ledger, &[&first], 1).await.unwrap();
    let again = Notification::from_inner(&host_state("m2", "a", 8)).unwrap();
    apply_batch(&ledger, &[&again], 2).await.unwrap();
    assert_eq!(vcpu_row(&ledger, "a").await, (8, 8));
    crate::ledger::testing::set_vcpu_elsewhere(&dir.path().join("l.db"), 999);
    assert_eq!(vcpu_row(&ledger, "a").await, (999, 999));
    // A re-registration (its memory grows) with the VCPU row the writer last wrote, which
    // differs in the file.
    let mut third = host_state("m3", "a", 8);
    third["payload"]["inventory"]["MEMORY_MB"]["total"] = json!(8192);
    let third = Notification::from_inner(&third).unwrap();
    let out = apply_batch(&ledger, &[&third], 3).await.unwrap();
    assert_eq!(out, [Ok(Applied::Applied)]);
    assert_eq!(vcpu_row(&ledger, "a").await, (8, 8));
}

/// A group of the hot writer that does not commit (here a job of it panics) takes back what
/// the writer remembered of the rows its batch wrote: the same registration, applied again
/// once the group failed, is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_group_fails_leaves_no_remembered_rows_behind() {
    use crate::ledger::testing::{hold_writer, Panics};

    let (ledger, _dir) = ledger().await;
    let first = Notification::from_inner(&host_state("m1", "a", 8)).unwrap();
    apply_batch(&ledger, &[&first], 1).await.unwrap();
    let hot = ledger.hot_writer();
    // The writer held in a group of its own; the batch and a job that panics queue behind
    // it and make the next group together.
    let release = hold_writer(&hot);
    let queued = hot.submitted();
    let applying = {
        let ledger = ledger.clone();
        tokio::spawn(async move {
            let bigger = Notification::from_inner(&host_state("m2", "a", 16)).unwrap();
            apply_batch(&ledger, &[&bigger], 2).await
        })
    };
    while hot.submitted() == queued {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let (panicked, group) = tokio::sync::oneshot::channel();
    assert!(hot.submit(Box::new(Panics(Some(panicked)))).is_ok());
    release.send(()).unwrap();
    let failed = applying.await.unwrap();
    assert!(failed.is_err(), "{failed:?}");
    assert!(group.await.unwrap().is_err(), "the group did not commit");
    assert_eq!(vcpu_row(&ledger, "a").await, (8, 8));
    // What the failed batch wrote is not in the file, nor taken as written.
    let bigger = Notification::from_inner(&host_state("m2", "a", 16)).unwrap();
    let out = apply_batch(&ledger, &[&bigger], 3).await.unwrap();
    assert_eq!(out, [Ok(Applied::Applied)]);
    assert_eq!(vcpu_row(&ledger, "a").await, (16, 16));
}

/// A `service.update` of nova-compute `host` (ServiceStatusPayload 1.1).
fn service_update(id: &str, host: &str, disabled: bool) -> Value {
    json!({"message_id": id, "event_type": "service.update", "payload": {
        "nova_object.name": "ServiceStatusPayload", "nova_object.namespace": "nova",
        "nova_object.version": "1.1", "nova_object.data": {
            "host": host, "binary": "nova-compute", "disabled": disabled,
            "forced_down": false}}})
}

/// Nova's records of one node, of service `host` (enabled or not), from a read begun at
/// `began_ms`.
fn records_of(
    host: &str,
    began_ms: i64,
    disabled: bool,
) -> std::sync::Arc<crate::table::NodeRecords> {
    let mut records = crate::table::NodeRecords {
        read: true,
        began_ms,
        ..Default::default()
    };
    let record = crate::table::NodeRecord {
        service_host: host.into(),
        facts: std::sync::Arc::default(),
        up: true,
        disabled,
        forced_down: false,
    };
    records.by_uuid.insert(uuid_of(host), record);
    std::sync::Arc::new(records)
}

/// With Nova's records laid over the table, an operator's disable (`service.update`) counts
/// at once, as Nova's scheduler reads the service on every call: the records read before it
/// say "enabled", and would otherwise until the next read. A read that began after the
/// update replaces the note (it holds the same); one that began before does not.
#[tokio::test]
async fn a_service_update_counts_over_nova_s_records_read_before_it() {
    let (ledger, _dir) = ledger().await;
    let first = Notification::from_inner(&host_state("m1", "a", 8)).unwrap();
    apply_batch(&ledger, &[&first], 1).await.unwrap();
    let table = ledger.table();
    let records = |began_ms: i64, disabled: bool| records_of("a", began_ms, disabled);
    let disabled = || table.by_uuid(&uuid_of("a")).unwrap().disabled;
    table.set_records(records(1_000, false));
    assert!(!disabled());
    let off = Notification::from_inner(&service_update("m2", "a", true)).unwrap();
    assert_eq!(
        apply_batch(&ledger, &[&off], 2_000).await.unwrap(),
        [Ok(Applied::Applied)]
    );
    assert!(disabled(), "the disable counts before the next read");
    // A later event of the host reloads it: the note still lies over the old records.
    let beat = Notification::from_inner(&host_state("m3", "a", 16)).unwrap();
    apply_batch(&ledger, &[&beat], 2_100).await.unwrap();
    assert!(disabled(), "a reload keeps the disable");
    // A read that began before the update (it finished after) does not undo it.
    table.set_records(records(1_999, false));
    assert!(disabled(), "an older read does not undo the disable");
    // A read that began after it is Nova's word again.
    table.set_records(records(2_001, true));
    assert!(disabled());
    table.set_records(records(2_500, false));
    assert!(!disabled(), "a newer read replaces the note");
}

/// nova-compute keeps `COMPUTE_STATUS_DISABLED` on its provider equal to its service's
/// state: a host the last sync read with the trait is schedulable as soon as its service is
/// enabled again, and a disabled one has it before the next sync.
#[tokio::test]
async fn a_service_update_sets_and_clears_nova_s_status_trait() {
    use crate::domain::{Mark, TraitId, COMPUTE_STATUS_DISABLED};
    let (ledger, _dir) = ledger().await;
    let first = Notification::from_inner(&host_state("m1", "a", 8)).unwrap();
    apply_batch(&ledger, &[&first], 1).await.unwrap();
    let table = ledger.table();
    let id = table.by_uuid(&uuid_of("a")).unwrap().id;
    let has_status = || {
        let status = TraitId::lookup(COMPUTE_STATUS_DISABLED).expect("interned");
        let a = table.by_uuid(&uuid_of("a")).unwrap();
        a.profile.traits.contains_all(&[status])
    };
    ledger
        .set_traits(id, &[COMPUTE_STATUS_DISABLED.into(), "CUSTOM_GOLD".into()])
        .await
        .unwrap();
    assert!(has_status());
    let on = Notification::from_inner(&service_update("m2", "a", false)).unwrap();
    apply_batch(&ledger, &[&on], 2).await.unwrap();
    let a = table.by_uuid(&uuid_of("a")).unwrap();
    assert!(!has_status() && !a.disabled, "enabled: the trait is gone");
    let gold = TraitId::lookup("CUSTOM_GOLD").expect("interned");
    assert!(a.profile.traits.contains_all(&[gold]), "other traits stay");
    let off = Notification::from_inner(&service_update("m3", "a", true)).unwrap();
    apply_batch(&ledger, &[&off], 3).await.unwrap();
    assert!(has_status(), "disabled: the trait is set");
    assert!(table.by_uuid(&uuid_of("a")).unwrap().disabled);
}

/// A service disabled right after its start, before Placement's sync loaded its node: with
/// Nova's records read, the update is taken (not dead-lettered) and lies over the node once
/// it loads; without them it is refused, naming the host.
#[tokio::test]
async fn a_service_update_before_its_node_is_loaded_counts_once_it_is() {
    let (ledger, _dir) = ledger().await;
    let early = Notification::from_inner(&service_update("m1", "a", true)).unwrap();
    let out = apply_batch(&ledger, &[&early], 1).await.unwrap();
    let refused = out[0].as_ref().expect_err("no records: an unknown host");
    assert!(refused.contains("\"a\""), "{refused}");
    let table = ledger.table();
    table.set_records(records_of("a", 5, false));
    let again = Notification::from_inner(&service_update("m2", "a", true)).unwrap();
    assert_eq!(
        apply_batch(&ledger, &[&again], 10).await.unwrap(),
        [Ok(Applied::Applied)]
    );
    let first = Notification::from_inner(&host_state("m3", "a", 8)).unwrap();
    apply_batch(&ledger, &[&first], 11).await.unwrap();
    assert!(table.by_uuid(&uuid_of("a")).unwrap().disabled);
}
