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
