//! A batch of notifications applies its host-state events coalesced (a few statements for all
//! of them, the last state per compute node winning); the ledger it leaves must be exactly the
//! one that applying the same messages one at a time leaves, on both engines.

use crate::on_both_engines;
use parasol::domain::{HostState, Inventory, Resources};
use parasol::ledger::Ledger;
use parasol::notifications::{apply_batch, Outcome};
use parasol::nova::{HostEvent, HostStatePayload, Notification};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const HOSTS: usize = 12;
const INSTANCES: usize = 40;

fn host_name(h: usize) -> String {
    format!("cn{h:02}")
}

fn host_uuid(h: usize) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, host_name(h).as_bytes()).to_string()
}

fn instance_uuid(i: usize) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, format!("vm{i}").as_bytes()).to_string()
}

fn note(id: usize, event_type: &str, event: HostEvent) -> Notification {
    Notification {
        message_id: format!("m{id}"),
        event_type: event_type.into(),
        publisher_id: None,
        timestamp: None,
        event,
    }
}

/// A host-state event of host `h` with one of a few profiles: capacity changes, a class that
/// comes and goes (and may be in use when it goes), traits and liveness.
fn host_state(rng: &mut impl Rng, h: usize) -> HostEvent {
    let mut inventory = BTreeMap::new();
    inventory.insert(
        "VCPU".into(),
        Inventory::of([8, 16, 32][rng.gen_range(0..3)]),
    );
    inventory.insert(
        "MEMORY_MB".into(),
        Inventory::of(16384).with(rng.gen_range(0..2) * 512, 1.5),
    );
    if rng.gen_bool(0.8) {
        inventory.insert("DISK_GB".into(), Inventory::of(200));
    }
    if rng.gen_bool(0.3) {
        inventory.insert("CUSTOM_GPU".into(), Inventory::of(rng.gen_range(0..3)));
    }
    let traits = if rng.gen_bool(0.5) {
        vec!["HW_CPU_X86_AVX2".to_string()]
    } else {
        Vec::new()
    };
    HostEvent::HostState(HostStatePayload {
        host: host_name(h),
        node: host_name(h),
        compute_node_uuid: host_uuid(h),
        availability_zone: None,
        up: rng.gen_bool(0.9),
        disabled: rng.gen_bool(0.1),
        inventory,
        traits,
        aggregates: Vec::new(),
        usage: None,
        instance_usage: None,
        instance_qos: None,
    })
}

/// A seeded stream of every kind of message the consumer applies, hosts and instances drawn
/// from small sets so that a batch holds several events of the same host, instance messages
/// between them, duplicates, and messages that are rejected (unknown hosts).
fn messages(seed: u64, count: usize) -> Vec<Notification> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out: Vec<Notification> = Vec::with_capacity(count);
    // Every host registers first in a few of the batches, to have instances to move around.
    for h in 0..HOSTS {
        let event = host_state(&mut rng, h);
        out.push(note(out.len(), "compute.host.state", event));
    }
    while out.len() < count {
        let id = out.len();
        let h = rng.gen_range(0..HOSTS);
        let host = if rng.gen_bool(0.03) {
            "ghost".to_string()
        } else {
            host_name(h)
        };
        let vm = instance_uuid(rng.gen_range(0..INSTANCES));
        let n = match rng.gen_range(0..100) {
            0..=44 => note(id, "compute.host.state", host_state(&mut rng, h)),
            45..=64 => {
                let event_type =
                    ["instance.create.end", "instance.resize.end"][rng.gen_range(0..2)];
                let mut demand = Resources::new(rng.gen_range(1..4), 1024, 10);
                if rng.gen_bool(0.2) {
                    demand.set(parasol::domain::ClassId::intern("CUSTOM_GPU").unwrap(), 1);
                }
                note(
                    id,
                    event_type,
                    HostEvent::Upsert {
                        instance_uuid: vm,
                        host,
                        node: None,
                        demand,
                        flavor: "f".into(),
                    },
                )
            }
            65..=74 => note(
                id,
                "instance.delete.end",
                HostEvent::Release {
                    instance_uuid: vm,
                    host: Some(host),
                },
            ),
            75..=80 => note(
                id,
                "service.update",
                HostEvent::ServiceUpdate {
                    host,
                    disabled: rng.gen_bool(0.5),
                    forced_down: rng.gen_bool(0.2),
                },
            ),
            81..=84 => note(
                id,
                "update_instance_info",
                HostEvent::UpdateInstanceInfo {
                    host,
                    instance_uuids: vec![vm, instance_uuid(rng.gen_range(0..INSTANCES))],
                },
            ),
            85..=87 => note(
                id,
                "sync_instance_info",
                HostEvent::SyncInstanceInfo {
                    host,
                    instance_uuids: vec![vm],
                },
            ),
            88..=90 => note(
                id,
                "delete_instance_info",
                HostEvent::DeleteInstanceInfo {
                    host,
                    instance_uuid: vm,
                },
            ),
            91..=92 => note(
                id,
                "compute.metrics.update",
                HostEvent::Unknown {
                    event_type: "compute.metrics.update".into(),
                },
            ),
            // A redelivery of an earlier message.
            _ => out[rng.gen_range(0..out.len())].clone(),
        };
        out.push(n);
    }
    out
}

/// Every row of the ledger, by the names that identify it (host row ids are surrogates: on
/// PostgreSQL an upsert that updates still takes a sequence number, so they may differ).
pub(crate) async fn dump(url: &str) -> Vec<String> {
    macro_rules! dump {
        ($conn:expr) => {{
            let mut conn = $conn;
            let mut lines = Vec::new();
            let hosts: Vec<(String, String, String, String, bool, bool, bool, i64, String, String)> =
                sqlx::query_as(
                    "SELECT uuid, host, node, availability_zone, up, disabled, forced_down, \
                     last_seen_ms, traits, aggregates FROM hosts ORDER BY uuid",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap();
            lines.extend(hosts.iter().map(|h| format!("host {h:?}")));
            let inventories: Vec<(String, String, i64, i64, i64, i64, i64, f64, i64, i64)> =
                sqlx::query_as(
                    "SELECT h.uuid, i.resource_class, i.total, i.reserved, i.min_unit, \
                     i.max_unit, i.step_size, i.allocation_ratio, i.usable, i.used \
                     FROM inventories i JOIN hosts h ON h.id = i.host_id \
                     ORDER BY h.uuid, i.resource_class",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap();
            lines.extend(inventories.iter().map(|i| format!("inventory {i:?}")));
            let allocations: Vec<(String, String, String, bool, bool, bool, i64)> =
                sqlx::query_as(
                    "SELECT a.instance_uuid, h.uuid, a.resources, a.confirmed, a.instance, \
                     a.imported, a.created_ms FROM allocations a JOIN hosts h ON h.id = a.host_id \
                     ORDER BY a.instance_uuid",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap();
            lines.extend(allocations.iter().map(|a| format!("allocation {a:?}")));
            let processed: Vec<(String, i64)> = sqlx::query_as(
                "SELECT message_id, processed_ms FROM processed_messages ORDER BY message_id",
            )
            .fetch_all(&mut conn)
            .await
            .unwrap();
            lines.extend(processed.iter().map(|p| format!("processed {p:?}")));
            lines
        }};
    }
    use sqlx::Connection;
    if url.starts_with("sqlite:") {
        dump!(sqlx::SqliteConnection::connect(url).await.unwrap())
    } else {
        dump!(sqlx::PgConnection::connect(url).await.unwrap())
    }
}

/// The live table by compute node, without the surrogate ids.
async fn table(ledger: &Ledger) -> Vec<String> {
    let mut hosts: Vec<HostState> = ledger.read_hosts().await.unwrap();
    hosts.sort_by(|a, b| a.profile.uuid.cmp(&b.profile.uuid));
    hosts
        .into_iter()
        .map(|mut h| {
            h.id = parasol::domain::HostId(0);
            format!("{h:?}")
        })
        .collect()
}

/// What an outcome says, without the reason's wording.
fn kind(o: &Outcome) -> String {
    match o {
        Ok(applied) => applied.as_str().to_string(),
        Err(_) => "rejected".into(),
    }
}

async fn coalesced_batches_leave_the_ledger_one_by_one_would(engine: &str) {
    for seed in [1, 2, 3] {
        let messages = messages(seed, 700);
        let (coalesced, coalesced_db) = crate::support::ledger(engine).await;
        let (single, single_db) = crate::support::ledger(engine).await;
        let (mut batched_outcomes, mut single_outcomes) = (Vec::new(), Vec::new());
        // Batches of varied sizes; batch k is applied at time k, one by one too.
        let mut at = 0;
        let mut k = 0;
        while at < messages.len() {
            let size = [1, 7, 50, 120][k % 4].min(messages.len() - at);
            let batch: Vec<&Notification> = messages[at..at + size].iter().collect();
            let now_ms = 1_000 + k as i64;
            batched_outcomes.extend(apply_batch(&coalesced, &batch, now_ms).await.unwrap());
            // The table as the batch left it (re-registered hosts are not read back) is what
            // the ledger holds.
            let kept = table(&coalesced).await;
            coalesced.reload_all().await.unwrap();
            assert_eq!(table(&coalesced).await, kept, "seed {seed}, batch {k}");
            for n in &batch {
                single_outcomes.extend(apply_batch(&single, &[*n], now_ms).await.unwrap());
            }
            at += size;
            k += 1;
        }
        let kinds = |o: &[Outcome]| o.iter().map(kind).collect::<Vec<_>>();
        assert_eq!(
            kinds(&batched_outcomes),
            kinds(&single_outcomes),
            "seed {seed}"
        );
        for outcome in ["applied", "duplicate", "rejected", "unknown_event"] {
            assert!(
                kinds(&batched_outcomes).iter().any(|k| k == outcome),
                "seed {seed}: the stream has no {outcome} message"
            );
        }
        let (a, b) = (dump(&coalesced_db.url).await, dump(&single_db.url).await);
        assert!(a.iter().any(|l| l.starts_with("allocation")), "seed {seed}");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y, "seed {seed}: the ledgers differ");
        }
        assert_eq!(a.len(), b.len(), "seed {seed}");
        assert_eq!(
            table(&coalesced).await,
            table(&single).await,
            "seed {seed}: the live tables differ"
        );
        // And the table is what the ledger holds.
        coalesced.reload_all().await.unwrap();
        assert_eq!(table(&coalesced).await, table(&single).await, "seed {seed}");
    }
}
on_both_engines!(
    coalesced_batches_leave_the_ledger_one_by_one_would,
    super::coalesced_batches_leave_the_ledger_one_by_one_would
);

/// A heartbeat (a host-state event that changes nothing but liveness) and then a
/// `service.update` of the same host in one batch: the service's word, the later one, stands,
/// as it does when the two come in separate batches.
async fn a_service_update_after_a_heartbeat_in_one_batch_stands(engine: &str) {
    let (ledger, _db) = crate::support::ledger(engine).await;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let HostEvent::HostState(mut state) = host_state(&mut rng, 0) else {
        unreachable!()
    };
    state.disabled = false;
    let register = note(1, "compute.host.state", HostEvent::HostState(state.clone()));
    apply_batch(&ledger, &[&register], 1).await.unwrap();
    let heartbeat = note(2, "compute.host.state", HostEvent::HostState(state));
    let disable = note(
        3,
        "service.update",
        HostEvent::ServiceUpdate {
            host: host_name(0),
            disabled: true,
            forced_down: false,
        },
    );
    let out = apply_batch(&ledger, &[&heartbeat, &disable], 2)
        .await
        .unwrap();
    assert_eq!(
        out.iter().map(kind).collect::<Vec<_>>(),
        ["applied", "applied"]
    );
    let host = &ledger.read_hosts().await.unwrap()[0];
    assert!(host.disabled, "the table: {host:?}");
    ledger.reload_all().await.unwrap();
    let host = &ledger.read_hosts().await.unwrap()[0];
    assert!(host.disabled, "the ledger: {host:?}");
    assert_eq!(host.last_seen_ms, 2, "the heartbeat was written too");
}
on_both_engines!(
    a_service_update_after_a_heartbeat_in_one_batch_stands,
    super::a_service_update_after_a_heartbeat_in_one_batch_stands
);
