"""Nova 34's own MetricsFilter and MetricsWeigher (with Nova's weight handler) on the cases
tests/nova_filters.rs generates: reads the cases (JSON) on stdin, prints per case each
host's filter verdict and the final weights of the hosts that pass, or "raise" when Nova's
weigher raises (ComputeHostMetricNotFound)."""
import json
import sys

import nova.conf
from nova import exception
from nova import objects
from nova.scheduler import weights
from nova.scheduler.filters import metrics_filter
from nova.scheduler.weights import metrics
from nova.tests.unit.scheduler import fakes

objects.register_all()
CONF = nova.conf.CONF


def main():
    out = []
    for case in json.load(sys.stdin):
        for key, value in case["config"].items():
            CONF.set_override(key, value, group="metrics")
        hosts = []
        for h in case["hosts"]:
            # What Nova's host manager reads from compute_nodes.metrics: the metrics the
            # node reported (Parasol's expired ones are not there).
            listed = objects.MonitorMetricList(objects=[
                objects.MonitorMetric(name=name, value=value, source="fake")
                for name, value in h["metrics"]])
            host = fakes.FakeHostState(h["host"], h["host"], {"metrics": listed})
            host.aggregates = []
            hosts.append(host)
        verdicts = {}
        if case["filter"]:
            f = metrics_filter.MetricsFilter()
            verdicts = {h.host: bool(f.host_passes(h, None)) for h in hosts}
            hosts = [h for h in hosts if verdicts[h.host]]
        try:
            weighed = weights.HostWeightHandler().get_weighed_objects(
                [metrics.MetricsWeigher()], hosts, None)
            result = {w.obj.host: w.weight for w in weighed}
        except exception.ComputeHostMetricNotFound:
            result = "raise"
        out.append({"verdicts": verdicts, "weights": result})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
