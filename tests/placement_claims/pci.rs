//! PCI devices tracked in Placement (`[filter_scheduler] pci_in_placement`, issue 48): each
//! device a child provider of its compute node, so that a request for one is a request on
//! provider trees, decided on Placement's allocation candidates — one per device — and on the
//! node's PCI pools from Nova's compute-node record (each pool tagged with its device's
//! provider). Against the real Placement, a cell database made by Nova's own migrations and
//! objects, and request specs whose PCI request groups Nova's own code makes.

use super::*;

/// The devices' class, as Nova's PCI tracking in Placement names a device's class from its
/// vendor and product.
const PCI_RC: &str = "CUSTOM_PCI_8086_1528";
const DEVICES: [&str; 3] = [
    "c0000000-0000-4000-8000-0000000000d1",
    "c0000000-0000-4000-8000-0000000000d2",
    "c0000000-0000-4000-8000-0000000000d3",
];
const CELL: &str = "e0000000-0000-4000-8000-00000000ce11";
const ALIAS_REQUEST: &str = "f0000000-0000-4000-8000-000000000001";

/// CN[0] with three devices (one provider each, as Nova's `test_multi_create` host), CN[1]
/// without any; the cell database with both nodes; Parasol reading it and claiming in
/// Placement.
async fn cloud(dir: &tempfile::TempDir) -> (PlacementServer, Parasol) {
    let placement = PlacementServer::start().await;
    for (i, cn) in CN.iter().take(2).enumerate() {
        let name = format!("cn{}", i + 1);
        placement
            .provider(&name, cn, inventory(8, &[]), &[], &[])
            .await;
    }
    for (i, device) in DEVICES.iter().enumerate() {
        let name = format!("cn1_0000:81:0{i}.0");
        let one = json!({PCI_RC: {"total": 1}});
        super::trees::child(&placement, &name, device, CN[0], one).await;
    }
    let cell_db = dir.path().join("cell1.sqlite");
    let url = format!("sqlite:///{}", cell_db.display());
    let pools: Vec<Value> = DEVICES
        .iter()
        .map(|rp| {
            json!({"vendor_id": "8086", "product_id": "1528", "count": 1,
                   "tags": {"dev_type": "type-PCI", "rp_uuid": rp}})
        })
        .collect();
    let made = nova_side(
        vec!["cell".into()],
        json!({"url": url, "nodes": [
            {"host": "cn1", "uuid": CN[0], "pci_pools": pools},
            {"host": "cn2", "uuid": CN[1], "pci_pools": []}]}),
    )
    .await;
    assert_eq!(made["nodes"], 2, "{made}");
    let ledger_url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let parasol = Parasol::start_with(&placement, &ledger_url, 3600.0, |s| {
        s.placement.claims = true;
        s.nova_db.enabled = true;
        s.nova_db.cells = vec![parasol::nova_db::CellSetting {
            uuid: CELL.into(),
            name: "cell1".into(),
            database_url: parasol::nova_db::SecretUrl(url.clone()),
        }];
        s.nova_db.refresh_interval_s = 3600.0;
    })
    .await;
    eventually("the first sync and the first read of the cell", || async {
        let read = parasol.handles.nova_db.borrow().reads > 0;
        read && parasol.used().await.len() == 2
    })
    .await;
    (placement, parasol)
}

/// A flavor asking one device of the alias (`pci_passthrough:alias: a1:1`) for `uuids`.
async fn pci_spec(uuids: &[String]) -> Value {
    let description = json!({"instance_uuids": uuids, "num_instances": uuids.len(),
        "vcpus": 1, "memory_mb": 512, "root_gb": 1,
        "extra_specs": {"pci_passthrough:alias": "a1:1"},
        "pci_requests": [{"count": 1, "alias_name": "a1", "request_id": ALIAS_REQUEST,
                          "spec": {"vendor_id": "8086", "product_id": "1528"}}]});
    specs(vec![description]).await.remove(0)
}

/// The device provider an instance's Selection maps its PCI request group to.
fn mapped_device(selection: &Value) -> String {
    let ar: Value = serde_json::from_str(
        data(selection)["allocation_request"]
            .as_str()
            .expect("string"),
    )
    .expect("allocation_request is JSON");
    let group = format!("{ALIAS_REQUEST}-0");
    ar["mappings"][&group][0]
        .as_str()
        .unwrap_or_else(|| panic!("{group} mapped in {ar}"))
        .to_string()
}

/// Nova's `PCIServersTest.test_multi_create`: two instances of one device each on a host of
/// three. Each of Placement's candidates on the host is one device; the second instance is
/// judged and claimed with a device the first did not take (Nova's filters drop the
/// candidate whose device the call's first instance consumed, and Nova claims the first
/// candidate left), never refused because the host's first candidate is taken. A later call
/// of two for the one device left places neither and leaves no claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pci_multi_create_on_placement_s_device_providers_claims_one_device_per_instance() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (placement, parasol) = cloud(&dir).await;
    let two = [instance(1), instance(2)];
    let spec = pci_spec(&two).await;
    let groups = &spec["nova_object.data"]["requested_resources"];
    assert_eq!(
        groups.as_array().map(Vec::len),
        Some(1),
        "Nova made one group: {groups}"
    );
    let (status, answer) = parasol.select(&spec, &two).await;
    assert_eq!(status, 200, "{answer}");
    let mut devices = Vec::new();
    for (i, uuid) in two.iter().enumerate() {
        let chosen = &answer[i][0];
        assert_eq!(data(chosen)["compute_node_uuid"], CN[0], "{answer}");
        let device = mapped_device(chosen);
        // Placement holds what the Selection says: the root's part and the mapped device.
        let held = placement.allocations(uuid).await["allocations"].clone();
        assert_eq!(
            nonzero(&held[&device]["resources"]),
            demand(&[(PCI_RC, 1)]),
            "{uuid}: {held}"
        );
        assert_eq!(
            nonzero(&held[CN[0]]["resources"]),
            demand(&[("VCPU", 1), ("MEMORY_MB", 512), ("DISK_GB", 1)])
        );
        devices.push(device);
    }
    assert_ne!(devices[0], devices[1], "one device per instance");
    assert!(DEVICES.contains(&devices[0].as_str()) && DEVICES.contains(&devices[1].as_str()));
    assert!(placement_matches_ledger(&placement, &parasol).await);
    let mut providers: Vec<&str> = vec![CN[0], CN[1]];
    providers.extend(DEVICES);
    assert_within_capacity(&placement, &providers).await;

    // One device left (Placement offers only its candidate; the record still counts three
    // free): the call's first instance takes it, its second finds none — NoValidHost, and
    // the first's claim removed.
    let more = [instance(3), instance(4)];
    let spec = pci_spec(&more).await;
    let (status, answer) = parasol.select(&spec, &more).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["class"], "NoValidHost", "{answer}");
    for uuid in &more {
        assert!(
            held(&placement, uuid).await.0.is_empty(),
            "{uuid} holds nothing"
        );
    }
    assert_within_capacity(&placement, &providers).await;

    // A single instance still takes the device left, on the one host that has it.
    let one = [instance(5)];
    let spec = pci_spec(&one).await;
    let (status, answer) = parasol.select(&spec, &one).await;
    assert_eq!(status, 200, "{answer}");
    let last = mapped_device(&answer[0][0]);
    assert!(!devices.contains(&last), "{last} was free");
    assert_eq!(
        answer[0].as_array().map(Vec::len),
        Some(1),
        "no alternate: {answer}"
    );
    assert!(placement_matches_ledger(&placement, &parasol).await);
}
