"""The named sets of tests (patterns relative to `nova.tests.functional`)."""

# Issue 14's visible set.
VISIBLE = [
    "test_server_group",
    "test_aggregates",
    "test_availability_zones",
    "test_scheduler",
    "test_servers.ServersTest",
    "test_servers.ServerMovingTests",
    "test_servers.ServerRescheduleTests",
    "test_servers.TraitsBasedSchedulingTest",
    "test_servers.ConsumerGenerationConflictTest",
    "test_servers.VolumeBackedServerTest",
]

# The fast subset `tests/nova_functional.rs` runs in `parasol` mode (issue 14: boot,
# multi-create, anti-affinity, aggregate filter, resize, reschedule; under 5 minutes).
FAST = [
    "test_servers.ServersTest.test_create_and_delete_server",
    "test_servers.ServersTest.test_create_multiple_servers",
    "test_server_group.ServerGroupTestV21.test_boot_servers_with_anti_affinity",
    "test_scheduler.AggregateInstanceExtraSpecsFilterTestCase.test_filter_passes",
    "test_scheduler.AggregateInstanceExtraSpecsFilterTestCase.test_filter_rejects",
    "test_servers.ServerMovingTests.test_resize_confirm",
    "test_servers.ServerRescheduleTests.test_rescheduling_when_booting_instance",
]

SUITES = {"visible": VISIBLE, "fast": FAST}


def by_name(name):
    return list(SUITES[name])
