//! Requests only provider trees answer (issue 43 item 3): a suffixed group of the flavor and a
//! port's request group on a compute node's child provider, a granular group on the roots, a
//! shape Placement has no candidate for, and the refusal without Placement's claims — against
//! the real Placement, with request specs built by Nova's own objects and an alternate claimed
//! by Nova's own `claim_resources`.

use super::*;

const CHILD: &str = "c0000000-0000-4000-8000-0000000000c1";
const OTHER_CHILD: &str = "c0000000-0000-4000-8000-0000000000c2";
const PORT: &str = "d0000000-0000-4000-8000-000000000001";

/// A child provider of `parent` with `inventories`, its custom classes created first.
pub(super) async fn child(
    placement: &PlacementServer,
    name: &str,
    uuid: &str,
    parent: &str,
    inventories: Value,
) {
    use reqwest::Method;
    placement
        .call(
            Method::POST,
            "/resource_providers",
            Some(json!({"name": name, "uuid": uuid, "parent_provider_uuid": parent})),
        )
        .await;
    for class in inventories.as_object().expect("inventories").keys() {
        placement
            .call(Method::PUT, &format!("/resource_classes/{class}"), None)
            .await;
    }
    let body = json!({"resource_provider_generation": 0, "inventories": inventories});
    let path = format!("/resource_providers/{uuid}/inventories");
    placement.call(Method::PUT, &path, Some(body)).await;
}

/// Three roots: CN[0] with a child holding three CUSTOM_MAGIC, CN[1] with a child holding
/// another class, CN[2] flat; Parasol started on them (claims as configured).
async fn trees(claims: bool) -> (PlacementServer, Parasol, tempfile::TempDir) {
    let placement = PlacementServer::start().await;
    for (i, cn) in CN.iter().take(3).enumerate() {
        let name = format!("cn{}", i + 1);
        placement
            .provider(&name, cn, inventory(8, &[]), &[], &[])
            .await;
    }
    let magic = json!({"CUSTOM_MAGIC": {"total": 3}});
    child(&placement, "cn1-magic", CHILD, CN[0], magic).await;
    let other = json!({"CUSTOM_OTHER": {"total": 4}});
    child(&placement, "cn2-other", OTHER_CHILD, CN[1], other).await;
    let db = tempfile::tempdir().expect("temp dir");
    let ledger_url = format!("sqlite://{}", db.path().join("ledger.db").display());
    let parasol = Parasol::start_with(&placement, &ledger_url, 0.3, |s| {
        s.placement.claims = claims;
    })
    .await;
    eventually("the first sync", || async {
        parasol.get("/v1/hosts").await["hosts"]
            .as_array()
            .map(Vec::len)
            == Some(3)
    })
    .await;
    (placement, parasol, db)
}

fn allocation_request(selection: &Value) -> Value {
    serde_json::from_str(
        data(selection)["allocation_request"]
            .as_str()
            .expect("string"),
    )
    .expect("allocation_request is JSON")
}

/// Placement's allocation requests (with mappings) for the same query, unlimited.
async fn placement_candidates(placement: &PlacementServer, query: &str) -> Vec<Value> {
    let answer = placement
        .call(
            reqwest::Method::GET,
            &format!("/allocation_candidates?{query}"),
            None,
        )
        .await;
    answer["allocation_requests"]
        .as_array()
        .expect("list")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_on_provider_trees_are_placed_and_claimed_on_placement_s_candidates() {
    let (placement, parasol, _db) = trees(true).await;
    let base = |n: u32| json!({"instance_uuids": [instance(n)], "vcpus": 1, "memory_mb": 512, "root_gb": 1});
    let mut magic = base(1);
    magic["extra_specs"] = json!({"resources1:CUSTOM_MAGIC": "1"});
    let mut port = base(2);
    port["requested_resources"] = json!([{"requester_id": PORT, "resources": {"CUSTOM_MAGIC": 1}}]);
    let mut full = base(3);
    full["extra_specs"] = json!({"resources1:CUSTOM_MAGIC": "1"});
    let mut granular = base(4);
    granular["extra_specs"] = json!({"resources1:VCPU": "2"});
    let mut unnumbered = base(5);
    unnumbered["extra_specs"] = json!({"resources:CUSTOM_MAGIC": "1"});
    let specs = specs(vec![magic, port, full, granular, unnumbered]).await;

    // The flavor's group "1" and then a port's group: only CN[0]'s child has CUSTOM_MAGIC.
    let root_part = demand(&[("VCPU", 1), ("MEMORY_MB", 512), ("DISK_GB", 1)]);
    for (i, group) in [(0, "1"), (1, PORT)] {
        let uuid = instance(i as u32 + 1);
        let (status, answer) = parasol.select(&specs[i], std::slice::from_ref(&uuid)).await;
        assert_eq!(status, 200, "{group}: {answer}");
        let chosen = &answer[0][0];
        assert_eq!(
            data(chosen)["compute_node_uuid"],
            CN[0],
            "{group}: {answer}"
        );
        assert_eq!(
            answer[0].as_array().unwrap().len(),
            1,
            "no other tree has the class"
        );
        let ar = allocation_request(chosen);
        assert_eq!(ar["mappings"][group], json!([CHILD]), "{group}: {ar}");
        assert_eq!(ar["mappings"][""], json!([CN[0]]), "{group}: {ar}");
        // Placement holds the candidate: the child's class on the child, the rest on the root.
        let held = placement.allocations(&uuid).await["allocations"].clone();
        assert_eq!(
            nonzero(&held[CHILD]["resources"]),
            demand(&[("CUSTOM_MAGIC", 1)])
        );
        assert_eq!(nonzero(&held[CN[0]]["resources"]), root_part);
        assert_eq!(held.as_object().unwrap().len(), 2, "{held}");
    }
    // The unnumbered group asks the child's class (Nova's `*WithNestedResourcesRequest`
    // tests): no host of the table has it, Placement's candidates place it.
    let (status, answer) = parasol.select(&specs[4], &[instance(5)]).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(data(&answer[0][0])["compute_node_uuid"], CN[0], "{answer}");
    let ar = allocation_request(&answer[0][0]);
    let mut unnumbered: Vec<String> = serde_json::from_value(ar["mappings"][""].clone()).unwrap();
    unnumbered.sort();
    assert_eq!(
        unnumbered,
        vec![CN[0].to_string(), CHILD.to_string()],
        "{ar}"
    );
    let held5 = placement.allocations(&instance(5)).await["allocations"].clone();
    assert_eq!(
        nonzero(&held5[CHILD]["resources"]),
        demand(&[("CUSTOM_MAGIC", 1)])
    );
    // The ledger holds the root's part of the three: what Placement's usages of the root show.
    assert_eq!(
        parasol.used().await[CN[0]],
        demand(&[("VCPU", 3), ("MEMORY_MB", 1536), ("DISK_GB", 3)])
    );
    assert!(placement_matches_ledger(&placement, &parasol).await);

    // No CUSTOM_MAGIC left: Placement has no candidate, NoValidHost saying so (not a shortage
    // of the filters).
    let (status, answer) = parasol.select(&specs[2], &[instance(3)]).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["class"], "NoValidHost", "{answer}");
    let reason = answer["error"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("no allocation candidate"), "{reason}");
    assert!(held(&placement, &instance(3)).await.0.is_empty());

    // A granular group on the roots: every host, each Selection with Placement's own candidate
    // for it (the first, as Nova takes), the chosen one claimed.
    let (status, answer) = parasol.select(&specs[3], &[instance(4)]).await;
    assert_eq!(status, 200, "{answer}");
    let list = answer[0].as_array().unwrap().clone();
    assert_eq!(list.len(), 3, "the pick and two alternates: {answer}");
    let query = "limit=1000&resources=DISK_GB%3A1%2CMEMORY_MB%3A512&resources1=VCPU%3A2\
                 &root_required=%21COMPUTE_STATUS_DISABLED";
    let theirs = placement_candidates(&placement, query).await;
    for selection in &list {
        let rp = data(selection)["compute_node_uuid"].as_str().unwrap();
        let ours = allocation_request(selection);
        let first = theirs
            .iter()
            .find(|c| c["allocations"].get(rp).is_some())
            .unwrap_or_else(|| panic!("Placement has no candidate on {rp}"));
        assert_eq!(
            &ours, first,
            "{rp}'s allocation_request is Placement's first for it"
        );
        assert_eq!(ours["mappings"]["1"], json!([rp]));
    }
    let chosen = data(&list[0])["compute_node_uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let (resources, providers) = held(&placement, &instance(4)).await;
    assert_eq!(
        resources,
        demand(&[("VCPU", 2), ("MEMORY_MB", 512), ("DISK_GB", 1)])
    );
    assert_eq!(providers, vec![chosen.clone()]);

    // The build fails there: Nova's own code removes the claim and claims the alternate's
    // allocation_request (mappings included) as the conductor does on a reschedule.
    let claimed = nova_side(
        vec!["claim".into(), placement.url.clone()],
        json!({"instance": instance(4), "selection": list[1], "project_id": "p0", "user_id": "u0"}),
    )
    .await;
    assert_eq!(claimed["claimed"], true, "{claimed}");
    let alternate = data(&list[1])["compute_node_uuid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(held(&placement, &instance(4)).await.1, vec![alternate]);
    eventually("the ledger repaired from Placement", || async {
        placement_matches_ledger(&placement, &parasol).await
    })
    .await;
    assert_within_capacity(&placement, &[CN[0], CN[1], CN[2], CHILD, OTHER_CHILD]).await;

    // Counted: four requests found candidates; the one without asked again after a sync.
    let counted = parasol.get("/v1/stats").await["provider_trees"].clone();
    assert_eq!(counted["found"], 4, "{counted}");
    assert!(counted["none"].as_u64().unwrap() >= 1, "{counted}");
    let metrics = parasol.metrics().await;
    assert!(
        metrics.contains("parasol_placement_candidates_total{kind=\"found\"} 4"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_trees_without_placement_claims_is_refused_naming_its_group() {
    let (_placement, parasol, _db) = trees(false).await;
    let mut magic =
        json!({"instance_uuids": [instance(1)], "vcpus": 1, "memory_mb": 512, "root_gb": 1});
    magic["extra_specs"] = json!({"resources1:CUSTOM_MAGIC": "1"});
    let mut port = magic.clone();
    port["extra_specs"] = json!({});
    port["requested_resources"] = json!([{"requester_id": PORT, "resources": {"CUSTOM_MAGIC": 1}}]);
    let specs = specs(vec![magic, port]).await;
    for (spec, group) in specs
        .iter()
        .zip(["request group '1'", &format!("request group '{PORT}'")])
    {
        let (status, answer) = parasol.select(spec, &[instance(1)]).await;
        assert_eq!(status, 409, "{answer}");
        let reason = answer["error"]["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("unsupported request") && reason.contains(group),
            "{reason}"
        );
        assert!(
            !reason.contains("Filter"),
            "not a capacity shortage: {reason}"
        );
    }
    let counted = parasol.get("/v1/stats").await["provider_trees"].clone();
    // Each call decided twice: NoValidHost asks for a sync and decides once more.
    assert_eq!(counted["unsupported"], 4, "{counted}");
    assert_eq!(counted["found"], 0, "{counted}");
    // A flat request still goes through on the same hosts.
    let flat = specs_flat().await;
    let (status, answer) = parasol.select(&flat, &[instance(2)]).await;
    assert_eq!(status, 200, "{answer}");
}

async fn specs_flat() -> Value {
    specs(vec![
        json!({"instance_uuids": [instance(2)], "vcpus": 1, "memory_mb": 512, "root_gb": 1}),
    ])
    .await
    .remove(0)
}
