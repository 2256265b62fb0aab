"""Nova 34's own filter classes on the cases tests/nova_filters.rs generates: reads the cases
(JSON) on stdin, prints one verdict list per case (JSON) on stdout. A filter that raises is
reported as "raise" (Parasol then passes no host)."""
import json
import sys

import nova.conf
from nova import objects
from nova.scheduler.filters import affinity_filter, io_ops_filter, isolated_hosts_filter
from nova.scheduler.filters import json_filter, num_instances_filter, type_filter
from nova.tests.unit.scheduler import fakes

objects.register_all()
CONF = nova.conf.CONF

FILTERS = {
    "IoOpsFilter": io_ops_filter.IoOpsFilter,
    "AggregateIoOpsFilter": io_ops_filter.AggregateIoOpsFilter,
    "NumInstancesFilter": num_instances_filter.NumInstancesFilter,
    "AggregateNumInstancesFilter": num_instances_filter.AggregateNumInstancesFilter,
    "AggregateTypeAffinityFilter": type_filter.AggregateTypeAffinityFilter,
    "IsolatedHostsFilter": isolated_hosts_filter.IsolatedHostsFilter,
    "JsonFilter": json_filter.JsonFilter,
    "DifferentHostFilter": affinity_filter.DifferentHostFilter,
    "SameHostFilter": affinity_filter.SameHostFilter,
}


def main():
    cases = json.load(sys.stdin)
    out = []
    for case in cases:
        cfg = case["config"]
        for key, value in cfg.items():
            CONF.set_override(key, value, group="filter_scheduler")
        spec_args = {"scheduler_hints": case["hints"] or None,
                     "flavor": objects.Flavor(name=case["flavor_name"])}
        # A volume-backed request's spec has image None (set, as Nova's API sets it).
        spec_args["image"] = (objects.ImageMeta(id=case["image_id"])
                              if case["image_id"] is not None else None)
        spec = objects.RequestSpec(**spec_args)
        verdicts = []
        for h in case["hosts"]:
            host = fakes.FakeHostState(h["host"], h["host"], {
                "num_io_ops": h["num_io_ops"], "num_instances": h["num_instances"],
                "free_ram_mb": h["free_ram_mb"], "free_disk_mb": h["free_disk_mb"]})
            host.aggregates = [objects.Aggregate(metadata=m) for m in h["aggregates"]]
            host.instances = {u: objects.Instance(uuid=u) for u in h["instances"]}
            row = {}
            for name, cls in FILTERS.items():
                try:
                    row[name] = bool(cls().host_passes(host, spec))
                except Exception:  # Nova's request fails: Parasol passes no host
                    row[name] = "raise"
            verdicts.append(row)
        out.append(verdicts)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
