//! 8 workers and 200 concurrent callers on a small, nearly full cluster.

use super::helpers::{call_body, flavor, request_spec, settings, spawn_with, uuids};
use crate::on_both_engines;
use parasol::configuration::BackendKind;
use serde_json::json;
use std::sync::Arc;

async fn concurrent_callers_never_oversubscribe(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Filter).await;
    s.scheduler.workers = 8;
    let app = Arc::new(spawn_with(s, db).await);
    // 10 hosts × 16 slots of 1 VCPU/512 MB/5 GB = 160 slots for 200 callers.
    for i in 0..10 {
        app.register(&format!("c{i}"), 16, 8192, 80).await;
    }
    let calls: Vec<_> = (0..200)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let spec = request_spec(flavor(1, 512, 5), 1, json!({}));
                app.post("/v1/select_destinations", &call_body(spec, &uuids(1)))
                    .await
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut ok = 0;
    let mut nvh = 0;
    for c in calls {
        match c.await.unwrap() {
            200 => ok += 1,
            409 => nvh += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(ok + nvh, 200);
    assert_eq!(
        ok, 160,
        "every slot is used once the callers outnumber them"
    );
    for (host, vcpu, mem, disk) in app.used().await {
        assert!(
            vcpu <= 16 && mem <= 8192 && disk <= 80,
            "{host} oversubscribed: {vcpu} {mem} {disk}"
        );
    }
    let stats = app.stats("filter").await;
    assert_eq!(stats["requests"], 200);
    assert_eq!(
        stats["placed"].as_u64().unwrap() + stats["no_valid_host"].as_u64().unwrap(),
        200
    );
    assert_eq!(stats["placed"], 160);
}
on_both_engines!(
    concurrent_callers_never_oversubscribe,
    super::concurrent_callers_never_oversubscribe
);
