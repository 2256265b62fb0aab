use super::*;
use crate::domain::Inventory;
use crate::domain::{ClassId, HostProfile};

fn row(id: i64, name: &str, vcpu: i64, used_vcpu: i64) -> HostRow {
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
    HostRow {
        id: HostId(id),
        profile: Arc::new(profile),
        used: Resources::new(used_vcpu, 0, 0),
        num_instances: 0,
        num_io_ops: 0,
        up: true,
        disabled: false,
        forced_down: false,
        last_seen_ms: 0,
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
}
