//! Placing instances: one, multi-create all-or-nothing, alternates, NoValidHost, force_hosts,
//! anti-affinity.

use super::helpers::{flavor, spawn_app};
use crate::on_both_engines;
use serde_json::json;

async fn places_one_instance_and_claims_it(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("c1", 4, 4096, 40).await;
    let (status, body) = app.place(flavor(1, 2048, 20), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let sel = &body[0][0];
    assert_eq!(sel["nova_object.name"], "Selection");
    assert_eq!(sel["nova_object.version"], "1.1");
    assert_eq!(sel["nova_object.data"]["service_host"], "c1");
    let used = app.used().await;
    assert_eq!(used, vec![("c1".to_string(), 1, 2048, 20)]);
    let stats = app.stats("filter").await;
    assert_eq!(stats["requests"], 1);
    assert_eq!(stats["placed"], 1);
    assert_eq!(stats["queries"], 1);
}
on_both_engines!(
    places_one_instance_and_claims_it,
    super::places_one_instance_and_claims_it
);

async fn multi_create_is_all_or_nothing(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("c1", 2, 2048, 20).await;
    app.register("c2", 2, 2048, 20).await;
    // Room for two instances of this flavor but three are asked: nothing may stay claimed.
    let (status, body) = app.place(flavor(2, 2048, 20), 3, json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["class"], "NoValidHost");
    assert!(app
        .used()
        .await
        .iter()
        .all(|(_, v, m, d)| (*v, *m, *d) == (0, 0, 0)));
    let stats = app.stats("filter").await;
    assert_eq!(stats["requests"], 3);
    assert_eq!(stats["no_valid_host"], 3);
    // Two fit: both are placed on distinct hosts.
    let (status, body) = app.place(flavor(2, 2048, 20), 2, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_array().unwrap().len(), 2);
    assert!(app.used().await.iter().all(|(_, v, _, _)| *v == 2));
}
on_both_engines!(
    multi_create_is_all_or_nothing,
    super::multi_create_is_all_or_nothing
);

async fn returns_alternates_up_to_max_attempts(engine: &str) {
    let app = spawn_app(engine).await;
    for h in ["c1", "c2", "c3", "c4"] {
        app.register(h, 4, 4096, 40).await;
    }
    let (status, body) = app.place(flavor(1, 512, 1), 1, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let list = body[0].as_array().unwrap();
    assert_eq!(
        list.len(),
        3,
        "the pick and max_attempts − 1 = 2 alternates"
    );
    let hosts: std::collections::HashSet<_> = list
        .iter()
        .map(|s| s["nova_object.data"]["service_host"].clone())
        .collect();
    assert_eq!(hosts.len(), 3);
}
on_both_engines!(
    returns_alternates_up_to_max_attempts,
    super::returns_alternates_up_to_max_attempts
);

async fn no_valid_host_names_the_filter_when_nothing_fits(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("c1", 2, 1024, 10).await;
    let (status, body) = app.place(flavor(4, 1024, 10), 1, json!({})).await;
    assert_eq!(status, 409);
    assert_eq!(body["error"]["class"], "NoValidHost");
    let reason = body["error"]["reason"].as_str().unwrap();
    assert!(reason.contains("CapacityFilter"), "{reason}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("No valid host was found."));
}
on_both_engines!(
    no_valid_host_names_the_filter_when_nothing_fits,
    super::no_valid_host_names_the_filter_when_nothing_fits
);

async fn force_hosts_is_honoured(engine: &str) {
    let app = spawn_app(engine).await;
    for h in ["c1", "c2", "c3"] {
        app.register(h, 4, 4096, 40).await;
    }
    for _ in 0..3 {
        let (status, body) = app
            .place(flavor(1, 512, 1), 1, json!({"force_hosts": ["c2"]}))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body[0][0]["nova_object.data"]["service_host"], "c2");
    }
    let used = app.used().await;
    assert_eq!(used[1], ("c2".to_string(), 3, 1536, 3));
}
on_both_engines!(force_hosts_is_honoured, super::force_hosts_is_honoured);

async fn anti_affinity_spreads_a_multi_create(engine: &str) {
    let app = spawn_app(engine).await;
    for h in ["c1", "c2", "c3"] {
        app.register(h, 8, 8192, 80).await;
    }
    let group = json!({
        "nova_object.name": "InstanceGroup", "nova_object.namespace": "nova", "nova_object.version": "1.11",
        "nova_object.data": {"policy": "anti-affinity", "hosts": [], "members": []}
    });
    let (status, body) = app
        .place(
            flavor(1, 512, 1),
            3,
            json!({"instance_group": group.clone()}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let hosts: std::collections::HashSet<_> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[0]["nova_object.data"]["service_host"].clone())
        .collect();
    assert_eq!(hosts.len(), 3, "{body}");
    let (status, _) = app
        .place(flavor(1, 512, 1), 4, json!({"instance_group": group}))
        .await;
    assert_eq!(status, 409, "a fourth member has no host left");
}
on_both_engines!(
    anti_affinity_spreads_a_multi_create,
    super::anti_affinity_spreads_a_multi_create
);

async fn legacy_answer_when_objects_are_not_asked(engine: &str) {
    let app = spawn_app(engine).await;
    app.register("c1", 4, 4096, 40).await;
    let spec = super::helpers::request_spec(flavor(1, 512, 1), 1, json!({}));
    let body = json!({"spec_obj": spec, "instance_uuids": super::helpers::uuids(1)});
    let resp = app.post("/v1/select_destinations", &body).await;
    assert_eq!(resp.status(), 200);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v, json!([{"host": "c1", "nodename": "c1", "limits": {}}]));
}
on_both_engines!(
    legacy_answer_when_objects_are_not_asked,
    super::legacy_answer_when_objects_are_not_asked
);
