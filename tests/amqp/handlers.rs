//! Every event type, published to the real broker as Nova (or an emulated host) sends it,
//! changes the ledger as specified.

use crate::broker::{isolated_amqp, spawn_service, Publisher, Service};
use crate::messages::*;
use crate::on_both_engines;
use parasol::domain::{HostState, Resources};

async fn host(s: &Service, name: &str) -> HostState {
    let hosts = s.ledger().read_hosts().await.expect("read hosts");
    hosts
        .into_iter()
        .find(|h| &**h.host() == name)
        .unwrap_or_else(|| panic!("host {name} registered"))
}

async fn used(s: &Service, name: &str) -> Resources {
    host(s, name).await.used
}

/// Where an instance's allocation is, and its size.
async fn allocation(s: &Service, instance: &str) -> Option<(String, Resources, bool)> {
    let a = s
        .ledger()
        .allocation(instance)
        .await
        .expect("read allocation")?;
    let hosts = s.ledger().read_hosts().await.expect("read hosts");
    let h = hosts
        .iter()
        .find(|h| h.id == a.host_id)
        .expect("host of allocation");
    Some((h.host().to_string(), a.demand, a.confirmed))
}

async fn start(engine: &str) -> (Service, Publisher) {
    let amqp = isolated_amqp();
    let s = spawn_service(engine, amqp.clone()).await;
    s.wait_connected().await;
    (s, Publisher::connect(&amqp).await)
}

async fn host_state_registers_updates_and_sets_up_and_disabled(engine: &str) {
    let (s, p) = start(engine).await;
    p.notify(&host_state("compute1", 8, 16384, 100, true, false))
        .await;
    s.wait_settled(1).await;
    let h = host(&s, "compute1").await;
    assert_eq!(*h.usable(), Resources::new(8, 16384, 100));
    assert!(h.up && !h.disabled);
    assert_eq!(&**h.uuid(), uuid_for("compute1"));
    p.notify(&host_state("compute1", 16, 32768, 200, false, true))
        .await;
    s.wait_settled(2).await;
    let h = host(&s, "compute1").await;
    assert_eq!(*h.usable(), Resources::new(16, 32768, 200));
    assert!(!h.up && h.disabled);
    assert_eq!(s.ledger().read_hosts().await.unwrap().len(), 1);
    assert_eq!(s.count("applied"), 2);
}
on_both_engines!(
    host_state_registers_updates_and_sets_up_and_disabled,
    super::host_state_registers_updates_and_sets_up_and_disabled
);

async fn create_end_confirms_a_claim_or_creates_the_allocation(engine: &str) {
    let (s, p) = start(engine).await;
    p.notify(&host_state("compute1", 8, 16384, 100, true, false))
        .await;
    s.wait_settled(1).await;
    let id = s
        .ledger()
        .host_id_by_name("compute1", None)
        .await
        .unwrap()
        .unwrap();
    let claimed = new_id();
    s.ledger()
        .claim(id, &claimed, &Resources::new(2, 2048, 20), 0)
        .await
        .unwrap();
    assert!(
        !allocation(&s, &claimed).await.unwrap().2,
        "a claim starts unconfirmed"
    );
    let elsewhere = new_id();
    p.notify(&instance_event(
        "instance.create.end",
        &claimed,
        "compute1",
        (2, 2048, 20),
    ))
    .await;
    p.notify(&instance_event(
        "instance.create.end",
        &elsewhere,
        "compute1",
        (1, 512, 1),
    ))
    .await;
    s.wait_settled(3).await;
    assert_eq!(
        allocation(&s, &claimed).await,
        Some(("compute1".into(), Resources::new(2, 2048, 20), true))
    );
    assert_eq!(
        allocation(&s, &elsewhere).await,
        Some(("compute1".into(), Resources::new(1, 512, 1), true))
    );
    let h = host(&s, "compute1").await;
    assert_eq!(h.used, Resources::new(3, 2560, 21));
    assert_eq!(h.num_instances, 2);
    // The confirm is not read back: the table is still what the ledger holds.
    s.ledger().reload_all().await.unwrap();
    assert_eq!(host(&s, "compute1").await, h);
}
on_both_engines!(
    create_end_confirms_a_claim_or_creates_the_allocation,
    super::create_end_confirms_a_claim_or_creates_the_allocation
);

async fn create_error_and_captured_delete_end_release(engine: &str) {
    let (s, p) = start(engine).await;
    p.notify(&host_state(CAPTURED_HOST, 8, 16384, 100, true, false))
        .await;
    let failed = new_id();
    p.notify(&instance_event(
        "instance.create.end",
        &failed,
        CAPTURED_HOST,
        (2, 2048, 20),
    ))
    .await;
    p.notify(&instance_event(
        "instance.create.end",
        CAPTURED_INSTANCE,
        CAPTURED_HOST,
        (1, 2048, 20),
    ))
    .await;
    s.wait_settled(3).await;
    assert_eq!(used(&s, CAPTURED_HOST).await, Resources::new(3, 4096, 40));
    p.notify(&instance_event(
        "instance.create.error",
        &failed,
        CAPTURED_HOST,
        (2, 2048, 20),
    ))
    .await;
    p.notify(&captured_delete_end()).await;
    s.wait_settled(5).await;
    assert_eq!(used(&s, CAPTURED_HOST).await, Resources::ZERO);
    assert_eq!(allocation(&s, &failed).await, None);
    assert_eq!(allocation(&s, CAPTURED_INSTANCE).await, None);
    assert_eq!(host(&s, CAPTURED_HOST).await.num_instances, 0);
    assert_eq!(s.count("applied"), 5);
}
on_both_engines!(
    create_error_and_captured_delete_end_release,
    super::create_error_and_captured_delete_end_release
);

async fn resize_moves_the_allocation_to_the_payload_flavor(engine: &str) {
    let (s, p) = start(engine).await;
    p.notify(&host_state("compute1", 16, 32768, 400, true, false))
        .await;
    let vm = new_id();
    let small = (1, 1024, 10);
    let big = (4, 8192, 80);
    p.notify(&instance_event(
        "instance.create.end",
        &vm,
        "compute1",
        small,
    ))
    .await;
    s.wait_settled(2).await;
    let steps = [
        ("instance.resize_finish.end", big),
        ("instance.resize_revert.end", small),
        ("instance.resize_finish.end", big),
        ("instance.resize_confirm.end", big),
    ];
    for (i, (event, flavor)) in steps.into_iter().enumerate() {
        p.notify(&instance_event(event, &vm, "compute1", flavor))
            .await;
        s.wait_settled(3 + i as u64).await;
        let want = Resources::new(flavor.0, flavor.1, flavor.2);
        assert_eq!(
            allocation(&s, &vm).await,
            Some(("compute1".into(), want, true)),
            "{event}"
        );
        assert_eq!(used(&s, "compute1").await, want, "{event}");
    }
    assert_eq!(host(&s, "compute1").await.num_instances, 1);
}
on_both_engines!(
    resize_moves_the_allocation_to_the_payload_flavor,
    super::resize_moves_the_allocation_to_the_payload_flavor
);

async fn live_migration_and_evacuation_move_the_allocation_to_the_payload_host(engine: &str) {
    let (s, p) = start(engine).await;
    p.notify(&host_state("src", 8, 16384, 100, true, false))
        .await;
    p.notify(&host_state("dst", 8, 16384, 100, true, false))
        .await;
    let vm = new_id();
    let f = (2, 4096, 20);
    let size = Resources::new(2, 4096, 20);
    p.notify(&instance_event("instance.create.end", &vm, "src", f))
        .await;
    p.notify(&instance_event(
        "instance.live_migration_post_dest.end",
        &vm,
        "dst",
        f,
    ))
    .await;
    s.wait_settled(4).await;
    assert_eq!(allocation(&s, &vm).await, Some(("dst".into(), size, true)));
    assert_eq!(used(&s, "src").await, Resources::ZERO);
    assert_eq!(used(&s, "dst").await, size);
    // nova-api's instance.evacuate starts an evacuation (its payload names the failed host
    // the instance is still on): nothing moves until the destination's rebuild.end.
    p.notify(&instance_event("instance.evacuate", &vm, "dst", f))
        .await;
    p.notify(&instance_event("instance.evacuate", &vm, "src", f))
        .await;
    s.wait_settled(6).await;
    assert_eq!(allocation(&s, &vm).await, Some(("dst".into(), size, true)));
    // The destination's rebuild.end still names the failed host (Nova sets the instance's
    // host in finish_evacuation, after it): the publisher says where the instance runs.
    let mut rebuild_end = instance_event("instance.rebuild.end", &vm, "dst", f);
    rebuild_end["publisher_id"] = serde_json::json!("nova-compute:src");
    p.notify(&rebuild_end).await;
    s.wait_settled(7).await;
    assert_eq!(allocation(&s, &vm).await, Some(("src".into(), size, true)));
    assert_eq!(used(&s, "src").await, size);
    assert_eq!(used(&s, "dst").await, Resources::ZERO);
}
on_both_engines!(
    live_migration_and_evacuation_move_the_allocation_to_the_payload_host,
    super::live_migration_and_evacuation_move_the_allocation_to_the_payload_host
);

async fn shelve_offload_releases_and_unshelve_places_again(engine: &str) {
    let (s, p) = start(engine).await;
    p.notify(&host_state("a", 8, 16384, 100, true, false)).await;
    p.notify(&host_state("b", 8, 16384, 100, true, false)).await;
    let vm = new_id();
    let f = (2, 2048, 20);
    p.notify(&instance_event("instance.create.end", &vm, "a", f))
        .await;
    p.notify(&instance_event("instance.shelve_offload.end", &vm, "a", f))
        .await;
    s.wait_settled(4).await;
    assert_eq!(allocation(&s, &vm).await, None);
    assert_eq!(used(&s, "a").await, Resources::ZERO);
    p.notify(&instance_event("instance.unshelve.end", &vm, "b", f))
        .await;
    s.wait_settled(5).await;
    assert_eq!(
        allocation(&s, &vm).await,
        Some(("b".into(), Resources::new(2, 2048, 20), true))
    );
    assert_eq!(used(&s, "a").await, Resources::ZERO);
}
on_both_engines!(
    shelve_offload_releases_and_unshelve_places_again,
    super::shelve_offload_releases_and_unshelve_places_again
);

async fn service_update_sets_disabled_and_forced_down(engine: &str) {
    let (s, p) = start(engine).await;
    p.notify(&host_state("compute1", 8, 16384, 100, true, false))
        .await;
    p.notify(&service_update("compute1", "nova-compute", true, true))
        .await;
    s.wait_settled(2).await;
    let h = host(&s, "compute1").await;
    assert!(h.disabled && h.forced_down);
    // Other services' updates say nothing about the compute host.
    p.notify(&service_update("compute1", "nova-conductor", false, false))
        .await;
    p.notify(&service_update("compute1", "nova-compute", false, false))
        .await;
    s.wait_settled(4).await;
    let h = host(&s, "compute1").await;
    assert!(!h.disabled && !h.forced_down);
    assert_eq!(s.count("unknown_event"), 1);
}
on_both_engines!(
    service_update_sets_disabled_and_forced_down,
    super::service_update_sets_disabled_and_forced_down
);

async fn captured_fanout_casts_reconcile_the_host_instance_set(engine: &str) {
    let (s, p) = start(engine).await;
    p.notify(&host_state(CAPTURED_HOST, 8, 16384, 100, true, false))
        .await;
    p.notify(&host_state("compute2", 8, 16384, 100, true, false))
        .await;
    let stray = new_id();
    let f = (1, 1024, 10);
    let size = Resources::new(1, 1024, 10);
    p.notify(&instance_event(
        "instance.create.end",
        CAPTURED_INSTANCE,
        "compute2",
        f,
    ))
    .await;
    p.notify(&instance_event(
        "instance.create.end",
        &stray,
        CAPTURED_HOST,
        f,
    ))
    .await;
    s.wait_settled(4).await;
    // update_instance_info names the captured instance on compute1: nova-compute sends it
    // with stale instance objects around moves (the source after a live migration), so it
    // moves nothing.
    p.fanout(&captured_update_instance_info()).await;
    s.wait_settled(5).await;
    assert_eq!(
        allocation(&s, CAPTURED_INSTANCE).await,
        Some(("compute2".into(), size, true))
    );
    // sync_instance_info (compute1's own database view, listed by `instance.host`) names the
    // captured instance and not the stray one: it releases and moves nothing (issue 40, item
    // 1: a build in flight and a move's source are listed by the wrong host for minutes).
    p.fanout(&captured_sync_instance_info()).await;
    s.wait_settled(6).await;
    assert_eq!(
        allocation(&s, CAPTURED_INSTANCE).await,
        Some(("compute2".into(), size, true))
    );
    assert_eq!(used(&s, "compute2").await, size);
    assert_eq!(
        allocation(&s, &stray).await,
        Some((CAPTURED_HOST.into(), size, true))
    );
    assert_eq!(used(&s, CAPTURED_HOST).await, size);
    // delete_instance_info: the captured instance left compute1, where the ledger does not
    // hold it: nothing changes. Once it is there, the same cast releases nothing either: it
    // releases only a move's source held there (nova-compute sends it from a host the
    // instance stays on after a resize to the same host); the instance's own allocation
    // goes with its delete notification.
    p.fanout(&captured_delete_instance_info()).await;
    s.wait_settled(7).await;
    assert_eq!(
        allocation(&s, CAPTURED_INSTANCE).await,
        Some(("compute2".into(), size, true))
    );
    p.notify(&instance_event(
        "instance.live_migration_post_dest.end",
        CAPTURED_INSTANCE,
        CAPTURED_HOST,
        f,
    ))
    .await;
    s.wait_settled(8).await;
    assert_eq!(used(&s, CAPTURED_HOST).await, Resources::new(2, 2048, 20));
    p.fanout(&fresh_cast(captured_delete_instance_info())).await;
    s.wait_settled(9).await;
    assert_eq!(
        allocation(&s, CAPTURED_INSTANCE).await,
        Some((CAPTURED_HOST.into(), size, true))
    );
    assert_eq!(used(&s, CAPTURED_HOST).await, Resources::new(2, 2048, 20));
    // The same cast again is a duplicate; its delete notification releases it.
    p.fanout(&captured_delete_instance_info()).await;
    p.notify(&instance_event(
        "instance.delete.end",
        CAPTURED_INSTANCE,
        CAPTURED_HOST,
        f,
    ))
    .await;
    s.wait_settled(11).await;
    assert_eq!(s.count("duplicate"), 1);
    assert_eq!(s.count("applied"), 10);
    assert_eq!(allocation(&s, CAPTURED_INSTANCE).await, None);
    assert_eq!(used(&s, CAPTURED_HOST).await, size);
}
on_both_engines!(
    captured_fanout_casts_reconcile_the_host_instance_set,
    super::captured_fanout_casts_reconcile_the_host_instance_set
);

async fn unknown_event_types_are_counted_and_acknowledged(engine: &str) {
    let (s, p) = start(engine).await;
    let mut power_off = instance_event("instance.power_off.end", &new_id(), "compute1", (1, 1, 1));
    power_off["payload"] = serde_json::json!({"anything": ["goes"]});
    p.notify(&power_off).await;
    p.notify(&instance_event(
        "instance.snapshot.end",
        &new_id(),
        "nowhere",
        (1, 1, 1),
    ))
    .await;
    let mut ping = captured_sync_instance_info();
    ping["method"] = serde_json::json!("ping");
    p.fanout(&ping).await;
    s.wait_settled(3).await;
    assert_eq!(s.count("unknown_event"), 3, "{}", s.counts());
    assert_eq!(p.ready(&s.amqp.queue).await, 0);
    let (_, stats) = s.get_json("/v1/stats").await;
    assert_eq!(stats["notifications"]["unknown_event"], 3);
    assert!(s.ledger().read_hosts().await.unwrap().is_empty());
}
on_both_engines!(
    unknown_event_types_are_counted_and_acknowledged,
    super::unknown_event_types_are_counted_and_acknowledged
);

/// nova-api's `update_aggregates` / `delete_aggregate` are fanout casts (`SchedulerAPI`
/// prepares them with `fanout=True`): they reach the scheduler's view of aggregates through
/// the consumer, once each.
async fn nova_api_s_aggregate_fanouts_reach_the_scheduler_s_aggregates(engine: &str) {
    let (s, p) = start(engine).await;
    let uuid = "6f1a2e4b-0000-4000-8000-00000000000a";
    let aggregate = |zone: &str| {
        serde_json::json!({"nova_object.name": "Aggregate", "nova_object.namespace": "nova",
            "nova_object.version": "1.3", "nova_object.data": {"id": 1, "uuid": uuid,
            "name": "zone", "hosts": ["compute1"], "metadata": {"availability_zone": zone}}})
    };
    let cast = |method: &str, args: serde_json::Value| {
        fresh_cast(
            serde_json::json!({"method": method, "args": args, "version": "4.1",
            "namespace": null, "_unique_id": ""}),
        )
    };
    let update = cast(
        "update_aggregates",
        serde_json::json!({"aggregates": [aggregate("zone2")]}),
    );
    p.fanout(&update).await;
    s.wait_settled(1).await;
    let known = s.handles.scheduler.cloud().aggregates();
    assert_eq!(known.len(), 1, "{known:?}");
    assert_eq!(known[0].hosts, ["compute1"]);
    assert_eq!(known[0].metadata["availability_zone"], "zone2");
    // A redelivered cast is a duplicate; a delete forgets the aggregate.
    p.fanout(&update).await;
    p.fanout(&cast(
        "delete_aggregate",
        serde_json::json!({"aggregate": aggregate("zone2")}),
    ))
    .await;
    s.wait_settled(3).await;
    assert!(s.handles.scheduler.cloud().aggregates().is_empty());
    assert_eq!(s.count("applied"), 2, "{}", s.counts());
    assert_eq!(s.count("duplicate"), 1, "{}", s.counts());
}
on_both_engines!(
    nova_api_s_aggregate_fanouts_reach_the_scheduler_s_aggregates,
    super::nova_api_s_aggregate_fanouts_reach_the_scheduler_s_aggregates
);

/// Measured usage through the consumer (issue 45): the host-state event's `usage` block and
/// Nova's `metrics.update` reach the table's soft state; a reading above the class's total
/// is refused and counted while its event's registration applies.
async fn measured_usage_reaches_the_table_and_a_bad_reading_is_refused(engine: &str) {
    use parasol::domain::{ClassId, UsageSource};
    let (s, p) = start(engine).await;
    p.notify(&host_state("compute1", 8, 16384, 100, true, false))
        .await;
    s.wait_settled(1).await;
    let vcpu = |s: &Service| {
        let h = s.ledger().table().by_name("compute1", None).expect("host");
        let m = h.measured.expect("a reading");
        let c = m.class(ClassId::VCPU).expect("VCPU").clone();
        (c.value, c.source)
    };
    assert_eq!(vcpu(&s), (0.5, UsageSource::HostState));

    let mut too_much = host_state("compute1", 8, 16384, 100, true, false);
    too_much["timestamp"] = serde_json::json!("2026-11-25 21:13:17.000000");
    too_much["payload"]["usage"] = serde_json::json!({"VCPU": 9});
    p.notify(&too_much).await;
    s.wait_settled(2).await;
    assert_eq!(
        s.count("applied"),
        2,
        "the registration applies: {}",
        s.counts()
    );
    assert_eq!(vcpu(&s), (0.5, UsageSource::HostState), "the reading stays");
    let (_, stats) = s.get_json("/v1/stats").await;
    assert_eq!(stats["usage"]["refused"]["above_total"], 1, "{stats}");

    let metric = serde_json::json!({"nova_object.name": "MetricPayload",
        "nova_object.namespace": "nova", "nova_object.version": "1.0",
        "nova_object.data": {"name": "cpu.percent", "value": 50, "numa_membw_values": null,
                             "timestamp": "2026-11-25T21:13:18Z", "source": "fake.FakeDriver"}});
    let metrics_update = serde_json::json!({"message_id": new_id(),
        "publisher_id": "nova-compute:compute1", "event_type": "metrics.update",
        "priority": "INFO", "timestamp": "2026-11-25 21:13:18.000000",
        "payload": {"nova_object.name": "MetricsPayload", "nova_object.namespace": "nova",
            "nova_object.version": "1.0",
            "nova_object.data": {"host": "compute1", "host_ip": "10.0.0.2",
                                 "nodename": "compute1", "metrics": [metric]}}});
    p.notify(&metrics_update).await;
    s.wait_settled(3).await;
    assert_eq!(vcpu(&s), (4.0, UsageSource::NovaMetrics), "50 % of 8 VCPU");
    assert_eq!(s.count("applied"), 3, "{}", s.counts());
    let (_, stats) = s.get_json("/v1/stats").await;
    assert_eq!(stats["usage"]["accepted"]["nova_metrics"], 1, "{stats}");
    assert_eq!(stats["usage"]["accepted"]["host_state"], 1, "{stats}");
}
on_both_engines!(
    measured_usage_reaches_the_table_and_a_bad_reading_is_refused,
    super::measured_usage_reaches_the_table_and_a_bad_reading_is_refused
);
