//! Issue 50: `GET /v1/hosts` paged (`limit`, `marker`, `next_marker`) and filtered (`host`,
//! `availability_zone`), in host id order; a bad parameter is a 400 that names it.

use super::helpers::{expect_error, spawn_app, TestApp};
use crate::on_both_engines;
use serde_json::Value;

async fn page(app: &TestApp, query: &str) -> (Vec<(i64, String)>, Value) {
    let body = app.get_json(&format!("/v1/hosts{query}")).await;
    let hosts = body["hosts"]
        .as_array()
        .unwrap_or_else(|| panic!("{query}: {body}"))
        .iter()
        .map(|h| {
            (
                h["id"].as_i64().unwrap(),
                h["host"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (hosts, body["next_marker"].clone())
}

async fn hosts_are_paged_in_id_order_and_filtered(engine: &str) {
    let app = spawn_app(engine).await;
    for host in ["page-a", "page-b", "page-c"] {
        app.register(host, 4, 4096, 40).await;
    }
    let (all, next) = page(&app, "").await;
    assert_eq!(all.len(), 3);
    assert!(next.is_null(), "no page asked, no next_marker: {next}");
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "id order: {all:?}");

    let (first, next) = page(&app, "?limit=2").await;
    assert_eq!(first, all[..2]);
    assert_eq!(next.as_i64(), Some(all[1].0));
    let (second, next) = page(&app, &format!("?limit=2&marker={}", all[1].0)).await;
    assert_eq!(second, all[2..]);
    assert!(next.is_null(), "the last page has no next_marker: {next}");

    let (named, _) = page(&app, "?host=page-b").await;
    assert_eq!(named, [all[1].clone()]);
    let zone = app.get_json("/v1/hosts").await["hosts"][0]["availability_zone"]
        .as_str()
        .unwrap()
        .to_string();
    let (in_zone, _) = page(&app, &format!("?availability_zone={zone}&limit=5")).await;
    assert_eq!(in_zone, all);
    let (elsewhere, next) = page(&app, "?availability_zone=elsewhere").await;
    assert!(elsewhere.is_empty() && next.is_null());

    for (query, needle) in [
        ("?limit=0", "limit: `0`"),
        ("?limit=ten", "limit: `ten`"),
        ("?marker=x", "marker: `x`"),
        ("?limt=2", "unknown query parameter `limt`"),
        ("?limit=1&limit=2", "`limit` given more than once"),
    ] {
        let resp = app.client.get(format!("{}/v1/hosts{query}", app.address));
        expect_error(resp.send().await.unwrap(), 400, needle).await;
    }
}

on_both_engines!(
    hosts_are_paged_in_id_order_and_filtered,
    super::hosts_are_paged_in_id_order_and_filtered
);
