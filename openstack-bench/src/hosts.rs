//! Emulated compute hosts: one tokio task per host that announces its inventory at start and
//! every `heartbeat`, boots what the driver sends it (publishing `instance.create.end`), and
//! deletes each instance when its lifetime ends (publishing `instance.delete.end`). Each host
//! keeps its own books: a boot that does not fit (its capacity times its allocation ratio) is
//! an oversubscription violation. Under a demand model ([`crate::demand`]) each heartbeat also
//! carries what the host measured: its usage, each instance's, and each instance's QoS
//! signals.

use crate::demand::{DemandModel, Profile};
use crate::notify::Notifier;
use crate::wire;
use parasol::domain::Resources;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// What the driver (or a host's own lifetime timer) asks a host to do.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // rare messages; boxing would only add an allocation
pub enum Command {
    Boot {
        uuid: String,
        demand: Resources,
        lifetime: Option<Duration>,
    },
    Delete {
        uuid: String,
    },
}

/// Counters shared by every host.
#[derive(Debug, Default)]
pub struct FleetCounters {
    /// Host-state events published on the heartbeat's tick (the announcement at start apart).
    pub heartbeats: AtomicU64,
    pub booted: AtomicU64,
    /// VCPU of the instances booted.
    pub booted_vcpu: AtomicU64,
    pub deleted: AtomicU64,
    pub violations: AtomicU64,
    /// Under a demand model: instances judged at heartbeats, and those served (§5.1's
    /// q_j = 1 in every class), summed over heartbeats: their ratio is the run's Q.
    pub qos_judged: AtomicU64,
    pub qos_served: AtomicU64,
}

/// How the hosts use what they run: with a demand model, and overcommitted by an allocation
/// ratio (VCPU and MEMORY_MB) that they report in their inventory.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub model: DemandModel,
    pub allocation_ratio: f64,
}

/// The running fleet.
pub struct Fleet {
    senders: Vec<mpsc::UnboundedSender<Command>>,
    tasks: Vec<JoinHandle<(Resources, Vec<String>)>>,
    stop: watch::Sender<bool>,
    pub counters: Arc<FleetCounters>,
}

impl Fleet {
    /// Starts `n` hosts of `capacity`; each publishes its host state before this returns.
    pub async fn start(
        n: usize,
        capacity: Resources,
        notifier: Notifier,
        heartbeat: Duration,
    ) -> Fleet {
        Self::start_measured(n, capacity, notifier, heartbeat, None).await
    }

    /// [`Fleet::start`], the hosts using what they run as `measured` says.
    pub async fn start_measured(
        n: usize,
        capacity: Resources,
        notifier: Notifier,
        heartbeat: Duration,
        measured: Option<Measured>,
    ) -> Fleet {
        let started = tokio::time::Instant::now();
        let (stop, stop_rx) = watch::channel(false);
        let counters = Arc::new(FleetCounters::default());
        let mut senders = Vec::with_capacity(n);
        let mut tasks = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = mpsc::unbounded_channel();
            let host = Host {
                name: wire::host_name(i),
                capacity,
                used: Resources::ZERO,
                running: HashMap::new(),
                measured,
                started,
                notifier: notifier.clone(),
                counters: counters.clone(),
                own: tx.clone(),
            };
            host.announce().await;
            // Spread heartbeats over the period so the broker sees a steady trickle.
            let phase = heartbeat.mul_f64((i as f64 + 0.5) / n as f64);
            tasks.push(tokio::spawn(host.run(
                rx,
                stop_rx.clone(),
                heartbeat,
                phase,
            )));
            senders.push(tx);
        }
        Fleet {
            senders,
            tasks,
            stop,
            counters,
        }
    }

    /// Hands a boot to host `index`; false when there is no such host.
    pub fn boot(
        &self,
        index: usize,
        uuid: String,
        demand: Resources,
        lifetime: Option<Duration>,
    ) -> bool {
        self.senders.get(index).is_some_and(|tx| {
            tx.send(Command::Boot {
                uuid,
                demand,
                lifetime,
            })
            .is_ok()
        })
    }

    /// Stops every host; returns each host's used resources by its own books.
    pub async fn stop(self) -> Vec<Resources> {
        self.stop_with_instances()
            .await
            .into_iter()
            .map(|(used, _)| used)
            .collect()
    }

    /// Stops every host; returns each host's used resources and the instances it runs, by
    /// its own books (a deleted instance is no longer among them).
    pub async fn stop_with_instances(self) -> Vec<(Resources, Vec<String>)> {
        let _ = self.stop.send(true);
        drop(self.senders);
        let mut hosts = Vec::with_capacity(self.tasks.len());
        for t in self.tasks {
            hosts.push(t.await.unwrap_or((Resources::ZERO, Vec::new())));
        }
        hosts
    }
}

struct Host {
    name: String,
    capacity: Resources,
    used: Resources,
    /// Each instance's request and, under a demand model, its profile.
    running: HashMap<String, (Resources, Option<Profile>)>,
    measured: Option<Measured>,
    started: tokio::time::Instant,
    notifier: Notifier,
    counters: Arc<FleetCounters>,
    own: mpsc::UnboundedSender<Command>,
}

impl Host {
    async fn announce(&self) {
        let event = match &self.measured {
            None => wire::host_state(&self.name, self.capacity),
            Some(m) => {
                let t_s = self.started.elapsed().as_secs_f64();
                let report = crate::demand::measure(
                    &m.model,
                    &self.capacity,
                    self.running
                        .iter()
                        .filter_map(|(uuid, (r, p))| Some((uuid.as_str(), r, p.as_ref()?))),
                    t_s,
                );
                self.counters
                    .qos_judged
                    .fetch_add(report.judged as u64, Ordering::Relaxed);
                self.counters
                    .qos_served
                    .fetch_add(report.served as u64, Ordering::Relaxed);
                wire::host_state_measured(
                    &self.name,
                    self.capacity,
                    m.allocation_ratio,
                    Some(&report),
                )
            }
        };
        self.notifier.publish(wire::HOST_STATE_KEY, &event).await;
    }

    /// What the host's books may hold of each class: its capacity times its ratio.
    fn fits(&self, after: &Resources) -> bool {
        let ratio = self.measured.map_or(1.0, |m| m.allocation_ratio);
        (0..3).all(|c| {
            let r = if c < 2 { ratio } else { 1.0 };
            after.0[c] as f64 <= (self.capacity.0[c] as f64 * r).floor()
        })
    }

    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Command>,
        mut stop: watch::Receiver<bool>,
        heartbeat: Duration,
        phase: Duration,
    ) -> (Resources, Vec<String>) {
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + phase, heartbeat);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => {
                    // What the driver handed over before the stop is still queued here: the
                    // service has claimed those boots, so carry them out (dropping them left
                    // the ledger holding claims no host's books had, issue 50's ledger ≠
                    // books). A lifetime's delete queued meanwhile is carried out too.
                    while let Ok(cmd) = rx.try_recv() {
                        self.handle(cmd).await;
                    }
                    break;
                }
                cmd = rx.recv() => match cmd {
                    Some(cmd) => self.handle(cmd).await,
                    None => break,
                },
                _ = beat.tick() => {
                    self.announce().await;
                    self.counters.heartbeats.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        (self.used, self.running.into_keys().collect())
    }

    async fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Boot {
                uuid,
                demand,
                lifetime,
            } => {
                let after = add(self.used, demand);
                if !self.fits(&after) {
                    self.counters.violations.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                self.used = after;
                let profile = self.measured.map(|m| m.model.profile(&uuid));
                self.running.insert(uuid.clone(), (demand, profile));
                self.counters.booted.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .booted_vcpu
                    .fetch_add(u64::try_from(demand.0[0]).unwrap_or(0), Ordering::Relaxed);
                let event = wire::instance_event("instance.create.end", &uuid, &self.name, demand);
                self.notifier.publish(wire::NOVA_KEY, &event).await;
                if let Some(life) = lifetime {
                    let own = self.own.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(life).await;
                        let _ = own.send(Command::Delete { uuid });
                    });
                }
            }
            Command::Delete { uuid } => {
                if let Some((demand, _)) = self.running.remove(&uuid) {
                    for c in 0..3 {
                        self.used.0[c] -= demand.0[c];
                    }
                    self.counters.deleted.fetch_add(1, Ordering::Relaxed);
                    let event =
                        wire::instance_event("instance.delete.end", &uuid, &self.name, demand);
                    self.notifier.publish(wire::NOVA_KEY, &event).await;
                }
            }
        }
    }
}

fn add(a: Resources, b: Resources) -> Resources {
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    /// A loopback HTTP endpoint that takes every POST and answers 204, as the service's
    /// `/v1/notifications` does for an event it applied; counts the requests it took.
    async fn sink() -> (String, Arc<AtomicU64>) {
        let (base, taken, _) = recording_sink().await;
        (base, taken)
    }

    /// [`sink`], also keeping every body it took.
    async fn recording_sink() -> (String, Arc<AtomicU64>, Arc<parking_lot::Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let taken = Arc::new(AtomicU64::new(0));
        let bodies = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (count, kept) = (taken.clone(), bodies.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (count, kept) = (count.clone(), kept.clone());
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    loop {
                        let mut length = 0usize;
                        let mut line = String::new();
                        loop {
                            line.clear();
                            if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            let lower = line.to_ascii_lowercase();
                            if let Some(v) = lower.strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0; length];
                        if stream.read_exact(&mut body).await.is_err() {
                            return;
                        }
                        count.fetch_add(1, Ordering::Relaxed);
                        kept.lock()
                            .push(String::from_utf8_lossy(&body).into_owned());
                        let answer = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
                        if stream.get_mut().write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (base, taken, bodies)
    }

    /// Boots handed to a host just before the fleet stops were claimed by the service: the
    /// host must carry them out (its books and its `instance.create.end`), or the run's ledger
    /// holds claims no host has (issue 50: one run reported ledger ≠ books).
    #[tokio::test(flavor = "current_thread")]
    async fn boots_queued_before_the_stop_are_carried_out() {
        let (base, taken) = sink().await;
        let notifier = Notifier::http(reqwest::Client::new(), &base).unwrap();
        let mut capacity = Resources::ZERO;
        capacity.0[0] = 64;
        let fleet = Fleet::start(1, capacity, notifier.clone(), Duration::from_secs(3600)).await;
        let mut demand = Resources::ZERO;
        demand.0[0] = 2;
        for i in 0..5 {
            assert!(fleet.boot(0, format!("vm-{i}"), demand, None));
        }
        // The host's task has not run yet (one thread): the boots are queued when it sees the
        // stop.
        let counters = fleet.counters.clone();
        let books = fleet.stop_with_instances().await;
        assert_eq!(counters.booted.load(Ordering::Relaxed), 5);
        assert_eq!(books[0].0 .0[0], 10, "the host's books hold the five boots");
        assert_eq!(books[0].1.len(), 5);
        // The announcement at start and one instance.create.end per boot reached the service.
        assert_eq!(notifier.sent.load(Ordering::Relaxed), 6);
        assert_eq!(taken.load(Ordering::Relaxed), 6);
    }

    /// Under a demand model a host's books hold up to capacity × its ratio, and its
    /// heartbeats carry its usage, each instance's and each instance's QoS signals.
    #[tokio::test(flavor = "current_thread")]
    async fn a_measured_host_overcommits_to_its_ratio_and_reports_what_it_measured() {
        let (base, _, bodies) = recording_sink().await;
        let notifier = Notifier::http(reqwest::Client::new(), &base).unwrap();
        let capacity = Resources::new(4, 8192, 100);
        let measured = Measured {
            model: DemandModel::paper(1, 60.0),
            allocation_ratio: 2.0,
        };
        let fleet = Fleet::start_measured(
            1,
            capacity,
            notifier,
            Duration::from_millis(20),
            Some(measured),
        )
        .await;
        let uuid = |i: u32| format!("00000000-0000-4000-8000-{i:012}");
        for i in 0..5 {
            assert!(fleet.boot(0, uuid(i), Resources::new(2, 1024, 10), None));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let counters = fleet.counters.clone();
        let books = fleet.stop().await;
        assert_eq!(
            books[0],
            Resources::new(8, 4096, 40),
            "4 of 2 VCPU fit in 4 × 2"
        );
        assert_eq!(counters.violations.load(Ordering::Relaxed), 1);
        assert_eq!(counters.booted_vcpu.load(Ordering::Relaxed), 8);
        assert!(counters.qos_judged.load(Ordering::Relaxed) >= 4);
        let bodies = bodies.lock();
        let beat = bodies
            .iter()
            .rev()
            .find(|b| b.contains("compute.host.state"))
            .expect("a heartbeat");
        let event: serde_json::Value = serde_json::from_str(beat).unwrap();
        let payload = &event["payload"];
        assert_eq!(payload["inventory"]["VCPU"]["allocation_ratio"], 2.0);
        assert!(
            payload["usage"]["VCPU"].as_f64().unwrap() <= 4.0,
            "{payload}"
        );
        for i in 0..4 {
            assert!(
                payload["instance_qos"][uuid(i)]["cpu_wait"].is_number(),
                "{payload}"
            );
            assert!(payload["instance_usage"][uuid(i)]["MEMORY_MB"].is_number());
        }
    }
}
