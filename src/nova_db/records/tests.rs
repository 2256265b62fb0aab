//! Liveness as Nova's DB servicegroup driver judges it, and the decoding of the JSON columns.

use super::*;
use serde_json::json;

fn service(
    forced_down: bool,
    last_seen_up_ms: Option<i64>,
    created_at_ms: Option<i64>,
) -> ServiceRecord {
    ServiceRecord {
        id: 1,
        uuid: None,
        host: "cmp1".into(),
        disabled: false,
        disabled_reason: None,
        forced_down,
        last_seen_up_ms,
        created_at_ms,
        updated_at_ms: None,
        version: 70,
    }
}

#[test]
fn a_service_is_up_while_its_heartbeat_is_within_service_down_time() {
    let now = 1_000_000_000;
    let cases = [
        (
            "fresh heartbeat",
            service(false, Some(now - 10_000), Some(0)),
            Liveness::Up,
        ),
        (
            "exactly at the limit",
            service(false, Some(now - 60_000), None),
            Liveness::Up,
        ),
        (
            "one millisecond past",
            service(false, Some(now - 60_001), None),
            Liveness::Stale {
                last_heartbeat_ms: now - 60_001,
            },
        ),
        (
            "clock skew within the limit",
            service(false, Some(now + 30_000), None),
            Liveness::Up,
        ),
        (
            "heartbeat far in the future",
            service(false, Some(now + 61_000), None),
            Liveness::Stale {
                last_heartbeat_ms: now + 61_000,
            },
        ),
        (
            "never reported: created_at counts",
            service(false, None, Some(now - 5_000)),
            Liveness::Up,
        ),
        (
            "never reported and created long ago",
            service(false, None, Some(now - 600_000)),
            Liveness::Stale {
                last_heartbeat_ms: now - 600_000,
            },
        ),
        (
            "forced down despite a fresh heartbeat",
            service(true, Some(now), Some(now)),
            Liveness::ForcedDown,
        ),
        (
            "no timestamps at all",
            service(false, None, None),
            Liveness::NoHeartbeat,
        ),
    ];
    for (name, service, expected) in cases {
        assert_eq!(service.liveness(now, 60.0), expected, "{name}");
        assert_eq!(service.is_up(now, 60.0), expected == Liveness::Up, "{name}");
    }
}

#[test]
fn supported_instances_decode_as_nova_s_hv_specs() {
    let libvirt = r#"[["x86_64", "kvm", "hvm"], ["i686", "qemu", "hvm", "extra"]]"#;
    let got = supported_instances(Some(libvirt)).expect("decodes");
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[1].arch.as_str(), got[1].hv_type.as_str()),
        ("i686", "qemu")
    );
    for empty in [None, Some(""), Some("[]")] {
        assert_eq!(
            supported_instances(empty).expect("empty"),
            vec![],
            "{empty:?}"
        );
    }
    for bad in [
        "{\"arch\": 1}",
        "[[\"x86_64\", \"kvm\"]]",
        "[[\"x86_64\", null, \"hvm\"]]",
        "nope",
    ] {
        let error = supported_instances(Some(bad)).expect_err(bad);
        assert!(error.contains("supported_instances"), "{bad}: {error}");
    }
}

#[test]
fn cpu_info_is_json_or_absent() {
    let libvirt = r#"{"arch": "x86_64", "features": ["vmx"]}"#;
    assert_eq!(
        cpu_info(Some(libvirt)),
        Ok(Some(json!({"arch": "x86_64", "features": ["vmx"]})))
    );
    assert_eq!(cpu_info(Some("")), Ok(None));
    assert_eq!(cpu_info(None), Ok(None));
    assert!(cpu_info(Some("Intel Xeon"))
        .expect_err("not JSON")
        .contains("cpu_info"));
}

#[test]
fn pci_pools_are_counted_as_nova_reads_pci_stats() {
    let object = json!({"nova_object.name": "PciDevicePoolList", "nova_object.namespace": "nova",
        "nova_object.version": "1.1", "nova_object.data": {"objects": [{}, {}]}});
    let cases = [
        (Some(object.to_string()), 2),
        (Some(r#"[{"vendor_id": "8086", "count": 3}]"#.into()), 1),
        (Some(r#"{"vendor_id": "8086", "count": 3}"#.into()), 1),
        (
            Some(
                r#"{"nova_object.namespace": "nova", "nova_object.data": {"objects": []}}"#.into(),
            ),
            0,
        ),
        (Some("{}".into()), 0),
        (Some("not json".into()), 0),
        (None, 0),
    ];
    for (text, expected) in cases {
        assert_eq!(pci_pools(text.as_deref()), expected, "{text:?}");
    }
}

#[test]
fn aggregate_rows_become_nova_s_aggregates_with_their_hosts_and_metadata() {
    use crate::nova_db::sql::{AggregateHostRow, AggregateMetadataRow, AggregateRow};
    let row = |id: i32, uuid: Option<&str>, name: &str| AggregateRow {
        id,
        uuid: uuid.map(String::from),
        name: Some(name.into()),
    };
    let host = |aggregate_id: i32, host: Option<&str>| AggregateHostRow {
        aggregate_id,
        host: host.map(String::from),
    };
    let pair = |aggregate_id: i32, key: &str, value: &str| AggregateMetadataRow {
        aggregate_id,
        key: key.into(),
        value: value.into(),
    };
    let (read, skipped) = aggregates(
        vec![
            row(2, Some("b-uuid"), "zone-b"),
            row(1, Some("a-uuid"), "tenants"),
            row(3, None, "legacy"),
            row(4, Some("empty-uuid"), "empty"),
        ],
        vec![
            host(2, Some("cmp1")),
            host(2, Some("cmp2")),
            host(1, Some("cmp2")),
            host(3, Some("cmp3")),
            host(9, Some("cmp9")),
            host(2, None),
        ],
        vec![
            pair(2, "availability_zone", "az-b"),
            pair(1, "filter_tenant_id", "p1"),
            pair(1, "filter_tenant_id2", "p2"),
            pair(3, "availability_zone", "az-legacy"),
            pair(9, "k", "v"),
        ],
    );
    let aggregate = |uuid: &str, hosts: &[&str], pairs: &[(&str, &str)]| crate::nova::Aggregate {
        uuid: uuid.into(),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        metadata: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    assert_eq!(
        read,
        [
            aggregate(
                "a-uuid",
                &["cmp2"],
                &[("filter_tenant_id", "p1"), ("filter_tenant_id2", "p2")]
            ),
            aggregate(
                "b-uuid",
                &["cmp1", "cmp2"],
                &[("availability_zone", "az-b")]
            ),
            aggregate("empty-uuid", &[], &[]),
        ]
    );
    assert_eq!(
        skipped,
        [SkippedAggregate {
            id: 3,
            name: Some("legacy".into()),
            reason: "the aggregate has no uuid yet".into(),
        }]
    );
}

#[test]
fn free_pci_devices_sum_the_pools_counts() {
    let pool = |count: i64| {
        json!({"nova_object.name": "PciDevicePool", "nova_object.namespace": "nova",
               "nova_object.version": "1.1", "nova_object.data": {"count": count}})
    };
    let object = json!({"nova_object.name": "PciDevicePoolList", "nova_object.namespace": "nova",
        "nova_object.version": "1.1", "nova_object.data": {"objects": [pool(2), pool(3)]}});
    let cases = [
        (Some(object.to_string()), 5),
        (Some(r#"[{"count": 3}, {"count": 4}]"#.into()), 7),
        (Some(r#"{"vendor_id": "8086", "count": 3}"#.into()), 3),
        (Some("{}".into()), 0),
        (Some("not json".into()), 0),
        (None, 0),
    ];
    for (text, expected) in cases {
        assert_eq!(pci_free(text.as_deref()), expected, "{text:?}");
    }
}

#[test]
fn host_ip_reads_mysql_sqlite_and_postgresql_forms() {
    let cases = [
        (Some("10.0.0.5"), Some("10.0.0.5")),
        (Some("10.0.0.5/32"), Some("10.0.0.5")),
        (Some("fd00::5/128"), Some("fd00::5")),
        (Some(""), None),
        (Some("not an ip"), None),
        (None, None),
    ];
    for (text, want) in cases {
        assert_eq!(host_ip(text), want.map(|w| w.parse().unwrap()), "{text:?}");
    }
}

#[test]
fn failed_builds_read_from_the_stats_counters() {
    let cases = [
        (Some(r#"{"failed_builds": "3", "num_instances": "2"}"#), 3),
        (Some(r#"{"failed_builds": 2}"#), 2),
        (Some(r#"{"num_instances": "2"}"#), 0),
        (Some(r#"{"failed_builds": "x"}"#), 0),
        (Some("not json"), 0),
        (None, 0),
    ];
    for (text, want) in cases {
        assert_eq!(failed_builds(text), want, "{text:?}");
    }
}

#[test]
fn monitor_metrics_read_as_monitor_metric_list_from_json() {
    // What the resource tracker stores (`MonitorMetricList.to_list()`): the CPU percentages
    // divided by 100, `numa.membw.current` with per-cell values and no `value`.
    let stored = json!([
        {"name": "cpu.percent", "value": 0.37, "timestamp": "2026-12-02T10:00:00.250000", "source": "libvirt.LibvirtDriver"},
        {"name": "cpu.frequency", "value": 2400, "timestamp": "2026-12-02T10:00:01.000000", "source": "libvirt.LibvirtDriver"},
        {"name": "numa.membw.current", "numa_membw_values": {"0": 10}, "timestamp": "2026-12-02T10:00:00.000000", "source": "x"},
        {"name": "cpu.idle.percent", "value": 0.29},
        {"name": "cpu.user.percent", "value": 0.375},
    ])
    .to_string();
    let metrics = monitor_metrics(Some(&stored)).expect("a list of metrics");
    let at = |s: &str| {
        chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
            .unwrap()
            .and_utc()
            .timestamp_millis()
    };
    let got: Vec<(&str, f64, Option<i64>)> = metrics
        .iter()
        .map(|m| (m.name.as_str(), m.value, m.at_ms))
        .collect();
    assert_eq!(
        got,
        [
            ("cpu.percent", 37.0, Some(at("2026-12-02T10:00:00.25"))),
            ("cpu.frequency", 2400.0, Some(at("2026-12-02T10:00:01"))),
            ("cpu.idle.percent", 28.0, None),
            ("cpu.user.percent", 37.0, None),
        ]
    );
    assert_eq!(monitor_metrics(None), Ok(Vec::new()));
    assert_eq!(monitor_metrics(Some("")), Ok(Vec::new()));
    let bad = monitor_metrics(Some("{\"cpu.percent\": 1}")).unwrap_err();
    assert!(bad.contains("metrics is not a JSON list"), "{bad}");
    let nameless = monitor_metrics(Some("[{\"value\": 1}]")).unwrap_err();
    assert!(nameless.contains("has no name"), "{nameless}");
}
