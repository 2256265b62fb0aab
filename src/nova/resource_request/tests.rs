//! Unit tests of the translation; `tests/nova_translation.rs` compares it with Nova's own.

use super::*;
use crate::nova::request_filters::{Aggregate, ComputeNodeRef};
use serde_json::{json, Value};

fn object(name: &str, version: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": version, "nova_object.data": data})
}

fn spec(extra_specs: Value, more: Value) -> RequestSpec {
    let mut data = json!({"flavor": object("Flavor", "1.2", json!({"name": "f", "vcpus": 2,
        "memory_mb": 1024, "root_gb": 10, "ephemeral_gb": 0, "swap": 0, "extra_specs": extra_specs})),
        "project_id": "p1"});
    for (k, v) in more.as_object().unwrap() {
        data[k] = v.clone();
    }
    RequestSpec::from_primitive(&object("RequestSpec", "1.15", data)).unwrap()
}

fn node(host: &str, node: &str, uuid: &str) -> ComputeNodeRef {
    ComputeNodeRef {
        host: host.into(),
        node: node.into(),
        uuid: uuid.into(),
    }
}

#[test]
fn a_plain_flavor_asks_its_three_classes_and_forbids_disabled_computes() {
    let r = translate(
        &spec(json!({}), json!({})),
        &RequestFilterOptions::default(),
        &CloudView::default(),
        true,
    )
    .unwrap();
    assert_eq!(
        r.to_querystring(),
        "limit=1000&resources=DISK_GB%3A10%2CMEMORY_MB%3A1024%2CVCPU%3A2&root_required=%21COMPUTE_STATUS_DISABLED"
    );
}

#[test]
fn dedicated_cpus_ask_pcpu_and_the_fallback_asks_vcpu() {
    let s = spec(
        json!({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require"}),
        json!({}),
    );
    let opts = RequestFilterOptions::default();
    let pinned = translate(&s, &opts, &CloudView::default(), true).unwrap();
    assert_eq!(pinned.resources.get("PCPU"), Some(&2));
    assert!(
        pinned.cpu_pinning_requested && pinned.required_traits.contains("HW_CPU_HYPERTHREADING")
    );
    let fallback = translate(&s, &opts, &CloudView::default(), false).unwrap();
    assert_eq!(
        (
            fallback.resources.get("VCPU"),
            fallback.resources.get("PCPU")
        ),
        (Some(&2), None)
    );
    assert!(fallback.required_traits.is_empty());
}

#[test]
fn forced_hosts_resolve_to_in_tree_or_lift_the_limit_or_refuse() {
    let nodes = [
        node("h1", "n1", "u1"),
        node("h2", "n2a", "u2a"),
        node("h2", "n2b", "u2b"),
    ];
    let cloud = CloudView {
        compute_nodes: &nodes,
        ..CloudView::default()
    };
    let opts = RequestFilterOptions::default();
    let run = |more: Value| translate(&spec(json!({}), more), &opts, &cloud, true);
    assert_eq!(
        run(json!({"force_hosts": ["h1"]}))
            .unwrap()
            .in_tree
            .as_deref(),
        Some("u1")
    );
    let two = run(json!({"force_hosts": ["h2"]})).unwrap();
    assert_eq!((two.in_tree, two.limit), (None, None));
    assert_eq!(
        run(json!({"force_nodes": ["n2b"]}))
            .unwrap()
            .in_tree
            .as_deref(),
        Some("u2b")
    );
    assert_eq!(
        run(json!({"force_hosts": ["ghost"]})).unwrap_err(),
        Refusal::NoValidHost("No such host - host: ghost node: None ".into())
    );
}

#[test]
fn tenant_and_zone_aggregates_become_member_of_groups() {
    let aggs = [
        Aggregate {
            uuid: "t1".into(),
            metadata: [("filter_tenant_id".to_string(), "p1".to_string())].into(),
            hosts: Vec::new(),
        },
        Aggregate {
            uuid: "z1".into(),
            metadata: [("availability_zone".to_string(), "az".to_string())].into(),
            hosts: Vec::new(),
        },
    ];
    let cloud = CloudView {
        aggregates: &aggs,
        ..CloudView::default()
    };
    let opts = RequestFilterOptions {
        limit_tenants_to_placement_aggregate: true,
        ..Default::default()
    };
    let r = translate(
        &spec(json!({}), json!({"availability_zone": "az"})),
        &opts,
        &cloud,
        true,
    )
    .unwrap();
    assert_eq!(
        r.member_of,
        vec![vec!["t1".to_string()], vec!["z1".to_string()]]
    );
    let required = RequestFilterOptions {
        placement_aggregate_required_for_tenants: true,
        ..opts
    };
    let stranger = spec(json!({}), json!({"project_id": "p9"}));
    assert!(matches!(
        translate(&stranger, &required, &cloud, true),
        Err(Refusal::NoValidHost(_))
    ));
}

fn group(requester: &str, resources: Value) -> Value {
    object(
        "RequestGroup",
        "1.3",
        json!({"requester_id": requester, "resources": resources,
               "required_traits": ["CUSTOM_PHYSNET_A"], "use_same_provider": true}),
    )
}

const PORT: &str = "2f6a2c1e-8f0c-4b7a-9d3e-0a1b2c3d4e5f";

#[test]
fn what_needs_nested_providers_is_unsupported_naming_each_part() {
    let opts = RequestFilterOptions::default();
    let cases = [
        (
            spec(json!({"resources1:CUSTOM_FPGA": "1"}), json!({})),
            vec!["request group '1' (from the flavor's resources1/trait1 extra specs) needs nested providers"],
        ),
        (
            spec(
                json!({"accel:device_profile": "gpu"}),
                json!({"requested_resources": [group("device_profile_0", json!({"FPGA": 1}))]}),
            ),
            vec!["request group 'device_profile_0' (from a Cyborg device profile, in requested_resources)"],
        ),
        (
            spec(
                json!({}),
                json!({"requested_resources": [
                    group(PORT, json!({"NET_BW_EGR_KILOBIT_PER_SEC": 10})),
                    group(&format!("{PORT}-0"), json!({"CUSTOM_PCI_8086_1563": 1}))]}),
            ),
            vec![
                "request group '2f6a2c1e-8f0c-4b7a-9d3e-0a1b2c3d4e5f' (from a Neutron port, in requested_resources)",
                "(from a PCI device in Placement, in requested_resources)",
            ],
        ),
        (
            spec(
                json!({}),
                json!({"request_level_params": object("RequestLevelParams", "1.1",
                json!({"same_subtree": [["a", "b"]]}))}),
            ),
            vec!["same_subtree (a,b) needs nested providers"],
        ),
    ];
    for (s, wants) in cases {
        match translate(&s, &opts, &CloudView::default(), true) {
            Err(Refusal::Unsupported(reason)) => {
                for want in wants {
                    assert!(reason.contains(want), "{reason:?} lacks {want:?}")
                }
            }
            other => panic!("{wants:?}: {other:?}"),
        }
    }
}

#[test]
fn a_device_profile_alone_asks_the_accelerators_trait_and_is_flat() {
    let s = spec(json!({"accel:device_profile": "gpu"}), json!({}));
    let r = translate(
        &s,
        &RequestFilterOptions::default(),
        &CloudView::default(),
        true,
    )
    .unwrap();
    assert!(r.root_required.contains("COMPUTE_ACCELERATORS"));
}

#[test]
fn two_outside_groups_default_group_policy_to_none_unless_the_flavor_has_two() {
    let ports = json!({"requested_resources": [
        group(PORT, json!({"NET_BW_EGR_KILOBIT_PER_SEC": 10})),
        group("device_profile_0", json!({"FPGA": 1}))]});
    let opts = RequestFilterOptions::default();
    let cloud = CloudView::default();
    let policy = |extra: Value, more: Value| {
        resources_from_request_spec(&spec(extra, more), &opts, &cloud, true)
            .unwrap()
            .group_policy
    };
    assert_eq!(policy(json!({}), ports.clone()), Some("none".into()));
    assert_eq!(
        policy(json!({"resources1:VGPU": "0"}), ports.clone()),
        Some("none".into())
    );
    assert_eq!(
        policy(
            json!({"resources1:VGPU": "1", "resources2:VGPU": "1"}),
            json!({})
        ),
        None
    );
    assert_eq!(
        policy(json!({"group_policy": "isolate"}), ports),
        Some("isolate".into())
    );
}

#[test]
fn owner_nova_goes_on_the_root_and_on_the_flavor_s_pci_groups_only() {
    let pci = object(
        "InstancePCIRequests",
        "1.1",
        json!({"requests": [
            object("InstancePCIRequest", "1.4", json!({"count": 1, "spec": [{}],
                "alias_name": "nic", "request_id": PORT})),
        ]}),
    );
    let s = spec(
        json!({}),
        json!({"pci_requests": pci, "requested_resources": [
            group(&format!("{PORT}-0"), json!({"CUSTOM_PCI_8086_1563": 1})),
            group("3f6a2c1e-8f0c-4b7a-9d3e-0a1b2c3d4e5f", json!({"NET_BW_EGR_KILOBIT_PER_SEC": 1}))]}),
    );
    let cloud = CloudView {
        min_compute_service_version: Some(74),
        ..CloudView::default()
    };
    let r =
        resources_from_request_spec(&s, &RequestFilterOptions::default(), &cloud, true).unwrap();
    assert!(r.root_required.contains("OWNER_NOVA"));
    let owners: Vec<bool> = r
        .groups
        .iter()
        .map(|g| g.required_traits.contains("OWNER_NOVA"))
        .collect();
    assert_eq!(owners, [true, false]);
}

#[test]
fn a_bad_outside_group_is_a_codec_error_naming_it() {
    let cases = [
        (
            json!([group("", json!({"VGPU": 1}))]),
            "requested_resources[0]",
            "no requester_id",
        ),
        (
            json!([object("RequestGroup", "1.3", json!({"requester_id": "x"}))]),
            "requested_resources[0]",
            "asks for no resources",
        ),
        (
            json!([
                group("x", json!({"VGPU": 1})),
                group("x", json!({"VGPU": 1}))
            ]),
            "requested_resources[1]",
            "repeats the requester_id",
        ),
        (
            json!([group("1", json!({"VGPU": 1}))]),
            "requested_resources[0]",
            "suffix the flavor",
        ),
    ];
    for (groups, at, want) in cases {
        let v = object(
            "RequestSpec",
            "1.15",
            json!({"flavor": object("Flavor", "1.2", json!({"vcpus": 2, "memory_mb": 1,
                "root_gb": 1, "extra_specs": {"resources1:VGPU": "1"}})),
                "requested_resources": groups}),
        );
        let err = RequestSpec::from_primitive(&v).unwrap_err().to_string();
        assert!(
            err.contains(at) && err.contains(want),
            "{err:?}: want {at} {want}"
        );
    }
}

#[test]
fn malformed_extra_specs_are_codec_errors_naming_the_key() {
    let cases = [
        (
            json!({"resources:VCPU": "abc"}),
            "extra_specs.resources:VCPU",
        ),
        (
            json!({"resources:NOT_A_CLASS": "1"}),
            "extra_specs.resources:NOT_A_CLASS",
        ),
        (json!({"trait:X": "maybe"}), "extra_specs.trait:X"),
        (
            json!({"hw:cpu_policy": "bogus"}),
            "extra_specs.hw:cpu_policy",
        ),
        (
            json!({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "0-9"}),
            "extra_specs.hw:cpu_dedicated_mask",
        ),
        (
            json!({"hw:tpm_version": "1.2", "hw:tpm_model": "tpm-crb"}),
            "extra_specs.hw:tpm_model",
        ),
        (
            json!({"resources:VCPU": 4}),
            "extra_specs.resources:VCPU must be a string",
        ),
    ];
    for (extra, want) in cases {
        let v = object(
            "RequestSpec",
            "1.15",
            json!({"flavor": object("Flavor", "1.2",
            json!({"vcpus": 2, "memory_mb": 1, "root_gb": 1, "extra_specs": extra}))}),
        );
        let err = RequestSpec::from_primitive(&v).unwrap_err().to_string();
        assert!(err.contains(want), "{err:?} should contain {want:?}");
    }
}

#[test]
fn an_unknown_class_or_trait_is_left_for_the_scheduler_to_refuse() {
    let s = spec(
        json!({"resources:CUSTOM_NOBODY": "1", "trait:CUSTOM_NOBODY": "required"}),
        json!({}),
    );
    let r = translate(
        &s,
        &RequestFilterOptions::default(),
        &CloudView::default(),
        true,
    )
    .unwrap();
    assert_eq!(r.resources.get("CUSTOM_NOBODY"), Some(&1));
    assert!(r.required_traits.contains("CUSTOM_NOBODY"));
}

#[test]
fn a_class_any_group_asks_is_not_taken_from_the_flavor_sizes() {
    let cases = [
        (
            json!({"resources1:VCPU": "2"}),
            json!({}),
            "resources=DISK_GB%3A10%2CMEMORY_MB%3A1024",
        ),
        (
            json!({"resources_p:PCPU": "2"}),
            json!({}),
            "resources=DISK_GB%3A10%2CMEMORY_MB%3A1024",
        ),
        (
            json!({"resources1:MEMORY_MB": "0"}),
            json!({}),
            "resources=DISK_GB%3A10%2CVCPU%3A2",
        ),
        (
            json!({}),
            json!({"requested_resources": [group(PORT, json!({"DISK_GB": 5}))]}),
            "resources=MEMORY_MB%3A1024%2CVCPU%3A2",
        ),
    ];
    for (extra, more, want) in cases {
        let r = ResourceRequest::from_request_spec(&spec(extra.clone(), more), true, 1000);
        let q = r.to_querystring();
        assert!(q.split('&').any(|p| p == want), "{extra}: {q}");
    }
}
