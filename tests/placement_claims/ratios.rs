//! Flex's allocation ratio in the real Placement (`[flex] manage_allocation_ratio`, issue 45
//! item 3): after each sync the managed class's ratio moves to 1 / (P·u) within its bounds,
//! in Placement and in the ledger; never below what the provider's allocations take; not at
//! all without measured usage; and an inventory somebody else changed is left alone.

use super::{eventually, instance, Parasol};
use crate::placement_server::PlacementServer;
use serde_json::{json, Value};
use std::time::Duration;

const NODE: &str = "e0000000-0000-4000-8000-000000000001";

/// Nova's `metrics.update` of node `flexnode` with `cpu.percent` = `percent`, the `n`th
/// reading: measured 10 s after the last, the first 100 s ago (each must be newer than the
/// last; the metric's time has whole seconds).
fn cpu_percent(n: u32, percent: i64) -> Value {
    let epoch_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64;
    let now =
        chrono::DateTime::from_timestamp(epoch_s - 100 + 10 * i64::from(n), 0).expect("a time");
    let metric = json!({"nova_object.name": "MetricPayload", "nova_object.namespace": "nova",
        "nova_object.version": "1.0",
        "nova_object.data": {"name": "cpu.percent", "value": percent, "numa_membw_values": null,
            "timestamp": now.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            "source": "libvirt.LibvirtDriver"}});
    json!({"message_id": format!("9e000000-0000-4000-8000-{n:012}"),
        "publisher_id": "nova-compute:flexnode", "event_type": "metrics.update",
        "priority": "INFO", "timestamp": now.format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
        "payload": {"nova_object.name": "MetricsPayload", "nova_object.namespace": "nova",
            "nova_object.version": "1.0",
            "nova_object.data": {"host": "flexnode", "host_ip": "10.0.0.2",
                                 "nodename": "flexnode", "metrics": [metric]}}})
}

async fn measure(parasol: &Parasol, n: u32, percent: i64) {
    parasol.notify(&cpu_percent(n, percent)).await;
}

/// (Placement's, the ledger's) allocation ratio of `class` on the node.
async fn ratios(placement: &PlacementServer, parasol: &Parasol, class: &str) -> (f64, f64) {
    let theirs = placement.inventories(NODE).await[class]["allocation_ratio"]
        .as_f64()
        .expect("a ratio");
    let hosts = parasol.get("/v1/hosts").await;
    let ours = hosts["hosts"][0]["inventories"][class]["allocation_ratio"]
        .as_f64()
        .expect("the ledger's ratio");
    (theirs, ours)
}

async fn both_at(placement: &PlacementServer, parasol: &Parasol, want: f64, what: &str) {
    eventually(what, || async {
        let (theirs, ours) = ratios(placement, parasol, "VCPU").await;
        (theirs - want).abs() < 1e-9 && (ours - want).abs() < 1e-9
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flex_moves_placements_ratio_where_its_filter_binds_and_never_under_the_allocations() {
    let placement = PlacementServer::start().await;
    // 16 VCPU at Nova's initial ratio 4.0; memory not managed.
    let inventories = json!({
        "VCPU": {"total": 16, "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": 65536, "allocation_ratio": 1.5},
        "DISK_GB": {"total": 400},
    });
    placement
        .provider("flexnode", NODE, inventories, &[], &[])
        .await;
    // 8 VCPU allocated by instances Parasol did not place (imported by the sync).
    for (n, vcpus) in [(1, 4), (2, 4)] {
        let resources = json!({"VCPU": vcpus, "MEMORY_MB": 1024});
        assert_eq!(placement.allocate(&instance(n), NODE, resources).await, 204);
    }
    let db = tempfile::tempdir().expect("temp dir");
    let ledger_url = format!("sqlite://{}", db.path().join("ledger.db").display());
    let parasol = Parasol::start_with(&placement, &ledger_url, 0.2, |s| {
        s.usage.max_age_s = 600.0;
        s.flex.enabled = true;
        s.flex.manage_allocation_ratio = true;
        s.flex.allocation_ratio_bounds = vec![parasol::configuration::RatioBound {
            class: "VCPU".into(),
            min: 1.0,
            max: 3.0,
        }];
    })
    .await;
    eventually("the first sync", || async {
        parasol.used().await.get(NODE).and_then(|u| u.get("VCPU")) == Some(&8)
    })
    .await;

    // No measured usage: nothing decided, nothing written, however many syncs.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(ratios(&placement, &parasol, "VCPU").await, (4.0, 4.0));
    let stats = parasol.get("/v1/stats").await;
    let managed = &stats["flex"]["allocation_ratio"];
    assert_eq!(managed["enabled"], true, "{stats}");
    assert!(managed["rounds"].as_u64().unwrap() >= 2, "{managed}");
    assert_eq!(managed["writes"], 0, "{managed}");
    assert_eq!(
        managed["classes"]["VCPU"]["target"],
        Value::Null,
        "{managed}"
    );

    // 25 % of 16 = 4 VCPU used by 8 allocated: u = 0.5, P = 1.5: 1 / 0.75 = 1.33.
    measure(&parasol, 1, 25).await;
    both_at(&placement, &parasol, 1.33, "the ratio at 1.33").await;
    // Idle: 1 % (0.16 of 8, u = 0.02): 1 / 0.03 = 33, held at the bound 3.
    measure(&parasol, 2, 1).await;
    both_at(&placement, &parasol, 3.0, "the ratio at its bound 3").await;
    assert_eq!(
        placement.inventories(NODE).await["MEMORY_MB"]["allocation_ratio"],
        1.5,
        "a class without bounds keeps its ratio"
    );

    // 32 more VCPU allocated (40 of 16 × 3 = 48), then the node is busy: 100 % = 16 of 40,
    // u = 0.4: 1 / 0.6 = 1.67 wanted, but the allocations take 40 / 16 = 2.5.
    assert_eq!(
        placement
            .allocate(&instance(3), NODE, json!({"VCPU": 32, "MEMORY_MB": 1024}))
            .await,
        204
    );
    eventually("the import", || async {
        parasol.used().await.get(NODE).and_then(|u| u.get("VCPU")) == Some(&40)
    })
    .await;
    measure(&parasol, 3, 100).await;
    both_at(
        &placement,
        &parasol,
        2.5,
        "the ratio at the allocations' 2.5",
    )
    .await;
    let metrics = parasol.metrics().await;
    assert!(
        metrics.contains("parasol_flex_allocation_ratio{class=\"VCPU\"} 1.6666"),
        "{metrics}"
    );
    assert!(
        metrics.contains("parasol_flex_allocation_ratio_writes_total{outcome=\"written\"} 3"),
        "{metrics}"
    );

    // Somebody else sets 2.75 (nova.conf's cpu_allocation_ratio, say): left alone.
    let path = format!("/resource_providers/{NODE}/inventories");
    let mut now = placement.call(reqwest::Method::GET, &path, None).await;
    now["inventories"]["VCPU"]["allocation_ratio"] = json!(2.75);
    placement.call(reqwest::Method::PUT, &path, Some(now)).await;
    eventually("the override seen", || async {
        parasol.get("/v1/stats").await["flex"]["allocation_ratio"]["overridden"] == 1
    })
    .await;
    measure(&parasol, 4, 1).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(ratios(&placement, &parasol, "VCPU").await, (2.75, 2.75));
    let managed = &parasol.get("/v1/stats").await["flex"]["allocation_ratio"];
    assert_eq!(managed["writes"], 3, "{managed}");
    assert_eq!(managed["failures"], 0, "{managed}");
    parasol.shutdown.stop().await;
}
