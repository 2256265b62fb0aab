//! The cells `seed.py` maps and fills: what a real cloud has where host and node differ.

use super::harness::Databases;
use serde_json::{json, Value};
use uuid::Uuid;

pub fn uuid(name: &str) -> String {
    Uuid::new_v5(&Uuid::NAMESPACE_DNS, name.as_bytes()).to_string()
}

fn libvirt_node(name: &str) -> Value {
    json!({"uuid": uuid(name), "name": name, "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
           "supported_instances": [["x86_64", "kvm", "hvm"], ["i686", "kvm", "hvm"]],
           "cpu_info": {"arch": "x86_64", "model": "Nehalem", "vendor": "Intel",
                        "topology": {"sockets": 1, "cores": 4, "threads": 2}, "features": ["vmx", "sse4.2"]},
           "numa": true, "pci_pools": 1, "mapped": 1,
           "metrics": {"cpu.percent": 29, "cpu.frequency": 2400}})
}

fn ironic_node(name: &str) -> Value {
    let id = uuid(name);
    json!({"uuid": id, "name": id, "hypervisor_type": "ironic", "hypervisor_version": 1,
           "supported_instances": [["x86_64", "baremetal", "hvm"]], "cpu_info": "", "mapped": 1})
}

fn service(host: &str, nodes: Vec<Value>) -> Value {
    json!({"host": host, "nodes": nodes})
}

/// Host aggregates as an operator makes them: two zones, tenant and image isolation, an
/// aggregate with no host and one with no metadata, a host in two aggregates.
pub fn aggregates() -> Value {
    json!([
        {"name": "rack-a", "metadata": {"availability_zone": "az-a", "ssd": "true"},
         "hosts": ["cmp1", "ironic-1"]},
        {"name": "rack-b", "metadata": {"availability_zone": "az-b"}, "hosts": ["cmp6"]},
        {"name": "tenants", "metadata": {"filter_tenant_id": "p1", "filter_tenant_id2": "p2"},
         "hosts": ["cmp1", "cmp2"]},
        {"name": "windows", "metadata": {"os_distro": "windows"}, "hosts": []},
        {"name": "plain", "metadata": {}, "hosts": ["cmp5"]},
    ])
}

/// Two cells (cell2's URL a template), a disabled cell and an unreachable one, and every
/// case of the brief: host ≠ node (libvirt FQDN), an Ironic service with three nodes, a
/// disabled, a forced-down and a stale service, a deleted node and a node without service.
pub fn scenario(db: &Databases) -> Value {
    let mut deleted = libvirt_node("cmp5-old.example.org");
    deleted["deleted"] = json!(true);
    let mut disabled = service("cmp2", vec![libvirt_node("cmp2.example.org")]);
    disabled["disabled_reason"] = json!("hardware maintenance");
    let mut forced = service("cmp3", vec![libvirt_node("cmp3.example.org")]);
    forced["forced_down"] = json!(true);
    let mut stale = service("cmp4", vec![libvirt_node("cmp4.example.org")]);
    stale["heartbeat_ago_s"] = json!(300);
    let mut orphan = service("ghost", vec![libvirt_node("ghost.example.org")]);
    orphan["service"] = json!(false);
    let cell1 = vec![
        service("cmp1", vec![libvirt_node("cmp1.example.org")]),
        service(
            "ironic-1",
            (1..=3).map(|i| ironic_node(&format!("bm{i}"))).collect(),
        ),
        disabled,
        forced,
        stale,
        service("cmp5", vec![deleted, libvirt_node("cmp5.example.org")]),
        orphan,
    ];
    let cell2 = vec![service("cmp6", vec![libvirt_node("cmp6.example.org")])];
    let cell = |name: &str, url: String, disabled: bool, services: Vec<Value>| {
        json!({"name": name, "database_connection": url, "transport_url": format!("fake://{name}"),
               "disabled": disabled, "services": services})
    };
    json!({"cell0": db.url("cell0"), "cells": [
        cell("cell1", db.url("cell1"), false, cell1),
        cell("cell2", db.cell2_template(), false, cell2),
        cell("cell3", db.unreachable_url("disabled_cell"), true, vec![]),
        cell("broken", db.unreachable_url("broken_cell"), false, vec![]),
    ], "aggregates": aggregates()})
}
