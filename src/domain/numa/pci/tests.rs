//! Vectors of Nova 34's `nova/tests/unit/pci/test_stats.py` (`PciDeviceStatsTestCase`,
//! `PciDeviceStatsWithTagsTestCase`), on pools as the scheduler holds them; the whole of
//! `support_requests` is compared with Nova's own on generated cases in tests/numa_pci.rs.

use super::super::{InstanceCell, PciNumaPolicy, PciPool, PciPools, PciRequest};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn pool(vendor: &str, product: &str, node: Value, count: i64, tags: Value) -> PciPool {
    let mut props: BTreeMap<String, Value> = BTreeMap::from([
        ("vendor_id".into(), json!(vendor)),
        ("product_id".into(), json!(product)),
        ("numa_node".into(), node),
    ]);
    for (k, v) in tags.as_object().unwrap() {
        props.insert(k.clone(), v.clone());
    }
    PciPool { props, count }
}

fn request(count: i64, spec: &[(&str, &str)], policy: Option<PciNumaPolicy>) -> PciRequest {
    PciRequest {
        count,
        spec: vec![spec
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()],
        alias_name: Some("a".into()),
        request_id: Some("r".into()),
        numa_policy: policy,
        ..PciRequest::default()
    }
}

fn cells(ids: &[i64]) -> Vec<InstanceCell> {
    ids.iter()
        .map(|&id| InstanceCell {
            id,
            ..InstanceCell::default()
        })
        .collect()
}

/// `setUp` of `PciDeviceStatsTestCase`: two of vendor v1 (one on node 0? no: numa 0 and 1
/// pools) and one of v2, as `_create_fake_devs` makes them.
fn stats() -> PciPools {
    PciPools::new(vec![
        pool("v1", "p1", json!(0), 1, json!({"dev_type": "type-PCI"})),
        pool("v1", "p1", json!(1), 1, json!({"dev_type": "type-PCI"})),
        pool("v2", "p2", json!(null), 1, json!({"dev_type": "type-PCI"})),
    ])
}

#[test]
fn support_requests_as_test_stats() {
    let none = Some(&BTreeMap::new());
    let s = stats();
    // test_support_requests: v1 ×2 and v2 ×1 fit; v1 ×3 does not.
    assert!(s.supports(
        &[
            request(2, &[("vendor_id", "v1")], None),
            request(1, &[("vendor_id", "v2")], None)
        ],
        none,
        &[],
        None
    ));
    assert!(!s.supports(&[request(3, &[("vendor_id", "v1")], None)], none, &[], None));
    // test_support_requests_no_numa_info (legacy): a device without NUMA node serves cell 0.
    assert!(s.supports(
        &[request(1, &[("vendor_id", "v2")], None)],
        none,
        &cells(&[0]),
        None
    ));
    // test_support_requests_numa: v1 on node 0 serves cell 0; two v1 do not fit cell 0 alone.
    assert!(s.supports(
        &[request(1, &[("vendor_id", "v1")], None)],
        none,
        &cells(&[0]),
        None
    ));
    assert!(!s.supports(
        &[request(
            2,
            &[("vendor_id", "v1")],
            Some(PciNumaPolicy::Required)
        )],
        none,
        &cells(&[0]),
        None
    ));
    // The preferred policy takes devices of other nodes when the cell's are too few.
    assert!(s.supports(
        &[request(
            2,
            &[("vendor_id", "v1")],
            Some(PciNumaPolicy::Preferred)
        )],
        none,
        &cells(&[0]),
        None
    ));
    // Required refuses a device with no NUMA node.
    assert!(!s.supports(
        &[request(
            1,
            &[("vendor_id", "v2")],
            Some(PciNumaPolicy::Required)
        )],
        none,
        &cells(&[0]),
        None
    ));
    // Supporting consumes nothing; applying does.
    assert_eq!(s.free(), 3);
    let mut consumed = s.clone();
    assert!(consumed.apply(&[request(2, &[("vendor_id", "v1")], None)], none, &[], None));
    assert_eq!(consumed.free(), 1);
}

#[test]
fn pfs_vdpa_and_remote_managed_devices_serve_only_requests_for_them() {
    let none = Some(&BTreeMap::new());
    let s = PciPools::new(vec![
        pool("8086", "1528", json!(0), 1, json!({"dev_type": "type-PF"})),
        pool("8086", "1515", json!(0), 2, json!({"dev_type": "vdpa"})),
        pool(
            "8086",
            "1520",
            json!(0),
            1,
            json!({"dev_type": "type-VF", "remote_managed": "true"}),
        ),
    ]);
    assert!(!s.supports(
        &[request(1, &[("vendor_id", "8086")], None)],
        none,
        &[],
        None
    ));
    assert!(s.supports(
        &[request(
            1,
            &[("vendor_id", "8086"), ("dev_type", "type-PF")],
            None
        )],
        none,
        &[],
        None
    ));
    assert!(s.supports(
        &[request(
            2,
            &[("vendor_id", "8086"), ("dev_type", "vdpa")],
            None
        )],
        none,
        &[],
        None
    ));
    assert!(s.supports(
        &[request(
            1,
            &[("vendor_id", "8086"), ("remote_managed", "True")],
            None
        )],
        none,
        &[],
        None
    ));
    // Tags match case-insensitively (`pci_device_prop_match`).
    assert!(s.supports(
        &[request(
            1,
            &[("product_id", "1528"), ("dev_type", "type-PF")],
            None
        )],
        none,
        &[],
        None
    ));
}
