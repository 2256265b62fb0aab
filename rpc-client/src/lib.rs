//! A minimal oslo.messaging RPC client (what `RPCClient.call`/`cast` put on the wire), for
//! tests and benchmarks: an exclusive reply queue, calls carrying `_msg_id`, `_reply_q`,
//! `_timeout` and `_unique_id`, replies matched by `_msg_id`, heartbeats counted and skipped.
//!
//! The service never calls RPC, it only answers it (`parasol::rpc`): this client is its own
//! crate so the service crate carries none of it, while both Parasol's integration tests (a
//! dev-dependency) and `openstack-bench`'s load driver use the one implementation.

// As in the service crate (issue 41).
#![deny(clippy::too_many_lines, clippy::too_many_arguments)]

use futures::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ExchangeDeclareOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ExchangeKind};
use parasol::nova::{decode_envelope, encode_envelope};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Why a call did not get its answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("broker: {}", parasol::redact::redact_urls(&.0.to_string()))]
    Broker(#[from] lapin::Error),
    #[error("no reply to {0} within the timeout")]
    Timeout(String),
    #[error("the reply consumer stopped")]
    Closed,
}

/// The final reply to a call.
#[derive(Debug, Clone)]
pub struct CallReply {
    pub result: Value,
    /// The decoded failure (`class`, `module`, `message`, …), when the call raised.
    pub failure: Option<Value>,
    /// Heartbeats (`ending: false`) received before the final reply.
    pub heartbeats: u32,
}

struct Pending {
    heartbeats: u32,
    done: oneshot::Sender<CallReply>,
}

#[derive(Default)]
struct Waiters {
    pending: Mutex<HashMap<String, Pending>>,
    /// Replies for no pending call: answers after the caller gave up, or answered twice.
    stray: AtomicU64,
}

/// One connection with its reply queue; clone-free, share it behind an `Arc`. Call
/// [`RpcClient::close`] when done: the reply consumer keeps the connection open otherwise.
pub struct RpcClient {
    conn: Connection,
    ch: Channel,
    exchange: String,
    reply_q: String,
    waiters: Arc<Waiters>,
}

impl RpcClient {
    /// Connects to the non-durable topic exchange `exchange` (oslo's default flags).
    pub async fn connect(url: &str, exchange: &str) -> Result<Self, ClientError> {
        Self::connect_with(url, exchange, false).await
    }

    /// Connects, declares the topic exchange as oslo's publisher does (publishing to a missing
    /// exchange would close the channel) and consumes an exclusive reply queue `reply_<uuid>`.
    pub async fn connect_with(
        url: &str,
        exchange: &str,
        durable: bool,
    ) -> Result<Self, ClientError> {
        let conn = parasol::amqp::connect(url, "parasol-rpc-client").await?;
        let ch = conn.create_channel().await?;
        ch.exchange_declare(
            exchange,
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
        let reply_q = format!("reply_{}", uuid::Uuid::new_v4().simple());
        let options = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..Default::default()
        };
        ch.queue_declare(&reply_q, options, FieldTable::default())
            .await?;
        let consume = BasicConsumeOptions {
            no_ack: true,
            ..Default::default()
        };
        let mut consumer = ch
            .basic_consume(&reply_q, "reply", consume, FieldTable::default())
            .await?;
        let waiters = Arc::new(Waiters::default());
        let w = waiters.clone();
        tokio::spawn(async move {
            while let Some(Ok(delivery)) = consumer.next().await {
                w.deliver(&delivery.data);
            }
        });
        Ok(RpcClient {
            conn,
            ch,
            exchange: exchange.to_string(),
            reply_q,
            waiters,
        })
    }

    /// The inner message of a call as oslo writes it (without context keys).
    pub fn call_message(
        &self,
        method: &str,
        args: Value,
        version: &str,
        namespace: Option<&str>,
        monitor_timeout_s: Option<u64>,
    ) -> Value {
        let mut m = cast_message(method, args, version, namespace);
        m["_msg_id"] = json!(uuid::Uuid::new_v4().simple().to_string());
        m["_reply_q"] = json!(self.reply_q);
        if let Some(t) = monitor_timeout_s {
            m["_timeout"] = json!(t);
        }
        m
    }

    /// Calls `method` on `routing_key` and waits up to `timeout` for the final reply.
    pub async fn call(
        &self,
        routing_key: &str,
        method: &str,
        args: Value,
        version: &str,
        timeout: Duration,
    ) -> Result<CallReply, ClientError> {
        let m = self.call_message(method, args, version, None, None);
        self.call_with(routing_key, &m, timeout).await
    }

    /// Publishes a prepared call message (see [`RpcClient::call_message`]) and awaits its reply.
    pub async fn call_with(
        &self,
        routing_key: &str,
        message: &Value,
        timeout: Duration,
    ) -> Result<CallReply, ClientError> {
        let msg_id = message["_msg_id"].as_str().unwrap_or_default().to_string();
        let (done, answer) = oneshot::channel();
        self.waiters.pending.lock().insert(
            msg_id.clone(),
            Pending {
                heartbeats: 0,
                done,
            },
        );
        let expiration = timeout.as_millis().to_string();
        if let Err(e) = self
            .publish_with(routing_key, &encode_envelope(message), Some(expiration))
            .await
        {
            self.waiters.pending.lock().remove(&msg_id);
            return Err(e);
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(ClientError::Closed),
            Err(_) => {
                self.waiters.pending.lock().remove(&msg_id);
                Err(ClientError::Timeout(msg_id))
            }
        }
    }

    /// Sends a cast (no reply expected).
    pub async fn cast(
        &self,
        routing_key: &str,
        method: &str,
        args: Value,
        version: &str,
    ) -> Result<(), ClientError> {
        let m = cast_message(method, args, version, None);
        self.publish(routing_key, &encode_envelope(&m)).await
    }

    /// Publishes raw bytes to the exchange (tests use it for malformed messages).
    pub async fn publish(&self, routing_key: &str, body: &[u8]) -> Result<(), ClientError> {
        self.publish_with(routing_key, body, None).await
    }

    async fn publish_with(
        &self,
        routing_key: &str,
        body: &[u8],
        expiration: Option<String>,
    ) -> Result<(), ClientError> {
        let mut props = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("utf-8".into());
        if let Some(e) = expiration {
            props = props.with_expiration(e.into());
        }
        self.ch
            .basic_publish(
                &self.exchange,
                routing_key,
                BasicPublishOptions::default(),
                body,
                props,
            )
            .await?;
        Ok(())
    }

    /// Closes the connection and with it the exclusive reply queue; calls still waiting then
    /// time out. Errors are ignored (the broker may already be gone).
    pub async fn close(&self) {
        let _ = self.conn.close(200, "rpc client done").await;
    }

    /// This client's reply queue.
    pub fn reply_queue(&self) -> &str {
        &self.reply_q
    }

    /// Replies that matched no waiting call (late, or a second answer to one call).
    pub fn stray_replies(&self) -> u64 {
        self.waiters.stray.load(Ordering::Relaxed)
    }
}

/// The inner message of a cast: `method`, `args`, `version`, `namespace`, `_unique_id`.
pub fn cast_message(method: &str, args: Value, version: &str, namespace: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("method".into(), json!(method));
    m.insert("args".into(), args);
    m.insert("version".into(), json!(version));
    if let Some(ns) = namespace {
        m.insert("namespace".into(), json!(ns));
    }
    m.insert(
        "_unique_id".into(),
        json!(uuid::Uuid::new_v4().simple().to_string()),
    );
    m.insert(
        "_context_request_id".into(),
        json!(format!("req-{}", uuid::Uuid::new_v4())),
    );
    Value::Object(m)
}

impl Waiters {
    fn deliver(&self, body: &[u8]) {
        let Ok(inner) = decode_envelope(body) else {
            self.stray.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let id = inner["_msg_id"].as_str().unwrap_or_default();
        let mut pending = self.pending.lock();
        if inner["ending"] == json!(false) {
            match pending.get_mut(id) {
                Some(p) => p.heartbeats += 1,
                None => {
                    self.stray.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
        let Some(p) = pending.remove(id) else {
            self.stray.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let failure = inner["failure"]
            .as_str()
            .map(|f| serde_json::from_str(f).unwrap_or_else(|_| json!(f)));
        let _ = p.done.send(CallReply {
            result: inner["result"].clone(),
            failure,
            heartbeats: p.heartbeats,
        });
    }
}
