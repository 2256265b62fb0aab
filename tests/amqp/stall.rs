//! Issue 40, item 6: after a stall longer than `[scheduler] claim_ttl_s` (the consumer stopped
//! here; a paused process, an unreachable broker or a long stop in production), the sweep
//! used to expire claims whose confirmations were already waiting in the broker's queue. It now
//! counts a claim's TTL only up to where the consumer has caught up (`ledger::IngestMark`).

use crate::broker::{isolated_amqp, spawn_service_with_clock, wait_until, Publisher};
use crate::messages::*;
use crate::{on_both_engines, support};
use parasol::clock::{Clock, ManualClock};
use parasol::domain::Resources;
use std::sync::Arc;

const T0: i64 = 1_800_000_000_000;
const TTL_MS: u64 = 600_000;

async fn issue_40_item_6_a_stall_expires_no_claim_whose_confirmation_is_queued(engine: &str) {
    let clock = ManualClock::new(T0);
    let db = support::db(engine).await;
    let url = db.url.clone();
    // The service's clock moves only when the test moves it: a batch is what is ready, without
    // waiting for more.
    let amqp = parasol::configuration::AmqpSettings {
        batch_timeout_ms: 0,
        ..isolated_amqp()
    };
    let mut s = spawn_service_with_clock(db, &url, amqp, Arc::new(clock.clone())).await;
    s.wait_connected().await;
    let p = Publisher::connect(&s.amqp).await;
    p.notify(&host_state("c1", 8, 8192, 80, true, false)).await;
    s.wait_settled(1).await;
    let host = s.ledger().table().by_name("c1", None).expect("c1").id;
    let (confirmed, forgotten) = (new_id(), new_id());
    let size = Resources::new(1, 1024, 10);
    for id in [&confirmed, &forgotten] {
        let claimed = s.ledger().claim(host, id, &size, T0).await.unwrap();
        assert_eq!(claimed, parasol::ledger::ClaimOutcome::Claimed);
    }
    // The stall: the build's confirmation, sent a second after the claim, waits in the queue
    // while the clock runs far past the TTL.
    s.stop_consumer().await;
    let mut create_end = instance_event("instance.create.end", &confirmed, "c1", (1, 1024, 10));
    create_end["timestamp"] = serde_json::json!(parasol::nova::oslo_timestamp((T0 + 1_000) * 1000));
    p.notify(&create_end).await;
    clock.advance_ms(10 * TTL_MS as i64);
    let swept = s
        .ledger()
        .sweep_expired_claims(clock.now_ms(), TTL_MS)
        .await
        .unwrap();
    assert!(
        swept.is_empty(),
        "nothing expires before the queue is applied: {swept:?}"
    );
    assert_eq!(s.ledger().allocation_count().await.unwrap(), 2);
    // Back: the queue is applied first, and the build is confirmed.
    s.start_consumer();
    s.wait_settled(2).await;
    assert!(
        s.ledger()
            .allocation(&confirmed)
            .await
            .unwrap()
            .unwrap()
            .confirmed
    );
    // Caught up (nothing delivered for a while of the service's clock): the claim nothing
    // confirmed expires, the confirmed one stays.
    let now = clock.now_ms();
    wait_until("the consumer counts itself caught up", || async {
        clock.advance_ms(1_000);
        s.ledger().ingest_mark().caught_up_to(clock.now_ms()) >= now
    })
    .await;
    let swept = s
        .ledger()
        .sweep_expired_claims(clock.now_ms(), TTL_MS)
        .await
        .unwrap();
    let swept: Vec<&str> = swept.iter().map(|a| a.instance_uuid.as_str()).collect();
    assert_eq!(swept, vec![forgotten.as_str()]);
    assert!(s.ledger().allocation(&confirmed).await.unwrap().is_some());
}
on_both_engines!(
    issue_40_item_6_a_stall_expires_no_claim_whose_confirmation_is_queued,
    super::issue_40_item_6_a_stall_expires_no_claim_whose_confirmation_is_queued
);
