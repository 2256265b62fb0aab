//! A fixed in-process workload of the ledger's write path (issue 41): 10,000 claims and
//! 100,000 notifications on a fresh SQLite ledger, through the calls the service makes
//! (`Scheduler::schedule` for the claims, `Ingest::apply` for HTTP's and the RPC casts' single
//! messages, `Ingest::apply_batch` for the RabbitMQ consumer's batches), the same messages in
//! the same order every run. Meant for instruction counts, which a busy machine does not
//! disturb:
//!
//! `cargo build -p openstack-bench --profile perf --example bench_effects`
//! `valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out target/perf/examples/bench_effects`
//!
//! and for its wall time (printed per phase) where the machine is quiet. The phases:
//! 1. registration: 1,000 hosts announce themselves, batches of 100 (hot batch);
//! 2. claims: 10,000 decisions with their claims (filter backend, one caller);
//! 3. builds: each claim's `instance.create.end`, one at a time (hot single);
//! 4. heartbeats: 9,000 single heartbeats (hot single);
//! 5. traffic: 60,000 host-state events in batches of 100, one in five a re-registration
//!    (hot batch);
//! 6. mixed: 10,000 batches' worth of instance messages (resize steps, info casts, unknown
//!    events) among host-state events, batches of 100 (the general path);
//! 7. deletes: the 10,000 instances' `instance.delete.end`, batches of 100 (general path).
//!
//! `--ledger postgres://…/postgres` runs it on a fresh database of that server instead
//! (dropped at the end).

use parasol::clock::{SharedClock, SystemClock};
use parasol::configuration::{BackendKind, Settings};
use parasol::domain::{Inventory, RequestContext, Resources};
use parasol::ledger::Ledger;
use parasol::notifications::Ingest;
use parasol::nova::{HostEvent, HostStatePayload, MoveStep, Notification};
use parasol::stats::Stats;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The service's allocator (`src/main.rs`), so that this measures what the service runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Every count is divided by `BENCH_EFFECTS_SCALE` (default 1), for a shorter run under a
/// slow instrument.
fn scale() -> usize {
    std::env::var("BENCH_EFFECTS_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(1)
}

const BATCH: usize = 100;

fn host(h: usize) -> String {
    format!("compute{h:04}")
}

fn host_uuid(h: usize) -> String {
    format!("00000000-0000-4000-8000-{h:012}")
}

fn instance(i: usize) -> String {
    format!("10000000-0000-4000-8000-{i:012}")
}

fn note(id: &mut u64, event_type: &str, event: HostEvent) -> Notification {
    *id += 1;
    Notification {
        message_id: format!("msg-{id}"),
        event_type: event_type.into(),
        publisher_id: None,
        timestamp: None,
        event,
    }
}

/// Host `h`'s state; `vcpu` its VCPU total (a change of it is a re-registration).
fn host_state(h: usize, vcpu: i64) -> HostEvent {
    let mut inventory = BTreeMap::new();
    inventory.insert("VCPU".into(), Inventory::of(vcpu).with(0, 16.0));
    inventory.insert("MEMORY_MB".into(), Inventory::of(262_144));
    inventory.insert("DISK_GB".into(), Inventory::of(2_000));
    HostEvent::HostState(HostStatePayload {
        host: host(h),
        node: host(h),
        compute_node_uuid: host_uuid(h),
        availability_zone: None,
        up: true,
        disabled: false,
        inventory,
        traits: vec!["HW_CPU_X86_AVX2".into()],
        aggregates: Vec::new(),
        usage: None,
        instance_usage: None,
        instance_qos: None,
    })
}

fn tiny() -> Resources {
    Resources::new(1, 512, 1)
}

async fn batches(ingest: &Ingest, notes: &[Notification]) -> usize {
    let mut applied = 0;
    for chunk in notes.chunks(BATCH) {
        let batch: Vec<&Notification> = chunk.iter().collect();
        let outcomes = ingest.apply_batch(&batch).await.expect("batch applied");
        applied += outcomes.iter().filter(|o| o.is_ok()).count();
    }
    applied
}

fn phase(name: &str, count: usize, started: Instant) {
    let s = started.elapsed().as_secs_f64();
    println!(
        "| {name} | {count} | {:.3} | {:.0} |",
        s,
        count as f64 / s.max(1e-9)
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let pg = std::env::args()
        .skip_while(|a| a != "--ledger")
        .nth(1)
        .filter(|u| u.starts_with("postgres"));
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, drop_db) = match &pg {
        Some(server) => {
            let name = format!("bench_effects_{}", std::process::id());
            let admin = sqlx::PgPool::connect(server).await.expect("postgres");
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&admin)
                .await
                .expect("create database");
            let base = server.rsplit_once('/').map_or(server.as_str(), |(b, _)| b);
            (format!("{base}/{name}"), Some((admin, name)))
        }
        None => (
            format!("sqlite://{}", dir.path().join("ledger.db").display()),
            None,
        ),
    };
    let ledger = Ledger::connect(&url, 4).await.expect("ledger");
    ledger.migrate().await.expect("migrate");
    let clock: SharedClock = Arc::new(SystemClock);
    let stats = Arc::new(Stats::new(clock.clone(), 60));
    let ingest = Ingest::new(ledger.clone(), clock.clone(), stats.clone());
    let scale = scale();
    let (hosts, claims) = (1_000 / scale, 10_000 / scale);
    let (heartbeats, traffic_n, mixed_n) = (9_000 / scale, 60_000 / scale, 2_000 / scale);
    let mut id = 0u64;
    let mut total = 0usize;
    println!("# bench_effects: {url}");
    println!("| phase | messages | s | per s |");
    println!("|---|---|---|---|");

    let t = Instant::now();
    let regs: Vec<_> = (0..hosts)
        .map(|h| note(&mut id, "compute.host.state", host_state(h, 64)))
        .collect();
    let n = batches(&ingest, &regs).await;
    assert_eq!(n, hosts);
    total += n;
    phase("registration", n, t);

    let mut settings = Settings::default();
    settings.scheduler.backend = BackendKind::Filter;
    settings.scheduler.workers = 1;
    settings.scheduler.seed = Some(1);
    settings.amqp.url = String::new();
    settings.policy.host_timeout_s = 0;
    let scheduler = parasol::scheduling::Scheduler::start(
        Arc::new(settings),
        ledger.clone(),
        stats,
        clock.clone(),
    )
    .await
    .expect("scheduler");
    let t = Instant::now();
    let mut placed = Vec::with_capacity(claims);
    for i in 0..claims {
        let req = RequestContext::with_demand(instance(i), "m1.tiny", tiny());
        let hosts = scheduler.schedule(vec![req]).await.expect("placed");
        placed.push(hosts[0][0].profile.host.to_string());
    }
    phase("claims", claims, t);
    scheduler.backend().stop();

    let t = Instant::now();
    for (i, on) in placed.iter().enumerate() {
        let n = note(
            &mut id,
            "instance.create.end",
            HostEvent::Upsert {
                instance_uuid: instance(i),
                host: on.clone(),
                node: Some(on.clone()),
                demand: tiny(),
                flavor: "m1.tiny".into(),
            },
        );
        ingest.apply(&n).await.expect("build confirmed");
    }
    total += claims;
    phase("builds (single)", claims, t);

    let t = Instant::now();
    for k in 0..heartbeats {
        let n = note(&mut id, "compute.host.state", host_state(k % hosts, 64));
        ingest.apply(&n).await.expect("heartbeat");
    }
    total += heartbeats;
    phase("heartbeats (single)", heartbeats, t);

    let t = Instant::now();
    let traffic: Vec<_> = (0..traffic_n)
        .map(|k| {
            let h = (k * 7) % hosts;
            // One in five changes the host's VCPU total: a re-registration.
            let vcpu = if k % 5 == 0 {
                64 + (k / 5 % 2) as i64 * 8
            } else {
                64
            };
            note(&mut id, "compute.host.state", host_state(h, vcpu))
        })
        .collect();
    let n = batches(&ingest, &traffic).await;
    total += traffic.len();
    phase("traffic (hot batches)", n, t);

    // Instance messages among host-state events: the general path. The first 2,000
    // instances resize in place and confirm, info casts list what runs.
    let t = Instant::now();
    let mut mixed = Vec::with_capacity(mixed_n * 5);
    for k in 0..mixed_n {
        let i = k;
        let on = &placed[i];
        match k % 5 {
            0 => mixed.push(note(
                &mut id,
                "instance.resize_finish.end",
                HostEvent::Upsert {
                    instance_uuid: instance(i),
                    host: on.clone(),
                    node: Some(on.clone()),
                    demand: Resources::new(2, 1024, 1),
                    flavor: "m1.small".into(),
                },
            )),
            1 => mixed.push(note(
                &mut id,
                "instance.live_migration_pre.end",
                HostEvent::Move {
                    instance_uuid: instance(i),
                    step: MoveStep::Started,
                },
            )),
            2 => mixed.push(note(
                &mut id,
                "update_instance_info",
                HostEvent::UpdateInstanceInfo {
                    host: on.clone(),
                    instance_uuids: vec![instance(i)],
                },
            )),
            3 => mixed.push(note(
                &mut id,
                "instance.exists",
                HostEvent::Unknown {
                    event_type: "instance.exists".into(),
                },
            )),
            _ => mixed.push(note(
                &mut id,
                "service.update",
                HostEvent::ServiceUpdate {
                    host: on.clone(),
                    disabled: false,
                    forced_down: false,
                },
            )),
        }
        for j in 0..4 {
            let h = (k * 4 + j) % hosts;
            mixed.push(note(&mut id, "compute.host.state", host_state(h, 64)));
        }
    }
    let n = batches(&ingest, &mixed).await;
    total += mixed.len();
    phase("mixed (general batches)", n, t);

    let t = Instant::now();
    let deletes: Vec<_> = placed
        .iter()
        .enumerate()
        .map(|(i, on)| {
            note(
                &mut id,
                "instance.delete.end",
                HostEvent::Release {
                    instance_uuid: instance(i),
                    host: Some(on.clone()),
                },
            )
        })
        .collect();
    let n = batches(&ingest, &deletes).await;
    assert_eq!(n, claims);
    total += n;
    phase("deletes (general batches)", n, t);
    println!(
        "# notifications: {total}; claims: {claims}; now {}",
        clock.now_ms()
    );
    assert_eq!(total, 100_000 / scale);
    let in_use: i64 = ledger
        .table()
        .snapshot()
        .iter()
        .map(|h| h.used.vcpu())
        .sum();
    assert_eq!(in_use, 0, "every claim released");
    ledger.close().await;
    if let Some((admin, name)) = drop_db {
        sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .execute(&admin)
            .await
            .expect("drop database");
    }
}
