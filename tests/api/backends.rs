//! Behaviour specific to each backend on the running service.

use super::helpers::{flavor, settings, spawn_with};
use crate::on_both_engines;
use parasol::configuration::BackendKind;
use parasol::domain::Resources;
use parasol::policy::Algorithm;
use serde_json::json;

async fn declined_claim_moves_on_to_the_next_alternate(engine: &str) {
    let (mut s, db) = settings(engine, BackendKind::Caching).await;
    s.policy.algorithm = Algorithm::FirstFit;
    s.caching.refresh_interval_s = 3600.0;
    let app = spawn_with(s, db).await;
    app.register("c1", 4, 4096, 40).await;
    app.register("c2", 4, 4096, 40).await;
    app.state
        .scheduler
        .reconfigure(app.state.scheduler.settings())
        .await
        .unwrap();
    // Another process fills c1 behind the cache's back.
    let ledger = app.state.scheduler.ledger();
    let c1 = ledger.host_id_by_name("c1", None).await.unwrap().unwrap();
    ledger
        .claim(c1, "someone-else", &Resources::new(4, 4096, 40), 1)
        .await
        .unwrap();
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0][0]["nova_object.data"]["service_host"], "c2");
    let stats = app.stats("caching").await;
    assert_eq!(stats["attempts"], 2);
    assert_eq!(stats["declines"], 1);
    assert_eq!(stats["decline_ratio"], 0.5);
}
on_both_engines!(
    declined_claim_moves_on_to_the_next_alternate,
    super::declined_claim_moves_on_to_the_next_alternate
);
