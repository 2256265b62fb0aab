//! Duplicates change nothing; poison messages go to the dead-letter queue with their reason,
//! are counted, and roll back alone: the messages around them in the same batch are applied.

use crate::broker::{isolated_amqp, spawn_service, Publisher};
use crate::messages::*;
use crate::on_both_engines;
use parasol::domain::Resources;

async fn duplicate_deliveries_change_nothing(engine: &str) {
    let amqp = isolated_amqp();
    let s = spawn_service(engine, amqp.clone()).await;
    s.wait_connected().await;
    let p = Publisher::connect(&amqp).await;
    let register = host_state("compute1", 8, 16384, 100, true, false);
    let vm = new_id();
    let create = instance_event("instance.create.end", &vm, "compute1", (2, 2048, 20));
    // Within one batch and across batches.
    p.notify_all(&[
        register.clone(),
        register.clone(),
        create.clone(),
        create.clone(),
    ])
    .await;
    s.wait_settled(4).await;
    p.notify(&create).await;
    p.notify(&register).await;
    s.wait_settled(6).await;
    assert_eq!(s.count("applied"), 2, "{}", s.counts());
    assert_eq!(s.count("duplicate"), 4, "{}", s.counts());
    let hosts = s.ledger().read_hosts().await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].used, Resources::new(2, 2048, 20));
    assert_eq!(hosts[0].num_instances, 1);
    assert_eq!(s.ledger().allocation_count().await.unwrap(), 1);
}
on_both_engines!(
    duplicate_deliveries_change_nothing,
    super::duplicate_deliveries_change_nothing
);

async fn poison_messages_are_dead_lettered_with_their_reason_and_the_rest_applied(engine: &str) {
    let amqp = isolated_amqp();
    let mut s = spawn_service(engine, amqp.clone()).await;
    s.wait_connected().await;
    // Queue everything while the consumer is away, so it all arrives in one batch.
    s.stop_consumer().await;
    let p = Publisher::connect(&amqp).await;
    let key = "versioned_notifications.info";
    p.notify(&host_state("compute1", 8, 16384, 100, true, false))
        .await;
    p.publish_raw(&amqp.exchange, key, b"{not json").await;
    p.publish_raw(
        &amqp.exchange,
        key,
        br#"{"oslo.version": "2.0", "message": {}}"#,
    )
    .await;
    p.notify(&instance_event(
        "instance.create.error",
        &new_id(),
        "nowhere",
        (1, 512, 1),
    ))
    .await;
    p.notify(&instance_event(
        "instance.create.end",
        &new_id(),
        "compute1",
        (-2, 512, 1),
    ))
    .await;
    p.notify(&host_state("compute2", -8, 16384, 100, true, false))
        .await;
    p.notify(&instance_event(
        "instance.create.end",
        &new_id(),
        "ghost",
        (1, 512, 1),
    ))
    .await;
    let vm = new_id();
    p.notify(&instance_event(
        "instance.create.end",
        &vm,
        "compute1",
        (2, 2048, 20),
    ))
    .await;
    s.start_consumer();
    s.wait_settled(8).await;
    assert_eq!(s.count("applied"), 2, "{}", s.counts());
    assert_eq!(s.count("dead_letter"), 6, "{}", s.counts());
    let letters = p.dead_letters(6).await;
    let reasons: Vec<&str> = letters.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(letters[0].0, "{not json", "the body is kept as received");
    let expected = [
        "JSON",
        "oslo.message",
        "unknown host \"nowhere\"",
        "vcpus",
        "total",
        "unknown host \"ghost\"",
    ];
    for (reason, want) in reasons.iter().zip(expected) {
        assert!(
            reason.contains(want),
            "reason {reason:?} should mention {want:?}: {reasons:#?}"
        );
    }
    let (_, stats) = s.get_json("/v1/stats").await;
    assert_eq!(stats["notifications"]["dead_letter"], 6);
    assert_eq!(s.ledger().dead_letters(10).await.unwrap().len(), 6);
    let hosts = s.ledger().read_hosts().await.unwrap();
    assert_eq!(
        hosts.len(),
        1,
        "compute2 with a negative total is not registered"
    );
    assert_eq!(hosts[0].used, Resources::new(2, 2048, 20));
    assert_eq!(p.ready(&amqp.queue).await, 0);
    assert_eq!(p.ready(&amqp.dead_letter).await, 0);
}
on_both_engines!(
    poison_messages_are_dead_lettered_with_their_reason_and_the_rest_applied,
    super::poison_messages_are_dead_lettered_with_their_reason_and_the_rest_applied
);

/// Issue 16, item 3: a message that fails in PostgreSQL itself (a host name with a NUL byte:
/// `invalid byte sequence for encoding "UTF8": 0x00`) used to be taken for a ledger outage and
/// requeued with its whole batch every 500 ms, forever. Now it rolls back alone with the
/// database's reason and is dead-lettered; the 500 good messages around it are applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_in_a_batch_of_500_on_postgres_is_dead_lettered_alone_without_a_requeue_loop(
) {
    let mut amqp = isolated_amqp();
    amqp.batch_size = 1000;
    let mut s = spawn_service("postgres", amqp.clone()).await;
    s.wait_connected().await;
    let p = Publisher::connect(&amqp).await;
    for i in 0..10 {
        p.notify(&host_state(
            &format!("compute{i}"),
            64,
            262_144,
            2_000,
            true,
            false,
        ))
        .await;
    }
    s.wait_settled(10).await;
    // Everything queued while the consumer is away arrives in one batch.
    s.stop_consumer().await;
    let mut good = Vec::new();
    for i in 0..490 {
        good.push(instance_event(
            "instance.create.end",
            &new_id(),
            &format!("compute{}", i % 10),
            (1, 512, 1),
        ));
    }
    let poison = instance_event(
        "instance.create.end",
        &new_id(),
        "compute\u{0}1",
        (1, 512, 1),
    );
    p.notify_all(&good[..245]).await;
    p.notify(&poison).await;
    p.notify_all(&good[245..]).await;
    // Ten more good ones: heartbeats of the registered hosts (500 good in all).
    for i in 0..10 {
        p.notify(&host_state(
            &format!("compute{i}"),
            64,
            262_144,
            2_000,
            true,
            false,
        ))
        .await;
    }
    s.start_consumer();
    s.wait_settled(10 + 501).await;
    assert_eq!(s.count("applied"), 10 + 500, "{}", s.counts());
    assert_eq!(s.count("dead_letter"), 1, "{}", s.counts());
    let letters = p.dead_letters(1).await;
    assert!(
        letters[0].1.contains("0x00")
            && letters[0]
                .1
                .contains(&poison["message_id"].as_str().unwrap()[..8]),
        "the reason names the database's complaint and the message: {:?}",
        letters[0].1
    );
    // No requeue loop: a message published after them is applied, and by then nothing came
    // back (a requeued delivery returns to the head of its queue, before it), nothing is
    // counted twice.
    p.notify(&host_state("sentinel", 1, 1, 1, true, false))
        .await;
    s.wait_settled(10 + 501 + 1).await;
    assert_eq!(s.count("duplicate"), 0, "{}", s.counts());
    assert_eq!(s.settled(), 10 + 501 + 1, "{}", s.counts());
    assert_eq!(p.ready(&amqp.queue).await, 0);
    assert_eq!(p.ready(&amqp.dead_letter).await, 0);
    assert_eq!(s.ledger().allocation_count().await.unwrap(), 490);
    let used: i64 = s
        .ledger()
        .read_hosts()
        .await
        .unwrap()
        .iter()
        .map(|h| h.used.get(parasol::domain::ClassId::VCPU))
        .sum();
    assert_eq!(used, 490);
    assert_eq!(s.ledger().dead_letters(10).await.unwrap().len(), 1);
}

/// A batch that fails with what looks like an outage (PostgreSQL's `lock_timeout`: another
/// connection holds compute2's inventory rows) while the ledger takes writes is not requeued:
/// its messages are applied one by one, the one that keeps failing is dead-lettered after
/// `[amqp] attempts` tries with the database's reason, and the others are applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_failing_while_the_ledger_takes_writes_is_applied_one_by_one_on_postgres() {
    use sqlx::Connection;
    let mut amqp = isolated_amqp();
    amqp.batch_size = 1000;
    amqp.attempts = 3;
    let db = crate::support::db("postgres").await;
    let url = format!("{}?options=-c%20lock_timeout%3D300", db.url);
    let admin_url = db.url.clone();
    let mut s = crate::broker::spawn_service_on(db, &url, amqp.clone()).await;
    s.wait_connected().await;
    let p = Publisher::connect(&amqp).await;
    for host in ["compute1", "compute2"] {
        p.notify(&host_state(host, 64, 262_144, 2_000, true, false))
            .await;
    }
    s.wait_settled(2).await;
    s.stop_consumer().await;
    // Another connection holds compute2's rows for the whole test.
    let mut holder = sqlx::PgConnection::connect(&admin_url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query(
        "SELECT 1 FROM inventories WHERE host_id = (SELECT id FROM hosts WHERE host = 'compute2') FOR UPDATE",
    )
    .execute(&mut holder)
    .await
    .unwrap();
    let stuck = instance_event("instance.create.end", &new_id(), "compute2", (1, 512, 1));
    let mut batch: Vec<_> = (0..10)
        .map(|_| instance_event("instance.create.end", &new_id(), "compute1", (1, 512, 1)))
        .collect();
    batch.insert(5, stuck.clone());
    p.notify_all(&batch).await;
    s.start_consumer();
    s.wait_settled(2 + 11).await;
    assert_eq!(s.count("applied"), 2 + 10, "{}", s.counts());
    assert_eq!(s.count("dead_letter"), 1, "{}", s.counts());
    let letters = p.dead_letters(1).await;
    let reason = &letters[0].1;
    assert!(
        reason.contains(stuck["message_id"].as_str().unwrap())
            && reason.contains("failed 3 times while the ledger took writes")
            && reason.contains("lock timeout"),
        "{reason}"
    );
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    // A message published after the batch is applied, and by then nothing came back.
    p.notify(&host_state("sentinel", 1, 1, 1, true, false))
        .await;
    s.wait_settled(2 + 11 + 1).await;
    assert_eq!(s.count("duplicate"), 0, "no requeue: {}", s.counts());
    assert_eq!(p.ready(&amqp.queue).await, 0);
    assert_eq!(s.ledger().allocation_count().await.unwrap(), 10);
}
