//! The RPC server loop, as oslo.messaging's `RPCServer` runs nova-scheduler: each delivery is
//! acknowledged before it is dispatched (at most once, as oslo), duplicates of a recent
//! `_unique_id` are dropped, and every call runs in its own task (at most `[amqp] prefetch` at
//! once) that heartbeats every `⌊_timeout⌋/2` s until it replies on the default exchange.
//! A message that cannot be served is answered with a failure when it names a reply queue,
//! else dead-lettered to `[amqp] dead_letter`: the loop itself never fails on input.

use super::dispatch::{route, Action};
use super::topology::declare_rpc_topology;
use super::{Dedup, RpcCounters};
use crate::amqp::{connect, BrokerStatus, DeadLetters, Letter, Link, Sessions};
use crate::cloud::Cloud;
use crate::notifications::Ingest;
use crate::nova::{
    decode_envelope, encode_envelope, no_valid_host_failure, notification_message, oslo_failure,
    request_spec_payload, required_aggregates, Phase, Reply, RpcMessage,
};
use crate::scheduling::{Scheduler, SelectError};
use futures::{FutureExt, StreamExt};
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel};
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// How many `_unique_id`s the server remembers.
const DEDUP_CAPACITY: usize = 65_536;

/// Why a server session ended.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("broker: {}", crate::redact::redact_urls(&.0.to_string()))]
    Broker(#[from] lapin::Error),
    #[error("the broker closed the RPC consumer")]
    Closed,
}

/// What the RPC server works with.
#[derive(Clone)]
pub struct RpcDeps {
    pub scheduler: Arc<Scheduler>,
    /// The host aggregates nova-api's casts update.
    pub cloud: Arc<Cloud>,
    pub ingest: Arc<Ingest>,
    pub broker: Arc<BrokerStatus>,
    pub counters: Arc<RpcCounters>,
}

/// What every call task shares.
struct Server {
    deps: RpcDeps,
    dedup: Mutex<Dedup>,
    debug_delay_ms: u64,
}

/// Serves until `shutdown` is cancelled, reconnecting with capped exponential backoff. On
/// shutdown it stops taking calls, answers every call it has already received (acknowledged,
/// as oslo.messaging does on receipt) within `[server] shutdown_grace_s`, then closes: calls
/// not yet received stay on the queue for another scheduler.
pub async fn run_rpc_server(deps: RpcDeps, shutdown: CancellationToken) {
    let settings = deps.scheduler.settings();
    let sessions = Sessions {
        what: "RPC server",
        broker: deps.broker.clone(),
        clock: deps.ingest.clock().clone(),
        reconnect_min_s: settings.amqp.reconnect_min_s,
        reconnect_max_s: settings.amqp.reconnect_max_s,
    };
    let server = Arc::new(Server {
        deps,
        dedup: Mutex::new(Dedup::new(DEDUP_CAPACITY)),
        // Validated finite and not negative; `as` saturates what no clock would count.
        debug_delay_ms: (settings.rpc.debug_delay_s * 1000.0).round() as u64,
    });
    let (server, shutdown) = (&server, &shutdown);
    sessions
        .run(
            shutdown,
            || server.deps.counters.count("reconnect"),
            |link| session(server, shutdown, link),
        )
        .await;
}

/// One connection's life. `Ok` means asked to stop.
async fn session(
    server: &Arc<Server>,
    shutdown: &CancellationToken,
    link: Link,
) -> Result<(), RpcError> {
    let settings = server.deps.scheduler.settings();
    let name = format!("parasol-rpc:{}", settings.rpc.host);
    let conn = connect(&settings.amqp.url, &name).await?;
    // Replies go out on the channel that declared their exchanges, dead letters on a
    // confirmed channel of their own (replies need no confirm: oslo's do not wait for one).
    let replies = conn.create_channel().await?;
    let queues = declare_rpc_topology(&replies, &settings.amqp, &settings.rpc).await?;
    // The name this session declared; a SIGHUP that renames it takes effect at reconnection.
    let dead_letters =
        DeadLetters::new(conn.create_channel().await?, &settings.amqp.dead_letter).await?;
    let tag = format!("parasol-rpc-{}", uuid::Uuid::new_v4().simple());
    // One channel per queue: delivery tags count per channel, so one `multiple` ack of the
    // last delivery a channel gave covers exactly the deliveries of that queue taken so far.
    let mut streams = Vec::new();
    let mut consumers = Vec::new();
    for (source, q) in queues.iter().enumerate() {
        let ch = conn.create_channel().await?;
        ch.basic_qos(settings.amqp.prefetch, BasicQosOptions::default())
            .await?;
        let consumer_tag = format!("{tag}-{source}");
        let consumer = ch
            .basic_consume(
                q,
                &consumer_tag,
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        streams.push(consumer.map(move |d| (source, d)));
        consumers.push((ch, consumer_tag));
    }
    let prefetch = usize::from(settings.amqp.prefetch.max(1));
    let mut deliveries = futures::stream::select_all(streams);
    link.up();
    tracing::info!(queues = ?queues, "serving Nova's scheduler RPC");
    let permits = Arc::new(Semaphore::new(prefetch));
    let calls = TaskTracker::new();
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => {
                // No new deliveries; those the channel holds but we have not taken are not
                // acknowledged and go back to the queue when it closes.
                for (ch, consumer_tag) in &consumers {
                    let _ = ch.basic_cancel(consumer_tag, Default::default()).await;
                }
                calls.close();
                let grace = Duration::from_secs_f64(settings.server.shutdown_grace_s);
                if tokio::time::timeout(grace, calls.wait()).await.is_err() {
                    tracing::warn!(in_flight = calls.len(), "RPC calls still running at the end of the grace period");
                }
                crate::amqp::close(conn, "parasol stopping").await;
                tracing::info!(counters = %server.deps.counters.to_json(), "RPC server stopped");
                return Ok(());
            }
            next = deliveries.next() => match next {
                Some(first) => {
                    // Whatever deliveries are ready are taken together and acknowledged with
                    // one ack per queue: an ack per call cost a frame, two tasks and a
                    // wake-up of lapin's I/O thread.
                    let mut batch = vec![first];
                    while batch.len() < prefetch {
                        match deliveries.next().now_or_never() {
                            Some(Some(next)) => batch.push(next),
                            _ => break,
                        }
                    }
                    let mut taken = Vec::with_capacity(batch.len());
                    for (source, delivery) in batch {
                        let Ok(permit) = permits.clone().acquire_owned().await else {
                            return Err(RpcError::Closed);
                        };
                        taken.push((source, delivery?, permit));
                    }
                    // Acknowledged on receipt, before dispatch, as oslo.messaging does.
                    for source in 0..consumers.len() {
                        if let Some((_, last, _)) = taken.iter().rev().find(|(s, _, _)| *s == source) {
                            last.ack(BasicAckOptions { multiple: true }).await?;
                        }
                    }
                    for (_, delivery, permit) in taken {
                        let server = server.clone();
                        let replies = replies.clone();
                        let dead_letters = dead_letters.clone();
                        calls.spawn(async move {
                            let routing_key = delivery.routing_key.as_str();
                            handle(&server, &replies, &delivery.data, routing_key, &dead_letters).await;
                            drop(permit);
                        });
                    }
                }
                None => return Err(RpcError::Closed),
            }
        }
    }
}

/// Serves one message; every error ends as a failure reply, a dead letter (on
/// `dead_letters`) or a log line.
async fn handle(
    server: &Server,
    ch: &Channel,
    body: &[u8],
    routing_key: &str,
    dead_letters: &DeadLetters,
) {
    let dl = DeadLetter {
        to: dead_letters,
        body,
        routing_key,
    };
    let msg = match RpcMessage::decode(body) {
        Ok(msg) => msg,
        Err(e) => return malformed(server, ch, dl, &e.to_string()).await,
    };
    if let Some(id) = &msg.unique_id {
        if !server.dedup.lock().first_time(id) {
            server.deps.counters.count("duplicate");
            tracing::info!(unique_id = %id, method = %msg.method, "duplicate message ignored");
            return;
        }
    }
    let span = tracing::info_span!("rpc", method = %msg.method, msg_id = msg.msg_id.as_deref().unwrap_or("-"),
        request_id = msg.context.get("request_id").and_then(serde_json::Value::as_str));
    server
        .deps
        .counters
        .count(if msg.is_call() { "call" } else { "cast" });
    let outcome = match route(&msg) {
        Ok(action) => run(server, ch, &msg, action).instrument(span).await,
        Err(refusal) => {
            server.deps.counters.count(refusal.outcome);
            Err(Failure {
                reply: refusal.failure(),
                reason: refusal.message,
            })
        }
    };
    match (outcome, &msg.msg_id, &msg.reply_q) {
        (Ok(result), Some(id), Some(q)) => send(server, ch, q, &Reply::written(id, result)).await,
        (Ok(_), _, _) => {}
        (Err(Failure { reply, reason }), Some(id), Some(q)) => {
            server.deps.counters.count("failure");
            // The reply carries Nova's exception; why (e.g. which filter left no host, as
            // nova-scheduler logs it) is the operator's to read here.
            tracing::info!(method = %msg.method, message = %reason, "call answered with a failure");
            send(server, ch, q, &Reply::failure(id, reply)).await
        }
        (Err(Failure { reason, .. }), _, _) => {
            let reason = format!("{} {}: {reason}", msg.method, msg.version_string());
            send_dead_letter(server, dl, &reason).await
        }
    }
}

/// A message whose envelope or fields could not be decoded: answered when the reply queue and
/// message id can still be read, else dead-lettered.
async fn malformed(server: &Server, ch: &Channel, dl: DeadLetter<'_>, reason: &str) {
    server.deps.counters.count("malformed");
    let inner = decode_envelope(dl.body).ok();
    let field = |k: &str| {
        inner
            .as_ref()
            .and_then(|i| i.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match (field("_msg_id"), field("_reply_q")) {
        (Some(id), Some(q)) => {
            server.deps.counters.count("failure");
            let failure = oslo_failure("ValueError", "builtins", reason);
            send(server, ch, &q, &Reply::failure(&id, failure)).await
        }
        _ => send_dead_letter(server, dl, reason).await,
    }
}

/// Why a message was not served: what a call is answered with, and why, for the log (a
/// cast's dead letter carries the reason).
struct Failure {
    /// oslo's `failure` string (`serialize_remote_exception`): Nova's exception.
    reply: String,
    /// Why, in the operator's words (e.g. which filter left no host).
    reason: String,
}

impl Failure {
    /// A Python builtin exception of `class` whose message is also the reason.
    fn builtin(class: &str, message: String) -> Self {
        Failure {
            reply: oslo_failure(class, "builtins", &message),
            reason: message,
        }
    }
}

/// Runs an accepted action: `Ok` holds the result as JSON text.
async fn run(
    server: &Server,
    ch: &Channel,
    msg: &RpcMessage,
    action: Action,
) -> Result<String, Failure> {
    const NONE: &str = "null";
    match action {
        Action::Answer(v) => Ok(v.to_string()),
        Action::UpdateAggregates(aggregates) => {
            server.deps.counters.count("update_aggregates");
            server.deps.cloud.update_aggregates(aggregates);
            Ok(NONE.to_string())
        }
        Action::DeleteAggregate(uuid) => {
            server.deps.counters.count("delete_aggregate");
            server.deps.cloud.delete_aggregate(&uuid);
            Ok(NONE.to_string())
        }
        Action::InstanceInfo(n) => match apply_retrying(server, &n).await {
            Ok(_) => {
                server.deps.counters.count("instance_info");
                Ok(NONE.to_string())
            }
            Err(e) => Err(Failure::builtin("ValueError", e.to_string())),
        },
        Action::Select(args) => {
            let started_ms = server.deps.ingest.clock().now_ms();
            // Pinned where it is made and lent: a future passed or bound by value keeps a
            // slot of its own in every async state it passes through, which made each
            // call's task twice the size of the scheduling it runs (over 16 KB, so tokio
            // boxed it and both were copied at every spawn).
            let work = std::pin::pin!(async {
                if server.debug_delay_ms > 0 {
                    let clock = server.deps.ingest.clock();
                    clock.sleep_ms(server.debug_delay_ms).await;
                }
                server.deps.scheduler.select(*args).await
            });
            let answer = with_heartbeats(server, ch, msg, work).await;
            let no_candidate = matches!(&answer, Err(e) if e.no_allocation_candidate());
            notify_selection(server, ch, msg, started_ms, &answer, no_candidate).await;
            match answer {
                Ok(answer) => Ok(answer.to_text()),
                Err(SelectError::NoValidHost { reason }) => {
                    server.deps.counters.count("no_valid_host");
                    // Nova's scheduler raises NoValidHost with one reason whatever the
                    // filters said (`_ensure_sufficient_hosts`), and with none when Placement
                    // listed no allocation candidate; the conductor writes it into the
                    // instance's fault, which users and Nova's own tests read. Which filter
                    // left no host goes to the log, as in Nova.
                    let nova_reason = if no_candidate {
                        ""
                    } else {
                        NOVA_NO_VALID_HOST_REASON
                    };
                    let message = format!(
                        "{} ({reason})",
                        crate::nova::no_valid_host_message(nova_reason)
                    );
                    Err(Failure {
                        reply: no_valid_host_failure(nova_reason),
                        reason: message,
                    })
                }
                Err(SelectError::Denied { reason }) => {
                    server.deps.counters.count("no_valid_host");
                    // An operator's plugin said why: its reason is for the user to read.
                    Err(Failure {
                        reply: no_valid_host_failure(&reason),
                        reason: crate::nova::no_valid_host_message(&reason),
                    })
                }
                Err(e @ SelectError::Invalid(_)) => {
                    Err(Failure::builtin("ValueError", e.to_string()))
                }
                Err(e @ SelectError::Unavailable(_)) => {
                    Err(Failure::builtin("RuntimeError", e.to_string()))
                }
            }
        }
    }
}

/// The reason of every NoValidHost nova-scheduler raises after its filters
/// (`nova/scheduler/manager.py`); when Placement listed no candidate it raises one with "".
const NOVA_NO_VALID_HOST_REASON: &str = "There are not enough hosts available.";

/// With `[rpc] versioned_notifications`, publishes nova-scheduler's
/// `scheduler.select_destinations.start` and `.end` for a `select_destinations` call (RPC
/// 4.3+, which carries `spec_obj`) before its reply, as Nova emits them inside the call:
/// both when it placed every instance, `.start` alone when its filters left no host, none
/// when Placement would have listed no allocation candidate or the call was refused before
/// scheduling (Nova raises before its notifications then). `.start` carries the time the
/// call began.
async fn notify_selection(
    server: &Server,
    ch: &Channel,
    msg: &RpcMessage,
    started_ms: i64,
    answer: &Result<crate::scheduling::Answer, SelectError>,
    no_candidate: bool,
) {
    let settings = server.deps.scheduler.settings();
    if !settings.rpc.versioned_notifications {
        return;
    }
    let Some(spec_obj) = msg.args.get("spec_obj") else {
        return;
    };
    let phases: &[Phase] = match answer {
        Ok(_) => &[Phase::Start, Phase::End],
        Err(SelectError::NoValidHost { .. }) if !no_candidate => &[Phase::Start],
        Err(_) => return,
    };
    let aggregates = server.deps.cloud.aggregates();
    let cloud = crate::nova::CloudView {
        aggregates: &aggregates,
        ..Default::default()
    };
    let options = settings.scheduler.request_filters();
    let required = required_aggregates(spec_obj, &cloud, &options);
    let payload = request_spec_payload(spec_obj, &required);
    let publisher = format!("nova-scheduler:{}", settings.rpc.host);
    let clock = server.deps.ingest.clock();
    let mut props = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_content_encoding("utf-8".into());
    if settings.amqp.durable() {
        props = props.with_delivery_mode(2);
    }
    for phase in phases {
        let at_ms = match phase {
            Phase::Start => started_ms,
            Phase::End => clock.now_ms(),
        };
        let message = notification_message(
            phase.event_type(),
            &publisher,
            payload.clone(),
            &msg.context,
            &crate::nova::oslo_timestamp(at_ms.saturating_mul(1000)),
            (
                &uuid::Uuid::new_v4().to_string(),
                &uuid::Uuid::new_v4().simple().to_string(),
            ),
        );
        let body = encode_envelope(&message);
        for topic in &settings.rpc.versioned_notifications_topics {
            let sent = ch
                .basic_publish(
                    &settings.amqp.exchange,
                    &format!("{topic}.info"),
                    BasicPublishOptions::default(),
                    &body,
                    props.clone(),
                )
                .await;
            match sent {
                Ok(_) => server.deps.counters.count("notification"),
                Err(e) => {
                    server.deps.counters.count("notification_lost");
                    tracing::warn!(error = %e, event_type = phase.event_type(), "notification not sent");
                }
            }
        }
    }
}

/// Applies an instance-info cast, one message on its own: a message the ledger refuses for its
/// content fails at once (and is dead-lettered with the reason); during a ledger outage it is
/// tried `[amqp] attempts` times, waiting 0.5 s, 1 s, 2 s … between tries (the cast was
/// acknowledged on receipt, as oslo.messaging does, so it cannot go back to its queue).
async fn apply_retrying(
    server: &Server,
    n: &crate::nova::Notification,
) -> Result<crate::notifications::Applied, crate::notifications::ApplyError> {
    let ingest = &server.deps.ingest;
    let attempts = server.deps.scheduler.settings().amqp.attempts.max(1);
    let mut wait_ms = 500;
    let mut tries = 1;
    loop {
        match ingest.apply(n).await {
            Err(crate::notifications::ApplyError::Ledger(e)) if tries < attempts => {
                tracing::warn!(error = %e, tries, "ledger unavailable; the instance info is tried again");
                ingest.clock().sleep_ms(wait_ms).await;
                wait_ms *= 2;
                tries += 1;
            }
            other => return other,
        }
    }
}

/// Drives `work` while sending oslo's call-monitor heartbeat every `⌊_timeout⌋/2` seconds
/// (none when that is under a second, as oslo's watchdog).
async fn with_heartbeats<F: std::future::Future>(
    server: &Server,
    ch: &Channel,
    msg: &RpcMessage,
    mut work: std::pin::Pin<&mut F>,
) -> F::Output {
    let interval = msg.timeout.map(|t| t.floor() / 2.0).unwrap_or(0.0);
    // A period no clock can count is no period: no heartbeats (the codec bounds it anyway).
    let period = Some(interval)
        .filter(|i| *i >= 1.0)
        .and_then(|i| Duration::try_from_secs_f64(i).ok());
    let (Some(period), Some(id), Some(q)) = (period, &msg.msg_id, &msg.reply_q) else {
        return work.await;
    };
    let period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX);
    let clock = server.deps.ingest.clock();
    let mut tick = clock.sleep_ms(period_ms);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = &mut tick => {
                tick = clock.sleep_ms(period_ms);
                server.deps.counters.count("heartbeat");
                send(server, ch, q, &Reply::heartbeat(id)).await;
            }
        }
    }
}

/// Publishes a reply on the default exchange to `reply_q`; a lost reply is logged (the caller
/// times out, as with oslo when its reply queue is gone).
async fn send(server: &Server, ch: &Channel, reply_q: &str, reply: &Reply) {
    let props = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_content_encoding("utf-8".into());
    let sent = ch
        .basic_publish(
            "",
            reply_q,
            BasicPublishOptions::default(),
            &reply.to_body(),
            props,
        )
        .await;
    match sent {
        Ok(_) => {
            if reply.ending {
                server.deps.counters.count("reply");
            }
        }
        Err(e) => {
            server.deps.counters.count("reply_lost");
            tracing::warn!(error = %e, %reply_q, "reply not sent");
        }
    }
}

/// An unanswerable message and where it goes.
#[derive(Clone, Copy)]
struct DeadLetter<'a> {
    /// `[amqp] dead_letter` as this session declared it (exchange and queue of that name).
    to: &'a DeadLetters,
    body: &'a [u8],
    routing_key: &'a str,
}

/// Puts an unanswerable message on the `[amqp] dead_letter` exchange with its reason and
/// routing key (the publisher the notification consumer uses), and in the ledger. The
/// message was acknowledged on receipt (as oslo.messaging does), so it is recorded in the
/// ledger even when the broker did not take its dead letter.
async fn send_dead_letter(server: &Server, dl: DeadLetter<'_>, reason: &str) {
    server.deps.counters.count("dead_letter");
    let letter = Letter {
        body: dl.body,
        routing_key: dl.routing_key,
        reason,
    };
    if let Err(e) = dl.to.publish(std::slice::from_ref(&letter)).await {
        tracing::warn!(error = %e, "dead letter not published");
    }
    let text = String::from_utf8_lossy(dl.body);
    server.deps.ingest.dead_letter("rpc", reason, &text).await;
}
