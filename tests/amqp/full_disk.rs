//! A nearly full disk under the SQLite ledger: the write probe still fits (one page, in the
//! write-ahead log's space that a checkpoint freed) but no batch does. The consumer must not
//! take that for a poison message: nothing is acknowledged, dead-lettered or half-applied, and
//! everything is applied once the space is back. (An out-of-space batch is requeued without
//! the one-by-one pass, after a wait on the service's clock: see docs/failures.md.)

use crate::broker::{isolated_amqp, spawn_service_with_clock, wait_until, Publisher};
use crate::messages::host_state;
use crate::small_disk::SmallDisk;
use parasol::amqp::REQUEUE_WAIT_MS;
use parasol::clock::{Clock, ManualClock, SystemClock};
use serde_json::{json, Value};
use sqlx::Connection;
use std::sync::Arc;

fn big_host_state(h: usize) -> Value {
    let mut m = host_state(
        &format!("disk-host-{h:04}"),
        64,
        262_144,
        2_000,
        true,
        false,
    );
    m["payload"]["traits"] = json!((0..40)
        .map(|t| format!("CUSTOM_TRAIT_{t:03}_{}", "X".repeat(40)))
        .collect::<Vec<_>>());
    m
}

/// Rows of the ledger's `hosts` table, read on a connection of the test's own.
async fn host_rows(url: &str) -> i64 {
    let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
    sqlx::query_scalar("SELECT COUNT(*) FROM hosts")
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_cannot_commit_on_a_full_disk_is_neither_acknowledged_nor_dead_lettered() {
    let disk = SmallDisk::mount(8);
    let url = disk.sqlite_url();
    let mut amqp = isolated_amqp();
    amqp.attempts = 2;
    // The consumer's waits sleep on this clock, which moves only when the test moves it: a
    // batch is what is ready, without waiting for more.
    amqp.batch_timeout_ms = 0;
    let clock = ManualClock::new(SystemClock.now_ms());
    let s = spawn_service_with_clock(
        crate::support::sqlite_at(&url),
        &url,
        amqp.clone(),
        Arc::new(clock.clone()),
    )
    .await;
    s.wait_connected().await;
    let p = Publisher::connect(&amqp).await;
    let first: Vec<Value> = (0..10).map(big_host_state).collect();
    p.notify_all(&first).await;
    s.wait_settled(10).await;

    // Leave the write-ahead log one page of reusable space: the probe's one-page write fits,
    // a batch (message ids, hosts, inventories, their indexes) does not.
    {
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("UPDATE ledger_meta SET value = value WHERE key = 'probe'")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    disk.fill();
    assert!(
        s.ledger()
            .probe_write(0, std::time::Duration::from_secs(5))
            .await
            .is_ok(),
        "the probe still fits"
    );
    // Checkpointed again, so that the consumer's probe would fit too.
    {
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    // The clock has not moved since the service started: the requeue's wait, when it comes,
    // ends at this time plus its delay (the consumer's other waits on the clock end sooner).
    let requeue_at = clock.now_ms() + REQUEUE_WAIT_MS as i64;
    let rest: Vec<Value> = (10..310).map(big_host_state).collect();
    p.notify_all(&rest).await;
    wait_until("the consumer gave up a batch", || async {
        s.handles.ingest.requeued_batches() >= 1
    })
    .await;
    // It waits on the service's clock before it gives the batch back, and only that long.
    let requeue_waits = || {
        clock
            .deadlines()
            .iter()
            .filter(|d| **d == requeue_at)
            .count()
    };
    wait_until("the consumer waits on the clock", || async {
        requeue_waits() > 0
    })
    .await;
    assert_eq!(requeue_waits(), 1, "one wait: the requeue's");
    assert_eq!(s.handles.ingest.requeued_batches(), 1);
    clock.advance_ms(REQUEUE_WAIT_MS as i64);
    wait_until("the consumer requeued a batch twice", || async {
        s.handles.ingest.requeued_batches() >= 2
    })
    .await;
    assert_eq!(s.count("applied"), 10, "{}", s.counts());
    assert_eq!(s.count("dead_letter"), 0, "{}", s.counts());
    assert_eq!(s.ledger().host_ids().await.unwrap().len(), 10, "the table");
    assert_eq!(host_rows(&url).await, 10, "the ledger");

    disk.free();
    // Each wait of a batch given back ends when the clock has moved on.
    wait_until("everything settled", || async {
        clock.advance_ms(REQUEUE_WAIT_MS as i64);
        s.settled() >= 310
    })
    .await;
    s.wait_settled(310).await;
    assert_eq!(s.count("applied"), 310, "{}", s.counts());
    assert_eq!(s.count("dead_letter"), 0, "{}", s.counts());
    assert_eq!(s.ledger().host_ids().await.unwrap().len(), 310);
    assert_eq!(host_rows(&url).await, 310);
    assert_eq!(p.ready(&amqp.dead_letter).await, 0, "nothing dead-lettered");
    assert_eq!(p.ready(&amqp.queue).await, 0, "everything acknowledged");
}
