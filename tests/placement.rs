//! Placement inventory sync against the real `openstack-placement` package from PyPI, run
//! locally with noauth2 and SQLite. Its virtualenv is cached outside the clone in
//! `$HOME/.cache/parasol/placement-venv-<hash of the requirements>`.

use parasol::clock::SystemClock;
use parasol::configuration::Settings;
use parasol::domain::Resources;
use parasol::ledger::{ClaimOutcome, HostRegistration, Ledger};
use parasol::placement::{
    sync, sync_once, AuthKind, PlacementClient, PlacementSettings, ProviderCache,
};
use parasol::startup::Application;
use serde_json::{json, Value};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/placement_server.rs"]
mod placement_server;
use placement_server::PlacementServer as Placement;

#[path = "support/tls_front.rs"]
mod tls_front;

/// A root provider named `name`, with `inventories` unless they are `null` (a provider the
/// sync must skip).
async fn provider(placement: &Placement, name: &str, uuid: &str, inventories: Value) {
    if inventories.is_null() {
        let body = json!({"name": name, "uuid": uuid});
        placement
            .call(reqwest::Method::POST, "/resource_providers", Some(body))
            .await;
    } else {
        placement.provider(name, uuid, inventories, &[], &[]).await;
    }
}

async fn set_inventories(placement: &Placement, uuid: &str, inventories: Value) {
    let path = format!("/resource_providers/{uuid}/inventories");
    let current = placement.call(reqwest::Method::GET, &path, None).await;
    let body = json!({
        "resource_provider_generation": current["resource_provider_generation"],
        "inventories": inventories,
    });
    placement
        .call(reqwest::Method::PUT, &path, Some(body))
        .await;
}

async fn allocate(placement: &Placement, consumer: &str, provider: &str, resources: Value) {
    let status = placement.allocate(consumer, provider, resources).await;
    assert!(
        (200..300).contains(&status),
        "allocation of {consumer}: {status}"
    );
}

fn placement_settings(placement: &Placement) -> PlacementSettings {
    PlacementSettings {
        enabled: true,
        url: placement.url.clone(),
        auth: AuthKind::Noauth,
        sync_interval_s: 0.5,
        timeout_s: 2.0,
        ..Default::default()
    }
}

const C1: &str = "11111111-0000-4000-8000-000000000001";
const C2: &str = "11111111-0000-4000-8000-000000000002";
const NESTED: &str = "11111111-0000-4000-8000-00000000000f";
const OLD_VM: &str = "22222222-0000-4000-8000-000000000001";
const PARASOL_VM: &str = "22222222-0000-4000-8000-000000000002";

fn inventory(vcpu: i64, ratio: f64, memory_mb: i64, reserved_mb: i64, disk_gb: i64) -> Value {
    json!({
        "VCPU": {"total": vcpu, "allocation_ratio": ratio},
        "MEMORY_MB": {"total": memory_mb, "reserved": reserved_mb},
        "DISK_GB": {"total": disk_gb},
    })
}

async fn ledger() -> (Ledger, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let ledger = Ledger::connect(&url, 4).await.expect("connect");
    ledger.migrate().await.expect("migrate");
    (ledger, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_registers_compute_providers_and_imports_only_unknown_allocations() {
    let placement = Placement::start().await;
    provider(
        &placement,
        "compute1",
        C1,
        inventory(8, 4.0, 16384, 512, 100),
    )
    .await;
    provider(&placement, "compute2", C2, inventory(4, 1.0, 8192, 0, 50)).await;
    provider(&placement, "nic-pf", NESTED, Value::Null).await;
    allocate(
        &placement,
        OLD_VM,
        C1,
        json!({"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 10}),
    )
    .await;
    allocate(
        &placement,
        PARASOL_VM,
        C2,
        json!({"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}),
    )
    .await;

    let (ledger, _db) = ledger().await;
    // compute2 is already known (from notifications) and Parasol placed PARASOL_VM on it.
    let known = HostRegistration {
        availability_zone: "az2".into(),
        disabled: true,
        ..HostRegistration::simple("compute2", C2, 1000, 1000, 1000)
    };
    let c2 = ledger.register_host(&known, 1).await.expect("register");
    let claimed = ledger
        .claim(c2, PARASOL_VM, &Resources::new(1, 256, 1), 1)
        .await
        .expect("claim");
    assert_eq!(claimed, ClaimOutcome::Claimed);

    let client = PlacementClient::new(placement_settings(&placement), Arc::new(SystemClock))
        .expect("client");
    let report = sync_once(&client, &ledger, 1000).await.expect("sync");
    assert_eq!(report.hosts, 2);
    assert_eq!(report.skipped_providers, 1);
    assert_eq!(report.imported_allocations, 1);

    let hosts = ledger.read_hosts().await.expect("hosts");
    assert_eq!(
        hosts.len(),
        2,
        "the provider without inventory is not a host"
    );
    let h1 = hosts.iter().find(|h| &**h.uuid() == C1).expect("compute1");
    assert_eq!((&**h1.host(), &**h1.node()), ("compute1", "compute1"));
    assert_eq!(
        *h1.usable(),
        Resources::new(32, 15872, 100),
        "(total - reserved) x ratio"
    );
    assert_eq!(
        h1.used,
        Resources::new(2, 2048, 10),
        "the old VM's allocation is imported"
    );
    assert_eq!(
        h1.num_instances, 0,
        "an imported consumer counts as an instance once an instance message names it"
    );
    let imported = ledger
        .allocation(OLD_VM)
        .await
        .expect("read")
        .expect("imported");
    assert_eq!(imported.host_id, h1.id);
    assert!(imported.confirmed);

    let h2 = hosts.iter().find(|h| &**h.uuid() == C2).expect("compute2");
    assert_eq!(
        *h2.usable(),
        Resources::new(4, 8192, 50),
        "inventory from Placement"
    );
    assert_eq!(
        h2.used,
        Resources::new(1, 256, 1),
        "Parasol's own claim is not counted twice"
    );
    assert_eq!(
        (&**h2.availability_zone(), h2.disabled),
        ("az2", true),
        "zone and state kept"
    );

    let again = sync_once(&client, &ledger, 2000)
        .await
        .expect("second sync");
    assert_eq!(
        again.imported_allocations, 0,
        "a resync imports nothing twice"
    );
    let after = ledger.read_hosts().await.expect("hosts");
    assert_eq!(
        after.iter().map(|h| h.used).collect::<Vec<_>>(),
        hosts.iter().map(|h| h.used).collect::<Vec<_>>()
    );
    assert_eq!(again.released_allocations, 0);

    // The old VM goes away behind Parasol's back, and so does Placement's record of
    // Parasol's own VM: the import is released, Parasol's own allocation stays (Nova's
    // notifications release it).
    for consumer in [OLD_VM, PARASOL_VM] {
        placement
            .call(
                reqwest::Method::DELETE,
                &format!("/allocations/{consumer}"),
                None,
            )
            .await;
    }
    let third = sync_once(&client, &ledger, 3000).await.expect("third sync");
    assert_eq!(third.released_allocations, 1);
    assert_eq!(third.imported_allocations, 0);
    assert!(ledger.allocation(OLD_VM).await.expect("read").is_none());
    assert!(ledger.allocation(PARASOL_VM).await.expect("read").is_some());
    let last = ledger.read_hosts().await.expect("hosts");
    let h1 = last.iter().find(|h| &**h.uuid() == C1).expect("compute1");
    assert_eq!((h1.used, h1.num_instances), (Resources::ZERO, 0));
    let h2 = last.iter().find(|h| &**h.uuid() == C2).expect("compute2");
    assert_eq!(h2.used, Resources::new(1, 256, 1));
    let fourth = sync_once(&client, &ledger, 4000)
        .await
        .expect("fourth sync");
    assert_eq!(fourth.released_allocations, 0, "released once");
}

/// Placement lets one consumer hold several providers: an evacuated instance keeps its
/// source until the source compute comes back. The ledger holds the instance where Parasol
/// placed it and imports the other part (usage, not an instance), released when Placement
/// drops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_on_two_providers_is_held_on_both_until_placement_drops_one() {
    let placement = Placement::start().await;
    provider(&placement, "source", C1, inventory(8, 1.0, 16384, 0, 100)).await;
    provider(&placement, "dest", C2, inventory(8, 1.0, 16384, 0, 100)).await;
    let (ledger, _db) = ledger().await;
    let client = PlacementClient::new(placement_settings(&placement), Arc::new(SystemClock))
        .expect("client");
    sync_once(&client, &ledger, 1000).await.expect("first sync");
    let hosts = ledger.read_hosts().await.expect("hosts");
    let id = |uuid: &str| hosts.iter().find(|h| &**h.uuid() == uuid).unwrap().id;
    let small = json!({"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1});
    // The evacuation: Parasol claimed the destination (its ledger moves the instance there),
    // Placement holds the instance on the source and the destination.
    let claimed = ledger
        .claim(id(C2), PARASOL_VM, &Resources::new(1, 512, 1), 1000)
        .await
        .expect("claim");
    assert_eq!(claimed, ClaimOutcome::Claimed);
    let body = json!({
        "allocations": {C1: {"resources": small}, C2: {"resources": small}},
        "project_id": "p", "user_id": "u", "consumer_generation": null,
    });
    let (status, _) = placement
        .request(
            reqwest::Method::PUT,
            &format!("/allocations/{PARASOL_VM}"),
            Some(body),
        )
        .await;
    assert_eq!(status, 204);
    let report = sync_once(&client, &ledger, 2000).await.expect("sync");
    assert_eq!(report.imported_allocations, 1);
    let by_uuid = |hosts: &[parasol::domain::HostState], uuid: &str| {
        let h = hosts.iter().find(|h| &**h.uuid() == uuid).unwrap();
        (h.used, h.num_instances)
    };
    let hosts = ledger.read_hosts().await.expect("hosts");
    assert_eq!(
        by_uuid(&hosts, C1),
        (Resources::new(1, 512, 1), 0),
        "source part"
    );
    assert_eq!(
        by_uuid(&hosts, C2),
        (Resources::new(1, 512, 1), 1),
        "the instance"
    );
    assert_eq!(
        ledger
            .allocation(PARASOL_VM)
            .await
            .unwrap()
            .unwrap()
            .host_id,
        id(C2)
    );
    let again = sync_once(&client, &ledger, 3000).await.expect("sync");
    assert_eq!(again.imported_allocations + again.released_allocations, 0);
    // The source compute comes back and removes its part.
    let body = json!({
        "allocations": {C2: {"resources": small}},
        "project_id": "p", "user_id": "u", "consumer_generation": 1,
    });
    let (status, _) = placement
        .request(
            reqwest::Method::PUT,
            &format!("/allocations/{PARASOL_VM}"),
            Some(body),
        )
        .await;
    assert_eq!(status, 204);
    let last = sync_once(&client, &ledger, 4000).await.expect("sync");
    assert_eq!(last.released_allocations, 1);
    let hosts = ledger.read_hosts().await.expect("hosts");
    assert_eq!(by_uuid(&hosts, C1), (Resources::ZERO, 0));
    assert_eq!(by_uuid(&hosts, C2), (Resources::new(1, 512, 1), 1));
    // Held on both again, and the ledger then learns the instance runs on C1 (its claim
    // moves there): the part imported on C1 is the instance's own allocation now, counted
    // once, and its part on C2 is imported.
    let body = json!({
        "allocations": {C1: {"resources": small}, C2: {"resources": small}},
        "project_id": "p", "user_id": "u", "consumer_generation": 2,
    });
    let (status, _) = placement
        .request(
            reqwest::Method::PUT,
            &format!("/allocations/{PARASOL_VM}"),
            Some(body),
        )
        .await;
    assert_eq!(status, 204);
    sync_once(&client, &ledger, 5000).await.expect("sync");
    let moved = ledger
        .claim(id(C1), PARASOL_VM, &Resources::new(1, 512, 1), 5000)
        .await
        .expect("claim");
    assert_eq!(moved, ClaimOutcome::Claimed);
    sync_once(&client, &ledger, 6000).await.expect("sync");
    let hosts = ledger.read_hosts().await.expect("hosts");
    assert_eq!(by_uuid(&hosts, C1), (Resources::new(1, 512, 1), 1));
    assert_eq!(by_uuid(&hosts, C2), (Resources::new(1, 512, 1), 0));
}

/// A source and a destination compute (`C1`, `C2`) in Placement, a ledger, its client and
/// cache after a first sync, and the two hosts' ids.
struct TwoHosts {
    placement: Placement,
    ledger: Ledger,
    _db: tempfile::TempDir,
    client: PlacementClient,
    cache: ProviderCache,
    c1: parasol::domain::HostId,
    c2: parasol::domain::HostId,
}

async fn two_hosts_synced(follows_placement: bool) -> TwoHosts {
    let placement = Placement::start().await;
    provider(&placement, "source", C1, inventory(8, 1.0, 16384, 0, 100)).await;
    provider(&placement, "dest", C2, inventory(8, 1.0, 16384, 0, 100)).await;
    let (ledger, _db) = ledger().await;
    if follows_placement {
        ledger.table().set_follows_placement();
    }
    let client = PlacementClient::new(placement_settings(&placement), Arc::new(SystemClock))
        .expect("client");
    let mut cache = ProviderCache::default();
    sync(&client, &ledger, &mut cache, false, 1000)
        .await
        .expect("first sync");
    let (c1, c2) = (
        ledger.table().id_of_uuid(C1).unwrap(),
        ledger.table().id_of_uuid(C2).unwrap(),
    );
    TwoHosts {
        placement,
        ledger,
        _db,
        client,
        cache,
        c1,
        c2,
    }
}

/// Applies Nova's `event` for `PARASOL_VM`, the given step, to the ledger as the consumer does.
async fn apply_event(ledger: &Ledger, event: &str, at: i64, what: parasol::nova::HostEvent) {
    let n = parasol::nova::Notification {
        message_id: format!("{event}-{at}"),
        event_type: event.into(),
        publisher_id: None,
        timestamp: None,
        event: what,
    };
    let out = parasol::notifications::apply_batch(ledger, &[&n], at)
        .await
        .expect("apply");
    assert!(out[0].is_ok(), "{out:?}");
}

/// `PARASOL_VM` of `demand` placed on `host` (an instance event's payload).
fn placed_on(host: &str, demand: Resources) -> parasol::nova::HostEvent {
    parasol::nova::HostEvent::Upsert {
        instance_uuid: PARASOL_VM.into(),
        host: host.into(),
        node: None,
        demand,
        flavor: "f".into(),
    }
}

/// A host's usage and instance count in the ledger.
async fn used_on(ledger: &Ledger, host: parasol::domain::HostId) -> (Resources, i64) {
    let hosts = ledger.read_hosts().await.expect("hosts");
    let h = hosts.iter().find(|h| h.id == host).unwrap();
    (h.used, h.num_instances)
}

/// An evacuation as Nova makes it: the instance's allocation in Placement spans its failed
/// source and its destination until the source compute comes back and drops its part. At the
/// evacuation's `instance.rebuild.end` the ledger keeps the source's amounts as that part
/// (when a sync follows parts), so the ledger and Placement agree at once; later syncs see
/// the part as known (counted once) and release it when Placement drops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evacuation_s_source_is_placement_s_part_from_its_rebuild_end_until_dropped() {
    let TwoHosts {
        placement,
        ledger,
        client,
        mut cache,
        c1,
        c2,
        _db: _kept,
    } = two_hosts_synced(true).await;
    let small = Resources::new(1, 512, 1);
    let amounts = json!({"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1});
    let put = |allocations: Value, generation: Value| {
        let placement = &placement;
        async move {
            let body = json!({"allocations": allocations, "project_id": "p", "user_id": "u",
                "consumer_generation": generation});
            let (status, answer) = placement
                .request(
                    reqwest::Method::PUT,
                    &format!("/allocations/{PARASOL_VM}"),
                    Some(body),
                )
                .await;
            assert_eq!(status, 204, "{answer}");
        }
    };
    // Built on the source.
    let claimed = ledger
        .claim(c1, PARASOL_VM, &small, 1100)
        .await
        .expect("claim");
    assert_eq!(claimed, ClaimOutcome::Claimed);
    put(json!({C1: {"resources": amounts}}), Value::Null).await;
    let built = placed_on("source", small);
    apply_event(&ledger, "instance.create.end", 1200, built).await;
    sync(&client, &ledger, &mut cache, false, 1300)
        .await
        .expect("sync");
    // Evacuated: the destination claimed, Placement's allocation spans both.
    let claimed = ledger
        .claim(c2, PARASOL_VM, &small, 1400)
        .await
        .expect("claim");
    assert_eq!(claimed, ClaimOutcome::Claimed);
    put(
        json!({C1: {"resources": amounts}, C2: {"resources": amounts}}),
        json!(1),
    )
    .await;
    let rebuilt = placed_on("dest", small);
    apply_event(&ledger, "instance.rebuild.end", 1500, rebuilt).await;
    assert_eq!(
        used_on(&ledger, c1).await,
        (small, 0),
        "the source's part, at once"
    );
    assert_eq!(used_on(&ledger, c2).await, (small, 1));
    let report = sync(&client, &ledger, &mut cache, false, 1600)
        .await
        .expect("sync");
    assert_eq!(
        (report.imported_allocations, report.released_allocations),
        (0, 0),
        "the part is known: {report:?}"
    );
    assert_eq!(used_on(&ledger, c1).await, (small, 0), "counted once");
    // The source compute comes back and drops its part.
    put(json!({C2: {"resources": amounts}}), json!(2)).await;
    let report = sync(&client, &ledger, &mut cache, false, 1700)
        .await
        .expect("sync");
    assert_eq!(report.released_allocations, 1, "{report:?}");
    assert_eq!(used_on(&ledger, c1).await, (Resources::ZERO, 0));
    assert_eq!(used_on(&ledger, c2).await, (small, 1));
}

/// Nova's conductor moves a live-migrating instance's allocation to the migration record
/// before it asks for the destination; a sync that reads that swap before Parasol's claim
/// (a request that found no candidate asks for one) took the migration record for a second
/// allocation of the same amounts on the source, held until a full sync. The instance's
/// allocation there is now adopted as the move's source under the migration's key: counted
/// once, then the claim, the move's end and Placement's cleanup leave nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_record_read_before_the_move_s_claim_is_the_instance_s_source() {
    const MIGRATION: &str = "33333333-0000-4000-8000-000000000001";
    let TwoHosts {
        placement,
        ledger,
        client,
        mut cache,
        c1,
        c2,
        _db: _kept,
    } = two_hosts_synced(false).await;
    let small = Resources::new(1, 512, 1);
    let amounts = json!({"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1});
    let claimed = ledger
        .claim(c1, PARASOL_VM, &small, 1100)
        .await
        .expect("claim");
    assert_eq!(claimed, ClaimOutcome::Claimed);
    allocate(&placement, PARASOL_VM, C1, amounts.clone()).await;
    let built = placed_on("source", small);
    apply_event(&ledger, "instance.create.end", 1200, built).await;
    sync(&client, &ledger, &mut cache, false, 1300)
        .await
        .expect("sync");

    // The conductor's swap, then a sync before the claim.
    placement
        .call(
            reqwest::Method::DELETE,
            &format!("/allocations/{PARASOL_VM}"),
            None,
        )
        .await;
    allocate(&placement, MIGRATION, C1, amounts.clone()).await;
    let swapped = sync(&client, &ledger, &mut cache, false, 1400)
        .await
        .expect("sync after the swap");
    assert_eq!(swapped.imported_allocations, 0, "{swapped:?}");
    assert_eq!(used_on(&ledger, c1).await, (small, 1), "counted once");
    let held = ledger.held_moves().await.expect("held");
    assert_eq!(held.len(), 1);
    assert_eq!(
        (&*held[0].instance_uuid, &*held[0].key),
        (PARASOL_VM, MIGRATION)
    );

    // The claim, the move's end and Placement's cleanup of the migration record.
    let claimed = ledger
        .claim(c2, PARASOL_VM, &small, 1500)
        .await
        .expect("claim");
    assert_eq!(claimed, ClaimOutcome::Claimed);
    allocate(&placement, PARASOL_VM, C2, amounts).await;
    assert_eq!(used_on(&ledger, c1).await, (small, 1));
    assert_eq!(used_on(&ledger, c2).await.0, small);
    let ended = parasol::nova::HostEvent::Move {
        instance_uuid: PARASOL_VM.into(),
        step: parasol::nova::MoveStep::Ended,
    };
    apply_event(&ledger, "instance.live_migration_post.end", 1600, ended).await;
    placement
        .call(
            reqwest::Method::DELETE,
            &format!("/allocations/{MIGRATION}"),
            None,
        )
        .await;
    assert_eq!(
        used_on(&ledger, c1).await,
        (Resources::ZERO, 0),
        "nothing left on the source"
    );
    let last = sync(&client, &ledger, &mut cache, false, 1700)
        .await
        .expect("sync");
    assert_eq!(
        (last.imported_allocations, last.released_allocations),
        (0, 0),
        "{last:?}"
    );
    assert_eq!(used_on(&ledger, c1).await, (Resources::ZERO, 0));
    assert_eq!(used_on(&ledger, c2).await.0, small);
}

/// Later syncs list every provider and read only those whose generation changed: an
/// inventory change and a new allocation are read at once; a consumer that left an unchanged
/// provider for one just read (a move) has the provider it left read too; a host the ledger
/// lost is read again. A deletion does not raise a provider's generation in Placement, so the
/// provider it left is read at the next full sync, and the import is released then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_reads_only_providers_whose_generation_changed_and_a_full_one_reads_all() {
    let placement = Placement::start().await;
    provider(&placement, "compute1", C1, inventory(8, 1.0, 8192, 0, 100)).await;
    provider(&placement, "compute2", C2, inventory(8, 1.0, 8192, 0, 100)).await;
    provider(&placement, "nic-pf", NESTED, Value::Null).await;
    let (ledger, _db) = ledger().await;
    let client = PlacementClient::new(placement_settings(&placement), Arc::new(SystemClock))
        .expect("client");
    let mut cache = ProviderCache::default();
    let usage_of = |report: &parasol::placement::SyncReport, provider: &str| {
        report.placement_allocations[provider]
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };

    let first = sync(&client, &ledger, &mut cache, false, 1000)
        .await
        .expect("first sync");
    assert_eq!(
        (first.listed_providers, first.read_providers, first.hosts),
        (3, 3, 2),
        "the first sync reads every provider: {first:?}"
    );
    assert_eq!(first.skipped_providers, 1);

    let quiet = sync(&client, &ledger, &mut cache, false, 2000)
        .await
        .expect("second sync");
    assert_eq!(
        (quiet.listed_providers, quiet.read_providers, quiet.hosts),
        (3, 0, 2),
        "nothing changed, nothing read: {quiet:?}"
    );
    assert_eq!(quiet.skipped_providers, 1);
    assert_eq!(quiet.placement_allocations.len(), 2, "both kept as read");

    set_inventories(&placement, C1, inventory(16, 1.0, 8192, 0, 100)).await;
    allocate(
        &placement,
        OLD_VM,
        C2,
        json!({"VCPU": 2, "MEMORY_MB": 1024}),
    )
    .await;
    let changed = sync(&client, &ledger, &mut cache, false, 3000)
        .await
        .expect("third sync");
    assert_eq!(changed.read_providers, 2, "{changed:?}");
    assert_eq!(changed.imported_allocations, 1);
    let hosts = ledger.read_hosts().await.expect("hosts");
    let c1 = hosts.iter().find(|h| &**h.uuid() == C1).expect("compute1");
    assert_eq!(*c1.usable(), Resources::new(16, 8192, 100));
    assert_eq!(usage_of(&changed, C2), [OLD_VM]);

    // The instance moves to compute1 (one PUT: compute2's generation stays).
    placement
        .replace_allocations(
            OLD_VM,
            json!({C1: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}}),
        )
        .await;
    let moved = sync(&client, &ledger, &mut cache, false, 4000)
        .await
        .expect("sync after the move");
    assert_eq!(
        moved.read_providers, 2,
        "compute1 changed, and compute2, which the instance left, is read too: {moved:?}"
    );
    assert_eq!(usage_of(&moved, C1), [OLD_VM]);
    assert!(usage_of(&moved, C2).is_empty());
    assert_eq!(
        moved.released_allocations, 1,
        "the import on compute2 released"
    );
    assert_eq!(moved.imported_allocations, 1, "and recorded on compute1");

    // Deleted: Placement leaves compute1's generation as it was.
    placement
        .call(
            reqwest::Method::DELETE,
            &format!("/allocations/{OLD_VM}"),
            None,
        )
        .await;
    let unseen = sync(&client, &ledger, &mut cache, false, 5000)
        .await
        .expect("sync after the deletion");
    assert_eq!(unseen.read_providers, 0, "{unseen:?}");
    assert_eq!(usage_of(&unseen, C1), [OLD_VM], "as last read");
    let full = sync(&client, &ledger, &mut cache, true, 6000)
        .await
        .expect("full sync");
    assert_eq!((full.read_providers, full.full), (3, true), "{full:?}");
    assert!(usage_of(&full, C1).is_empty());
    assert_eq!(full.released_allocations, 1, "the import released");
    assert!(ledger.allocation(OLD_VM).await.expect("read").is_none());

    // An instance deleted as Nova does it: its allocation dropped in Placement (no generation
    // raised) and its notification releasing it in the ledger. The host now disagrees with
    // what was last read of it: read again, not imported again from that.
    allocate(
        &placement,
        PARASOL_VM,
        C2,
        json!({"VCPU": 1, "MEMORY_MB": 256}),
    )
    .await;
    let imported = sync(&client, &ledger, &mut cache, false, 6500)
        .await
        .expect("sync after a new allocation");
    assert_eq!(imported.imported_allocations, 1, "{imported:?}");
    placement
        .call(
            reqwest::Method::DELETE,
            &format!("/allocations/{PARASOL_VM}"),
            None,
        )
        .await;
    let held = ledger
        .allocation(PARASOL_VM)
        .await
        .expect("read")
        .expect("imported");
    ledger.release(PARASOL_VM).await.expect("release");
    ledger.reload(&[held.host_id]).await.expect("reload");
    let after = sync(&client, &ledger, &mut cache, false, 6600)
        .await
        .expect("sync after the deletion and its notification");
    assert_eq!(
        (
            after.read_providers,
            after.disagreeing_providers,
            after.imported_allocations
        ),
        (1, 1, 0),
        "{after:?}"
    );
    assert!(ledger.allocation(PARASOL_VM).await.expect("read").is_none());
    assert!(usage_of(&after, C2).is_empty());

    // A host gone from the ledger is registered again though Placement did not change.
    let c2 = ledger
        .host_id_by_uuid(C2)
        .await
        .expect("read")
        .expect("compute2");
    ledger.table().forget(&[c2]);
    let again = sync(&client, &ledger, &mut cache, false, 7000)
        .await
        .expect("sync after the host was forgotten");
    assert_eq!(again.read_providers, 1, "{again:?}");
    assert!(ledger.table().id_of_uuid(C2).is_some());
}

/// A compute service deleted as nova-api deletes it: its provider's allocations, then the
/// provider (`delete_resource_provider(cascade=True)`), then the service. The next sync takes
/// the host out of the ledger and the live table with what the ledger still held there; a
/// host Placement never had (known from notifications) and one still listed stay; the node
/// re-created under the same uuid (Nova keeps a node's uuid in its `compute_id` file) is a
/// host again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_deleted_from_placement_takes_its_host_and_what_it_held_out_of_the_ledger() {
    const EMULATED: &str = "11111111-0000-4000-8000-0000000000e1";
    let placement = Placement::start().await;
    provider(&placement, "compute1", C1, inventory(8, 1.0, 8192, 0, 100)).await;
    provider(&placement, "compute2", C2, inventory(8, 1.0, 8192, 0, 100)).await;
    allocate(
        &placement,
        OLD_VM,
        C2,
        json!({"VCPU": 2, "MEMORY_MB": 1024}),
    )
    .await;
    let (ledger, _db) = ledger().await;
    let emulated = ledger
        .register_host(
            &HostRegistration::simple("emulated", EMULATED, 8, 8192, 100),
            1,
        )
        .await
        .expect("register");
    let client = PlacementClient::new(placement_settings(&placement), Arc::new(SystemClock))
        .expect("client");
    let mut cache = ProviderCache::default();
    let first = sync(&client, &ledger, &mut cache, false, 1000)
        .await
        .expect("first sync");
    assert_eq!((first.hosts, first.removed_hosts), (2, 0), "{first:?}");
    let c2 = ledger.table().id_of_uuid(C2).expect("compute2 registered");
    let claimed = ledger
        .claim(c2, PARASOL_VM, &Resources::new(1, 256, 1), 1100)
        .await
        .expect("claim");
    assert_eq!(claimed, ClaimOutcome::Claimed);

    // nova-api's `_delete_compute_service`: the allocations, then the provider.
    for consumer in [OLD_VM, PARASOL_VM] {
        placement
            .request(
                reqwest::Method::DELETE,
                &format!("/allocations/{consumer}"),
                None,
            )
            .await;
    }
    placement
        .call(
            reqwest::Method::DELETE,
            &format!("/resource_providers/{C2}"),
            None,
        )
        .await;
    let after = sync(&client, &ledger, &mut cache, false, 2000)
        .await
        .expect("sync after the deletion");
    assert_eq!((after.removed_hosts, after.hosts), (1, 1), "{after:?}");
    assert!(ledger.table().id_of_uuid(C2).is_none(), "out of the table");
    let hosts = ledger.read_hosts().await.expect("hosts");
    let mut uuids: Vec<&str> = hosts.iter().map(|h| &**h.uuid()).collect();
    uuids.sort();
    assert_eq!(
        uuids,
        [C1, EMULATED],
        "compute2 out of the ledger, the others kept"
    );
    for consumer in [OLD_VM, PARASOL_VM] {
        assert!(
            ledger.allocation(consumer).await.expect("read").is_none(),
            "{consumer} released with its host"
        );
    }
    assert!(ledger
        .table()
        .by_uuid(EMULATED)
        .is_some_and(|h| h.id == emulated));

    // Nothing more to remove, and a new process (an empty cache) removes nothing it never saw.
    let quiet = sync(&client, &ledger, &mut cache, false, 3000)
        .await
        .expect("quiet sync");
    assert_eq!(quiet.removed_hosts, 0, "{quiet:?}");
    let fresh = sync_once(&client, &ledger, 3500).await.expect("fresh sync");
    assert_eq!(fresh.removed_hosts, 0, "{fresh:?}");
    assert!(ledger.table().id_of_uuid(EMULATED).is_some());

    // The node comes back under its uuid: a host again.
    provider(&placement, "compute2", C2, inventory(8, 1.0, 8192, 0, 100)).await;
    let back = sync(&client, &ledger, &mut cache, false, 4000)
        .await
        .expect("sync after the node came back");
    assert_eq!(back.hosts, 2, "{back:?}");
    let c2 = ledger.table().by_uuid(C2).expect("compute2 again");
    assert_eq!(c2.used, Resources::ZERO, "nothing of before held on it");
}

async fn healthz_placement(http: &reqwest::Client, address: &str) -> Value {
    let body: Value = http
        .get(format!("{address}/healthz"))
        .send()
        .await
        .expect("healthz")
        .json()
        .await
        .expect("json");
    body["placement"].clone()
}

/// Polls `check` every 100 ms for up to 30 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_resync_follows_placement_and_an_outage_keeps_the_last_state() {
    let mut placement = Placement::start().await;
    provider(&placement, "compute1", C1, inventory(8, 1.0, 4096, 0, 40)).await;
    let db = tempfile::tempdir().expect("temp dir");
    let mut settings = Settings::default();
    // No log written out per test service (the binary's tests keep the default).
    settings.ledger.wal_prewrite_mib = 0;
    settings.ledger.url = format!("sqlite://{}", db.path().join("ledger.db").display());
    settings.amqp.url = String::new();
    settings.placement = placement_settings(&placement);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let app = Application::build_with(settings, listener, Arc::new(SystemClock))
        .await
        .expect("build");
    let address = format!("http://127.0.0.1:{}", app.port());
    let handles = app.handles().clone();
    let shutdown = app.shutdown();
    app.start_placement_sync();
    tokio::spawn(app.run_until_stopped());
    let http = reqwest::Client::new();
    let ledger = handles.scheduler.ledger().clone();
    let usable = || async {
        ledger
            .read_hosts()
            .await
            .expect("hosts")
            .first()
            .map(|h| *h.usable())
    };

    eventually("the first sync", || async {
        healthz_placement(&http, &address).await["state"] == "synced"
    })
    .await;
    assert_eq!(usable().await, Some(Resources::new(8, 4096, 40)));

    set_inventories(&placement, C1, inventory(16, 1.0, 4096, 0, 40)).await;
    eventually("a resync with the new inventory", || async {
        usable().await == Some(Resources::new(16, 4096, 40))
    })
    .await;

    placement.stop();
    eventually("/healthz to report the outage", || async {
        healthz_placement(&http, &address).await["state"] == "stale"
    })
    .await;
    let health = healthz_placement(&http, &address).await;
    assert_eq!(health["reachable"], false);
    assert!(health["last_error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(health["hosts"], 1, "the last good sync's count stays");
    assert_eq!(
        usable().await,
        Some(Resources::new(16, 4096, 40)),
        "the last known inventory stays in the ledger"
    );
    let metrics = http
        .get(format!("{address}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(metrics.contains("parasol_placement_sync_duration_seconds_count"));
    let errors: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("parasol_placement_sync_errors_total "))
        .expect("error counter")
        .parse()
        .expect("number");
    assert!(errors >= 1.0);
    shutdown.stop().await;
}

/// Placement served over HTTPS with a certificate of a private CA (as most clouds' internal
/// endpoints are): the sync refuses the handshake while the CA is not trusted, naming the
/// certificate, and registers the hosts once `[placement] cafile` names the CA's PEM file (Nova's
/// `[placement] cafile`, carried by `config from-nova`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_behind_a_private_ca_is_reached_with_its_cafile() {
    let placement = Placement::start().await;
    provider(
        &placement,
        "compute1",
        C1,
        inventory(8, 4.0, 16384, 512, 100),
    )
    .await;
    let front =
        tls_front::TlsFront::start(placement.url.trim_start_matches("http://").to_string()).await;
    let (ledger, dir) = ledger().await;

    let untrusted = PlacementSettings {
        url: front.base.clone(),
        ..placement_settings(&placement)
    };
    let client = PlacementClient::new(untrusted, Arc::new(SystemClock)).expect("client");
    let refused = sync_once(&client, &ledger, 1000)
        .await
        .expect_err("an untrusted CA");
    let message = format!("{refused:?}").to_lowercase();
    assert!(message.contains("certificate"), "{message}");
    assert!(ledger.read_hosts().await.expect("hosts").is_empty());

    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &front.ca_pem).expect("write the CA");
    let mut trusted = PlacementSettings {
        url: front.base.clone(),
        ..placement_settings(&placement)
    };
    trusted.keystone.cafile = ca.display().to_string();
    trusted.validate().expect("a CA bundle is a valid cafile");
    let client = PlacementClient::new(trusted, Arc::new(SystemClock)).expect("client");
    let report = sync_once(&client, &ledger, 1000)
        .await
        .expect("sync over HTTPS");
    assert_eq!(report.hosts, 1);
    let hosts = ledger.read_hosts().await.expect("hosts");
    assert_eq!(hosts.len(), 1);
    assert_eq!(&**hosts[0].host(), "compute1");
}
