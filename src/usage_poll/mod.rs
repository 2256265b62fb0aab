//! Measured usage polled from a monitoring system (issue 45): Prometheus' HTTP API, one
//! PromQL query per resource class (`[usage.prometheus] queries`), one per class per instance
//! (`instance_queries`, each host's instances' usage together as its `instance_usage`) and
//! one per instance QoS signal (`qos_queries`, each host's instances' signals together as its
//! report), each answer's
//! samples fed to the live table as readings of source `prometheus` (`table::usage`), so
//! the same checks apply as to every other source: a sample that is negative, not a
//! number, above the class's total, of a host the table does not have or older than the
//! reading held is refused and counted (`parasol_usage_readings_total`).
//!
//! A series names its host by the label `host_label` (default `host`), whose value must be
//! the compute service's host as Nova knows it (`CONF.host`); a service host with several
//! nodes (Ironic) is matched only on the node of the same name. Neither node_exporter nor
//! the libvirt exporters have such a label of their own (they carry `instance`, the scraped
//! `address:port`): set one in Prometheus' scrape configuration, or make it in the query
//! with `label_replace` (docs/flex.md, etc/parasol.toml). Each sample's time is the query's
//! evaluation time, which Prometheus gives; a series whose target stopped being scraped
//! drops out of the vector (Prometheus' staleness markers), so its reading is not renewed
//! and expires after `[usage] max_age_s`.
//!
//! Every query sent counts once, `ok` or `failed` (`parasol_usage_polls_total`, `/v1/stats`
//! `usage.polls`, with the last failure's error): Prometheus unreachable, slow past
//! `timeout_s`, answering an error, or with something other than an instant vector, or a
//! vector with two series of one host. A failure is logged and the poller goes on; the
//! readings it did not renew expire, and decisions fall back to the allocations.
//!
//! # Layout
//! - `settings`: the `[usage.prometheus]` section and its checks.
//! - `prometheus`: the HTTP client, the answer's parsing, samples as readings.

mod prometheus;
mod settings;

pub use prometheus::{
    check_instance_samples, instance_readings, parse_answer, qos_readings, readings,
    PrometheusClient, Sample, MAX_ANSWER_BYTES,
};
pub use settings::PrometheusSettings;

use crate::clock::SharedClock;
use crate::domain::UsageSource;
use crate::table::{HostTable, UsageReading};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Polls Prometheus now and then every `poll_interval_s` of `clock` until `shutdown`,
/// feeding `table`. A client that cannot be built (an unreadable CA or token file since
/// the configuration was checked) is logged and polls nothing.
pub async fn run_prometheus_poller(
    settings: PrometheusSettings,
    table: Arc<HostTable>,
    clock: SharedClock,
    shutdown: CancellationToken,
) {
    let client = match PrometheusClient::new(&settings) {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot poll Prometheus for measured usage");
            return;
        }
    };
    let interval_ms = (settings.poll_interval_s * 1_000.0).round() as u64;
    tracing::info!(
        url = %crate::redact::redact_url(&settings.url),
        interval_s = settings.poll_interval_s,
        classes = ?settings.classes().map(|(c, _)| c).collect::<Vec<_>>(),
        instance_classes = ?settings.instance_classes().map(|(c, _)| c).collect::<Vec<_>>(),
        qos_signals = ?settings.qos_queries.keys().collect::<Vec<_>>(),
        "polling Prometheus for measured usage"
    );
    loop {
        tokio::select! {
            () = poll(&client, &settings, &table, &clock) => {}
            () = shutdown.cancelled() => break,
        }
        tokio::select! {
            () = clock.sleep_ms(interval_ms) => {}
            () = shutdown.cancelled() => break,
        }
    }
}

/// What a per-instance query's answers become: [`instance_readings`] or [`qos_readings`].
type PerInstance = fn(&str, &str, &[(String, Vec<Sample>)]) -> Vec<UsageReading>;

/// The per-instance queries of one kind — instance usage by class (`instance_queries`) or
/// instance QoS by signal (`qos_queries`) — their answers together as each host's list,
/// taken only when every query of the kind succeeded this round (a list missing a class or a
/// signal would replace the whole list with a part of it): otherwise the lists held stay
/// until they expire. False when a query failed.
async fn poll_per_instance(
    client: &PrometheusClient,
    settings: &PrometheusSettings,
    table: &HostTable,
    clock: &SharedClock,
    queries: Vec<(String, &str)>,
    into_readings: PerInstance,
) -> bool {
    if queries.is_empty() {
        return true;
    }
    let counters = table.usage_counters();
    let (host_label, instance_label) = (&settings.host_label, &settings.instance_label);
    let mut answers = Vec::with_capacity(queries.len());
    let mut ok = true;
    for (name, query) in queries {
        let outcome = client.query(query).await.and_then(|samples| {
            check_instance_samples(&name, host_label, instance_label, &samples).map(|()| samples)
        });
        match outcome {
            Ok(samples) => answers.push((name, samples)),
            Err(e) => {
                tracing::warn!(query = %name, error = %e, "polling Prometheus failed");
                counters.poll(UsageSource::Prometheus, Err(format!("{name}: {e}")));
                ok = false;
            }
        }
    }
    if !ok {
        return false;
    }
    let now_ms = clock.now_ms();
    for reading in into_readings(host_label, instance_label, &answers) {
        if let Err(e) = table.record_usage(&reading, now_ms) {
            tracing::debug!(node = ?reading.node, reason = e.reason.as_str(), error = %e, "a Prometheus per-instance list not taken");
        }
    }
    for _ in &answers {
        counters.poll(UsageSource::Prometheus, Ok(()));
    }
    ok
}

/// One poll: every class's query, each sample offered to the table.
pub async fn poll(
    client: &PrometheusClient,
    settings: &PrometheusSettings,
    table: &HostTable,
    clock: &SharedClock,
) {
    let counters = table.usage_counters();
    let mut failed = false;
    for (class, query) in settings.classes() {
        let outcome = client
            .query(query)
            .await
            .and_then(|samples| readings(&class, &settings.host_label, &samples));
        let readings = match outcome {
            Ok(readings) => readings,
            Err(e) => {
                tracing::warn!(class = %class, error = %e, "polling Prometheus failed");
                counters.poll(UsageSource::Prometheus, Err(format!("{class}: {e}")));
                failed = true;
                continue;
            }
        };
        let now_ms = clock.now_ms();
        for reading in &readings {
            if let Err(e) = table.record_usage(reading, now_ms) {
                tracing::debug!(node = ?reading.node, reason = e.reason.as_str(), error = %e, "a Prometheus sample not taken");
            }
        }
        // Counted once its samples are in the table: a query counted is a query applied.
        counters.poll(UsageSource::Prometheus, Ok(()));
    }
    let instances = settings.instance_classes().collect();
    failed |=
        !poll_per_instance(client, settings, table, clock, instances, instance_readings).await;
    let signals = settings
        .qos_queries
        .iter()
        .map(|(signal, query)| (signal.clone(), query.as_str()))
        .collect();
    failed |= !poll_per_instance(client, settings, table, clock, signals, qos_readings).await;
    if !failed {
        counters.clear_poll_error(UsageSource::Prometheus);
    }
}
