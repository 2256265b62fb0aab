use super::*;
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
    let held = match &ledger.pools {
        Pools::Sqlite { write, .. } => write.lock().await.unwrap(),
        Pools::Postgres(_) => unreachable!("a SQLite ledger"),
    };
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
    let Pools::Sqlite { write, .. } = &ledger.pools else {
        panic!("a SQLite ledger")
    };
    let mut conn = write.lock().await.unwrap();
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    let mut touched = Touched::default();
    touched.stage(ledger.table(), &beat, 7);
    touched.stage(ledger.table(), &new, 7);
    assert_eq!(
        touched.heartbeats.len(),
        1,
        "the same profile is a heartbeat"
    );
    flush_sqlite(&mut tx, ledger.table(), &mut touched)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    drop(conn);
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
    let held = match &ledger.pools {
        Pools::Sqlite { write, .. } => write.lock().await.unwrap(),
        Pools::Postgres(_) => unreachable!("a SQLite ledger"),
    };
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
