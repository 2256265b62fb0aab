//! Issue 40 over the notification consumer: a compute node re-created under a new uuid
//! (same host and node) is applied, not dead-lettered (defect 3), and an event sent before
//! its host's newest changes no inventory (defect 5).

use crate::broker::{isolated_amqp, spawn_service, Publisher};
use crate::messages::*;
use crate::on_both_engines;
use parasol::domain::ClassId;
use serde_json::json;

async fn a_re_created_compute_node_is_applied_not_dead_lettered(engine: &str) {
    let amqp = isolated_amqp();
    let s = spawn_service(engine, amqp.clone()).await;
    s.wait_connected().await;
    let p = Publisher::connect(&amqp).await;
    let vm = new_id();
    p.notify_all(&[
        host_state("recreated", 8, 16384, 100, true, false),
        instance_event("instance.create.end", &vm, "recreated", (2, 2048, 20)),
    ])
    .await;
    s.wait_settled(2).await;

    // The same host and node under a new compute node uuid, and its next event.
    let new_uuid = new_id();
    let mut events = Vec::new();
    for _ in 0..2 {
        let mut e = host_state("recreated", 16, 16384, 100, true, false);
        e["payload"]["compute_node_uuid"] = json!(new_uuid);
        events.push(e);
    }
    p.notify_all(&events).await;
    s.wait_settled(4).await;
    assert_eq!(s.count("applied"), 4, "{}", s.counts());
    assert_eq!(s.count("dead_letter"), 0, "{}", s.counts());
    let hosts = s.ledger().read_hosts().await.unwrap();
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    let new = hosts.iter().find(|h| *h.profile.uuid == new_uuid).unwrap();
    let old = hosts.iter().find(|h| *h.profile.uuid != new_uuid).unwrap();
    assert_eq!(
        old.used.get(ClassId::VCPU),
        2,
        "the old node keeps its instance"
    );
    assert!(old.forced_down && old.disabled);
    assert_eq!(&*new.profile.node, "recreated");
    assert_eq!(new.profile.inventory(ClassId::VCPU).unwrap().total, 16);
    assert_eq!(s.ledger().table().host_counters().node_replaced.get(), 1);

    // Sent four hours before the events above: a heartbeat only.
    let mut older = host_state("recreated", 4, 16384, 100, true, false);
    older["payload"]["compute_node_uuid"] = json!(new_uuid);
    older["timestamp"] = json!("2026-11-25 17:13:16.777260");
    p.notify(&older).await;
    s.wait_settled(5).await;
    assert_eq!(s.count("applied"), 5, "{}", s.counts());
    let new = s.ledger().table().by_uuid(&new_uuid).unwrap();
    assert_eq!(new.profile.inventory(ClassId::VCPU).unwrap().total, 16);
    assert_eq!(s.ledger().table().host_counters().older_events.get(), 1);
}
on_both_engines!(
    a_re_created_compute_node_is_applied_not_dead_lettered,
    super::a_re_created_compute_node_is_applied_not_dead_lettered
);
