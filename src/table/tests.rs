use super::*;
use crate::domain::Inventory;
use crate::domain::{ClassId, HostProfile};

fn row(id: i64, name: &str, vcpu: i64, used_vcpu: i64) -> HostState {
    let profile = HostProfile::new(
        name,
        name,
        &format!("uuid-{name}"),
        "nova",
        vec![
            (ClassId::VCPU, Inventory::of(vcpu)),
            (ClassId::MEMORY_MB, Inventory::of(1024)),
        ],
    );
    HostState {
        id: HostId(id),
        profile: Arc::new(profile),
        used: Resources::new(used_vcpu, 0, 0),
        num_instances: 0,
        num_io_ops: 0,
        up: true,
        disabled: false,
        forced_down: false,
        last_seen_ms: 0,
        measured: None,
    }
}

fn vcpus(n: i64) -> Resources {
    Resources::new(n, 0, 0)
}

#[test]
fn reserve_takes_room_once_and_refuses_what_no_longer_fits() {
    let t = HostTable::new();
    t.load([row(1, "a", 4, 0)]);
    assert_eq!(t.reserve(HostId(1), &vcpus(3)), Reserve::Reserved);
    assert_eq!(t.reserve(HostId(1), &vcpus(2)), Reserve::NoRoom);
    assert_eq!(t.reserve(HostId(1), &vcpus(1)), Reserve::Reserved);
    assert_eq!(
        t.reserve(HostId(9), &vcpus(1)),
        Reserve::NoRoom,
        "unknown host"
    );
    assert_eq!(t.get(HostId(1)).unwrap().used, vcpus(4));
    assert_eq!(t.pending(HostId(1)), Some(vcpus(4)));
}

#[test]
fn concurrent_reserves_never_take_the_same_room() {
    let t = Arc::new(HostTable::new());
    t.load([row(1, "a", 100, 0)]);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let t = t.clone();
            std::thread::spawn(move || {
                (0..50)
                    .filter(|_| t.reserve(HostId(1), &vcpus(1)) == Reserve::Reserved)
                    .count()
            })
        })
        .collect();
    let won: usize = threads.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(won, 100);
    assert_eq!(t.get(HostId(1)).unwrap().used, vcpus(100));
}

#[test]
fn undo_gives_the_room_back_and_finalize_keeps_it() {
    let t = HostTable::new();
    t.load([row(1, "a", 4, 0)]);
    t.reserve(HostId(1), &vcpus(2));
    t.reserve(HostId(1), &vcpus(1));
    t.undo(HostId(1), &vcpus(2));
    t.finalize(HostId(1), &vcpus(1));
    let h = t.get(HostId(1)).unwrap();
    assert_eq!((h.used, h.num_instances), (vcpus(1), 1));
    assert_eq!(t.pending(HostId(1)), Some(Resources::ZERO));
}

#[test]
fn a_reload_keeps_what_is_reserved_and_not_yet_committed() {
    let t = HostTable::new();
    t.load([row(1, "a", 8, 0)]);
    t.reserve(HostId(1), &vcpus(2));
    // The ledger now says 3 are used by others (another process, a notification).
    t.load([row(1, "a", 8, 3)]);
    assert_eq!(t.get(HostId(1)).unwrap().used, vcpus(5));
    t.finalize(HostId(1), &vcpus(2));
    // Once committed, the ledger's row holds it and nothing is pending.
    t.load([row(1, "a", 8, 5)]);
    assert_eq!(t.get(HostId(1)).unwrap().used, vcpus(5));
}

#[test]
fn only_committed_usage_over_capacity_counts_as_oversubscribed() {
    let t = HostTable::new();
    t.load([row(1, "a", 8, 0), row(2, "b", 8, 0)]);
    t.reserve(HostId(1), &vcpus(8));
    // Another process filled host a meanwhile: the table shows 16 of 8 until the ledger
    // declines the reservation, yet the ledger holds 8 of 8.
    t.load([row(1, "a", 8, 8)]);
    assert_eq!(t.get(HostId(1)).unwrap().used, vcpus(16));
    assert_eq!(t.oversubscribed(), 0);
    t.undo(HostId(1), &vcpus(8));
    // Host b's inventory lowered under what the ledger holds there: over.
    t.load([row(2, "b", 4, 6)]);
    assert_eq!(t.oversubscribed(), 1);
}

#[test]
fn hosts_are_found_by_uuid_and_by_service_host_and_node() {
    let t = HostTable::new();
    let mut ironic = row(2, "ironic", 1, 0);
    let mut p = (*ironic.profile).clone();
    p.node = Arc::from("node-b");
    ironic.profile = Arc::new(p);
    let mut ironic_a = row(1, "ironic", 1, 0);
    let mut p = (*ironic_a.profile).clone();
    p.node = Arc::from("node-a");
    p.uuid = Arc::from("uuid-node-a");
    ironic_a.profile = Arc::new(p);
    t.load([ironic, ironic_a]);
    assert_eq!(t.by_uuid("uuid-node-a").unwrap().id, HostId(1));
    assert_eq!(t.by_name("ironic", Some("node-b")).unwrap().id, HostId(2));
    assert_eq!(
        t.by_name("ironic", None).unwrap().id,
        HostId(1),
        "lowest id"
    );
    assert!(t.by_name("ironic", Some("node-c")).is_none());
    let gen = t.generation();
    // A rename moves the indexes.
    let mut renamed = row(2, "other", 1, 0);
    let mut p = (*renamed.profile).clone();
    p.node = Arc::from("node-b");
    renamed.profile = Arc::new(p);
    t.load([renamed]);
    assert!(t.generation() > gen);
    assert_eq!(t.by_name("other", None).unwrap().id, HostId(2));
    assert_eq!(t.by_name("ironic", None).unwrap().id, HostId(1));
    assert!(t.by_uuid("uuid-ironic").is_none());
    assert_eq!(t.by_uuid("uuid-other").unwrap().id, HostId(2));
    // A new capacity under the same names leaves the indexes as they are.
    let mut bigger = row(2, "other", 8, 0);
    let mut p = (*bigger.profile).clone();
    p.node = Arc::from("node-b");
    bigger.profile = Arc::new(p);
    let gen = t.generation();
    t.load([bigger]);
    assert!(t.generation() > gen);
    let found = t.by_uuid("uuid-other").unwrap();
    assert_eq!(
        (
            found.id,
            found.profile.inventory(ClassId::VCPU).map(|i| i.total)
        ),
        (HostId(2), Some(8))
    );
    assert_eq!(t.by_name("other", Some("node-b")).unwrap().id, HostId(2));
    assert_eq!(t.by_name("ironic", None).unwrap().id, HostId(1));
}

fn record(service_host: &str, up: bool, disabled: bool, forced_down: bool) -> NodeRecord {
    NodeRecord {
        service_host: Arc::from(service_host),
        facts: Arc::new(ComputeFacts {
            hypervisor_type: "QEMU".into(),
            cell_uuid: Some("cell-1".into()),
            ..Default::default()
        }),
        up,
        disabled,
        forced_down,
    }
}

#[test]
fn nova_s_records_rename_hosts_and_survive_reloads() {
    let t = HostTable::new();
    // As the Placement sync registers them: host = node = provider name.
    t.load([
        row(1, "c1.example.org", 4, 0),
        row(2, "bm1", 4, 0),
        row(3, "bm2", 4, 0),
    ]);
    let mut records = NodeRecords::default();
    let by = &mut records.by_uuid;
    by.insert(
        "uuid-c1.example.org".into(),
        record("c1", true, false, false),
    );
    by.insert("uuid-bm1".into(), record("ironic", true, false, false));
    by.insert("uuid-bm2".into(), record("ironic", true, true, false));
    let generation = t.generation();
    t.set_records(Arc::new(records));
    assert!(t.generation() > generation, "samplers see the new names");
    let c1 = t.by_name("c1", None).expect("found by service host");
    assert_eq!(
        (&*c1.profile.host, &*c1.profile.node),
        ("c1", "c1.example.org")
    );
    assert!(
        t.by_name("c1.example.org", None).is_none(),
        "the node name is no service host"
    );
    assert_eq!(t.ids_of_service("ironic"), [HostId(2), HostId(3)]);
    assert!(t.get(HostId(3)).expect("bm2").disabled);
    // A reload from the ledger (provider names, enabled) keeps what Nova's records say.
    t.load([row(1, "c1.example.org", 4, 1), row(3, "bm2", 4, 0)]);
    let c1 = t.get(HostId(1)).expect("c1");
    assert_eq!(&*c1.profile.host, "c1");
    assert_eq!(
        c1.profile
            .facts
            .as_ref()
            .and_then(|f| f.cell_uuid.as_deref()),
        Some("cell-1")
    );
    assert_eq!(c1.used, vcpus(1));
    assert!(t.get(HostId(3)).expect("bm2").disabled);
    // A heartbeat does not override the service state Nova's records give.
    t.set_liveness(HostId(3), true, false, false, 5);
    let bm2 = t.get(HostId(3)).expect("bm2");
    assert!(bm2.disabled && bm2.last_seen_ms == 5);
    // A provider Nova has no compute node record of is down (nova-scheduler skips it).
    t.load([row(4, "stranger", 4, 0)]);
    assert!(!t.get(HostId(4)).expect("loaded").up);
}

#[test]
fn nova_s_aggregate_membership_is_laid_over_every_load_by_service_host() {
    use crate::domain::{AggregateMembers, Aggregates};
    let t = HostTable::new();
    // The last sync read c1 in no aggregate (nova-api had not written Placement yet).
    t.load([row(1, "c1.example.org", 4, 0), row(2, "c2", 4, 0)]);
    let mut records = NodeRecords::default();
    records.by_uuid.insert(
        "uuid-c1.example.org".into(),
        record("c1", true, false, false),
    );
    records
        .by_uuid
        .insert("uuid-c2".into(), record("c2", true, false, false));
    t.set_records(Arc::new(records));
    let aggregates = |id: i64| {
        t.get(HostId(id))
            .expect("loaded")
            .profile
            .aggregates
            .names()
    };
    let only_c1 = vec!["c1".to_string()];
    let members = AggregateMembers::new([("t-only-c1", only_c1.as_slice())]);
    let generation = t.generation();
    t.set_members(Arc::new(members.clone()));
    assert!(
        t.generation() > generation,
        "samplers see the new membership"
    );
    assert_eq!(
        aggregates(1),
        ["t-only-c1"],
        "by Nova's service host, not the node"
    );
    assert!(aggregates(2).is_empty());
    rows_agree(&t);
    // A reload of the ledger's row (Placement's read, still without it) keeps Nova's.
    let generation = t.generation();
    t.load([row(1, "c1.example.org", 4, 1)]);
    assert_eq!(aggregates(1), ["t-only-c1"]);
    assert_eq!(t.generation(), generation, "nothing of the profile changed");
    // The same membership again changes nothing; a removal takes it away.
    t.set_members(Arc::new(members));
    t.set_members(Arc::new(AggregateMembers::new([("t-only-c1", &[][..])])));
    assert!(aggregates(1).is_empty());
    // A sync that read the host in it after nova-api removed it does not bring it back.
    let mut placement = row(1, "c1.example.org", 4, 1);
    Arc::make_mut(&mut placement.profile).aggregates = Aggregates::from_names(["t-only-c1"]);
    t.load([placement]);
    assert!(aggregates(1).is_empty());
}

#[test]
fn nodes_of_novas_records_not_loaded_yet_are_listed_until_loaded() {
    let t = HostTable::new();
    assert_eq!(t.nodes_not_loaded().2, Vec::<String>::new(), "no records");
    t.load([row(1, "a", 4, 0)]);
    let mut records = NodeRecords::default();
    records
        .by_uuid
        .insert("uuid-a".into(), record("a", true, false, false));
    records
        .by_uuid
        .insert("uuid-b".into(), record("b", true, false, false));
    t.set_records(Arc::new(records));
    assert_eq!(t.nodes_not_loaded().2, ["uuid-b"]);
    t.load([row(2, "b", 4, 0)]);
    assert_eq!(t.nodes_not_loaded().2, Vec::<String>::new());
}

/// Every scan row says what its host says.
fn rows_agree(t: &HostTable) {
    t.with_scan(|hosts, rows| {
        assert_eq!(hosts.len(), rows.len());
        for (h, r) in hosts.iter().zip(rows) {
            assert_eq!(*r, HostScan::of(h), "row of host {:?}", h.id);
        }
    });
}

#[test]
fn scan_rows_follow_every_change_of_their_host() {
    let t = HostTable::new();
    t.load([row(1, "a", 8, 0), row(2, "b", 8, 2)]);
    rows_agree(&t);
    assert_eq!(t.reserve(HostId(1), &vcpus(3)), Reserve::Reserved);
    rows_agree(&t);
    t.finalize(HostId(1), &vcpus(3));
    assert_eq!(t.reserve(HostId(2), &vcpus(1)), Reserve::Reserved);
    rows_agree(&t);
    t.undo(HostId(2), &vcpus(1));
    rows_agree(&t);
    t.remove(HostId(1), &vcpus(1));
    rows_agree(&t);
    t.set_liveness(HostId(2), false, true, true, 77);
    rows_agree(&t);
    t.load([row(2, "b", 16, 5), row(3, "c", 4, 0)]);
    rows_agree(&t);
    let mut records = NodeRecords {
        read: true,
        ..NodeRecords::default()
    };
    records
        .by_uuid
        .insert("uuid-a".into(), record("svc-a", false, true, false));
    t.set_records(Arc::new(records));
    rows_agree(&t);
    t.with_scan(|_, rows| assert_eq!(rows[0].flags & HostScan::SERVICE_OK, 0, "down"));
}

#[test]
fn an_announced_compute_service_is_pending_until_its_node_is_loaded_with_nova_s_record() {
    let t = HostTable::new();
    assert!(t.announced_not_loaded(0).is_empty(), "nothing announced");
    t.announce_service("c2", 1_000);
    t.announce_service("c3", 1_000);
    assert_eq!(t.announced_not_loaded(0), ["c2", "c3"]);
    // Nova's records are read: a provider loaded without its record is not yet the node.
    t.set_records(Arc::new(NodeRecords {
        read: true,
        ..NodeRecords::default()
    }));
    t.load([row(1, "c2", 4, 0)]);
    assert_eq!(t.announced_not_loaded(0), ["c2", "c3"]);
    let mut records = NodeRecords {
        read: true,
        ..NodeRecords::default()
    };
    records
        .by_uuid
        .insert("uuid-c2".into(), record("c2", true, false, false));
    t.set_records(Arc::new(records));
    assert_eq!(t.announced_not_loaded(0), ["c3"], "c2's node is loaded");
    // An announcement older than the window is forgotten, and stays forgotten.
    assert!(t.announced_not_loaded(1_001).is_empty());
    assert!(t.announced_not_loaded(0).is_empty());
}

#[test]
fn without_nova_s_records_an_announced_service_is_loaded_with_its_provider() {
    let t = HostTable::new();
    t.announce_service("c2", 5);
    assert_eq!(t.announced_not_loaded(0), ["c2"]);
    t.load([row(1, "c2", 4, 0)]);
    assert!(t.announced_not_loaded(0).is_empty());
}

#[test]
fn a_deleted_compute_service_is_no_longer_awaited() {
    let t = HostTable::new();
    t.announce_service("c2", 5);
    t.announce_service("c3", 5);
    t.forget_service("c2");
    t.forget_service("never-announced");
    assert_eq!(t.announced_not_loaded(0), ["c3"]);
}

#[test]
fn forgotten_hosts_leave_every_index_and_the_last_host_takes_their_slot() {
    let t = HostTable::new();
    t.load([row(1, "a", 4, 0), row(2, "b", 4, 1), row(3, "c", 8, 2)]);
    let before = t.generation();
    t.forget(&[HostId(1)]);
    assert!(t.generation() > before);
    assert_eq!(t.len(), 2);
    assert!(t.get(HostId(1)).is_none());
    assert!(t.by_uuid("uuid-a").is_none());
    assert!(t.by_name("a", None).is_none());
    let c = t.by_uuid("uuid-c").expect("the moved host by uuid");
    assert_eq!((c.id, c.used), (HostId(3), vcpus(2)));
    assert_eq!(t.by_name("c", Some("c")).unwrap().id, HostId(3));
    assert_eq!(t.get(HostId(2)).unwrap().used, vcpus(1));
    rows_agree(&t);
    // A host with a claim in flight stays until the claim settles.
    assert_eq!(t.reserve(HostId(3), &vcpus(1)), Reserve::Reserved);
    t.forget(&[HostId(3), HostId(99)]);
    assert!(t.get(HostId(3)).is_some());
    t.finalize(HostId(3), &vcpus(1));
    t.forget(&[HostId(3)]);
    assert_eq!(t.ids(), vec![HostId(2)]);
    rows_agree(&t);
    t.forget(&[HostId(2)]);
    assert!(t.is_empty());
}
