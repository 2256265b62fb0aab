"""Flex's allocation ratio against nova-compute's own resource tracker (issue 45 item 3,
`[flex] manage_allocation_ratio`, docs/flex.md "Placement's allocation ratio").

One compute of the fake driver (10 VCPU; nova.conf's `cpu_allocation_ratio` unset, so Placement
starts at Nova 34's `initial_cpu_allocation_ratio` 4.0), four 1-VCPU servers booted by Parasol,
and measured usage the test injects as Nova's `metrics.update` (10 % of 10 VCPU: 1 used by 4
allocated, u = 0.25). With P = 1.5, Flex wants 1 / (1.5 × 0.25) = 2.67 and writes it to
Placement. Then nova-compute's `update_available_resource`:

- keeps 2.67 when it must write the inventory (`reserved_host_cpus` changed) from its stale
  provider cache holding 4.0: its write conflicts on the generation Placement moved past, it
  reads Placement again and writes 2.67 with the new `reserved` (`virt/driver.py`
  `_get_allocation_ratios` keeps an inventory's ratio while nova.conf sets none);
- writes nothing when nothing changed;
- keeps 2.67 after its provider cache is dropped (read afresh, written back unchanged).

With nova.conf's `cpu_allocation_ratio = 2.0` set afterwards, Nova's next update writes 2.0:
Parasol sees a ratio it did not write, counts it as `overridden` and leaves it alone.

Runs only in `parasol` mode (the running Parasol is what is tested).
"""

import time

import requests
from nova.tests.functional import integrated_helpers

from nova_functional import swap
from nova_functional.parasol_tests import messages
from nova_functional.state import Current

FLEX_RATIO = round(1 / (1.5 * 0.25), 2)
DRIVER = "fake.MediumFakeDriver"


class FlexAllocationRatioTest(integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = DRIVER
    microversion = "2.74"
    parasol_sections = {
        "flex": {"enabled": True, "manage_allocation_ratio": True,
                 "allocation_ratio_bounds": [{"class": "VCPU", "min": 1.0, "max": 3.0}]},
    }

    def setUp(self):
        super().setUp()
        if Current.mode != "parasol":
            self.skipTest("tests the running Parasol")
        self.compute = self._start_compute("host1")
        self.rp_uuid = self._get_provider_uuid_by_host("host1")
        flavor = next(f for f in self.api.get_flavors() if f["vcpus"] == 1)
        for n in range(4):
            body = self._build_server(name=f"s{n}", flavor_id=flavor["id"], networks="none")
            self._wait_for_state_change(self.api.post_server({"server": body}), "ACTIVE")

    def _vcpu(self):
        return self._get_provider_inventory(self.rp_uuid)["VCPU"]

    def _stats(self):
        r = requests.get(f"{swap.parasol_url()}/v1/stats", timeout=10)
        self.assertEqual(200, r.status_code, r.text)
        return r.json()["flex"]["allocation_ratio"]

    def _eventually(self, what, check, timeout=30):
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                self.fail(f"timed out waiting for {what}: VCPU {self._vcpu()}, "
                          f"Flex {self._stats()}")
            time.sleep(0.1)

    def _flex_sets_its_ratio(self):
        self.assertEqual(4.0, self._vcpu()["allocation_ratio"], "Nova's initial ratio")
        messages.notify(self, messages.metrics_update("host1", 10, DRIVER))
        self._eventually("Flex's ratio in Placement",
                         lambda: self._vcpu()["allocation_ratio"] == FLEX_RATIO)

    def _periodic_keeps(self, reserved=0):
        self._run_periodics(raise_on_error=True)
        vcpu = self._vcpu()
        self.assertEqual(FLEX_RATIO, vcpu["allocation_ratio"], vcpu)
        self.assertEqual(reserved, vcpu["reserved"], vcpu)

    def test_update_available_resource_keeps_flexs_ratio(self):
        self._flex_sets_its_ratio()
        # Nova's provider cache still says 4.0, at a generation Placement has moved past
        # (Flex's write, the servers' allocations). An inventory Nova must write: its write
        # conflicts, it reads Placement again and keeps Flex's ratio with its new reserved.
        self.flags(reserved_host_cpus=1)
        self._periodic_keeps(reserved=1)
        # Nothing to write: nothing written.
        self._periodic_keeps(reserved=1)
        # Read afresh from Placement: written back unchanged.
        self.compute.manager.rt.reportclient.clear_provider_cache()
        self._periodic_keeps(reserved=1)
        # Parasol's next syncs: it wrote nothing more and saw nothing overridden.
        time.sleep(1.0)
        stats = self._stats()
        self.assertEqual(1, stats["writes"], stats)
        self.assertEqual(0, stats["overridden"], stats)
        self.assertEqual(0, stats["failures"], stats)
        self.assertEqual(FLEX_RATIO, self._vcpu()["allocation_ratio"])

    def test_a_ratio_set_in_nova_conf_is_left_alone(self):
        self._flex_sets_its_ratio()
        self.flags(cpu_allocation_ratio=2.0)
        self.compute.manager.rt.reportclient.clear_provider_cache()
        self._run_periodics(raise_on_error=True)
        self.assertEqual(2.0, self._vcpu()["allocation_ratio"])
        self._eventually("the override seen", lambda: self._stats()["overridden"] == 1)
        # More idle usage would raise Flex's ratio: it stays Nova's.
        time.sleep(1.1)
        messages.notify(self, messages.metrics_update("host1", 1, DRIVER))
        time.sleep(1.0)
        self.assertEqual(2.0, self._vcpu()["allocation_ratio"])
        self.assertEqual(1, self._stats()["writes"])
