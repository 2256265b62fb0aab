//! The notification consumer against the real RabbitMQ: every test declares its own
//! exchanges and queues, publishes as oslo.messaging does, and checks a real ledger.

#[path = "support/mod.rs"]
mod support;

#[path = "amqp/broker.rs"]
mod broker;
#[path = "amqp/full_disk.rs"]
mod full_disk;
#[path = "amqp/handlers.rs"]
mod handlers;
#[path = "amqp/health.rs"]
mod health;
#[path = "amqp/host_events.rs"]
mod host_events;
#[path = "amqp/messages.rs"]
mod messages;
#[path = "amqp/poison.rs"]
mod poison;
#[path = "amqp/restart.rs"]
mod restart;
#[path = "support/small_disk.rs"]
mod small_disk;
#[path = "amqp/stall.rs"]
mod stall;
