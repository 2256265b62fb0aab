"""A test's scheduler settings, as Nova's CONF holds them, written as Parasol's TOML (runs in
the venv).

Parasol's names: `[policy] enabled_filters`, `weight_classes`, `host_subset_size`, the
weighers' multipliers and the isolation filter's namespace (src/policy/config.rs); Nova's
`[scheduler]` request-filter options and `max_attempts` under the same names in Parasol's
`[scheduler]` (src/configuration/mod.rs). The tests' deterministic `HostNameWeigher` (a host →
weight table, `nova.tests.fixtures.HostNameWeigherFixture`) becomes Parasol's
`HostNameWeigher` with `[policy] host_name_weights`. What Nova always does outside its `enabled_filters` (forced and
ignored hosts, requested destinations, capacity in Placement, availability zones) are
filters in Parasol and always enabled. A Nova filter or weigher Parasol does not have is left
out (Parasol refuses unknown names) and recorded, as is every non-default option Parasol has
no equivalent for: the gap analysis reads those records.
"""

import importlib

# Parasol's built-in plugins (src/policy/registry.rs).
PARASOL_FILTERS = {"ForceHostsFilter", "IgnoreHostsFilter", "RequestedDestinationFilter",
                   "AvailabilityZoneFilter", "ComputeFilter", "CapacityFilter",
                   "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter",
                   "AggregateInstanceExtraSpecsFilter", "AggregateImagePropertiesIsolation",
                   "AggregateMultiTenancyIsolation", "AllHostsFilter", "ImagePropertiesFilter",
                   "ComputeCapabilitiesFilter", "AggregateIoOpsFilter",
                   "AggregateNumInstancesFilter", "AggregateTypeAffinityFilter",
                   "DifferentHostFilter", "IoOpsFilter", "IsolatedHostsFilter", "JsonFilter",
                   "MetricsFilter", "NumInstancesFilter", "SameHostFilter",
                   "SimpleCIDRAffinityFilter", "NUMATopologyFilter", "PciPassthroughFilter"}
PARASOL_WEIGHERS = ["RAMWeigher", "CPUWeigher", "DiskWeigher", "IoOpsWeigher",
                    "NumInstancesWeigher", "ServerGroupSoftAffinityWeigher",
                    "ServerGroupSoftAntiAffinityWeigher", "BuildFailureWeigher",
                    "CrossCellWeigher", "HypervisorVersionWeigher", "PCIWeigher",
                    "MetricsWeigher", "ImagePropertiesWeigher"]
# Nova does these whatever its enabled_filters say.
ALWAYS = ["ForceHostsFilter", "IgnoreHostsFilter", "RequestedDestinationFilter",
          "AvailabilityZoneFilter", "CapacityFilter"]
# Nova's weighers and the multiplier that switches each off at 0.
NOVA_WEIGHER_MULTIPLIER = {
    "RAMWeigher": "ram_weight_multiplier", "CPUWeigher": "cpu_weight_multiplier",
    "DiskWeigher": "disk_weight_multiplier", "IoOpsWeigher": "io_ops_weight_multiplier",
    "NumInstancesWeigher": "num_instances_weight_multiplier",
    "ServerGroupSoftAffinityWeigher": "soft_affinity_weight_multiplier",
    "ServerGroupSoftAntiAffinityWeigher": "soft_anti_affinity_weight_multiplier",
    "BuildFailureWeigher": "build_failure_weight_multiplier",
    "CrossCellWeigher": "cross_cell_move_weight_multiplier",
    "HypervisorVersionWeigher": "hypervisor_version_weight_multiplier",
    "ImagePropertiesWeigher": "image_props_weight_multiplier",
    "PCIWeigher": "pci_weight_multiplier",
}
ALL_NOVA_WEIGHERS = list(NOVA_WEIGHER_MULTIPLIER) + ["MetricsWeigher"]
# [filter_scheduler] options with the same name and meaning in Parasol's [policy].
SAME_NAME = ["host_subset_size", "ram_weight_multiplier", "cpu_weight_multiplier",
             "disk_weight_multiplier", "io_ops_weight_multiplier",
             "num_instances_weight_multiplier", "soft_affinity_weight_multiplier",
             "soft_anti_affinity_weight_multiplier", "build_failure_weight_multiplier",
             "cross_cell_move_weight_multiplier", "hypervisor_version_weight_multiplier",
             "pci_weight_multiplier"]
# [filter_scheduler] options of the filters, same names, types kept (Parasol's [policy]).
FILTER_OPTIONS = ["max_io_ops_per_host", "max_instances_per_host", "isolated_hosts",
                  "isolated_images", "restrict_isolated_hosts_to_isolated_images"]
# [filter_scheduler] options carried to [policy] when set (Nova's default None is Parasol's "").
ISOLATION_OPTIONS = ["aggregate_image_properties_isolation_namespace",
                     "aggregate_image_properties_isolation_separator",
                     "image_properties_default_architecture"]
# Nova's [scheduler] options with the same name and meaning in Parasol's [scheduler].
SCHEDULER_SAME_NAME = ["max_attempts", "limit_tenants_to_placement_aggregate",
                       "placement_aggregate_required_for_tenants",
                       "enable_isolated_aggregate_filtering",
                       "query_placement_for_image_type_support", "image_metadata_prefilter",
                       "max_placement_results"]
CARRIED = {("filter_scheduler", n) for n in SAME_NAME + ISOLATION_OPTIONS + FILTER_OPTIONS} | {
    ("filter_scheduler", "enabled_filters"), ("filter_scheduler", "weight_classes")} | {
    ("scheduler", n) for n in SCHEDULER_SAME_NAME}
# Options the harness itself or every Nova TestCase sets, not a test's choice.
IGNORED = set()


def _short(name):
    return name.rsplit(".", 1)[-1]


def non_default(conf, group):
    """{option: value} of `group` that differ from the option's default."""
    out = {}
    for name, info in conf._groups[group]._opts.items():
        value = getattr(conf[group], name)
        if value != info["opt"].default:
            out[name] = value
    return out


def _custom_weights(path):
    """The host → weight table of a test's own deterministic weigher, if it has one: Nova's
    fixture patches `HostNameWeigher.get_weights` (a mock, called on an instance), the
    regression tests' copies have a `_weights` class attribute."""
    try:
        module, cls = path.rsplit(".", 1)
        klass = getattr(importlib.import_module(module), cls)
        if hasattr(klass, "get_weights"):
            return dict(klass.__new__(klass).get_weights())
        for attr in ("_weights", "weights"):
            if isinstance(getattr(klass, attr, None), dict):
                return dict(getattr(klass, attr))
    except Exception as e:
        return {"unreadable": f"{type(e).__name__}: {e}"}
    return None


def translate(conf):
    """(policy dict for Parasol, record of what was carried and what was not)."""
    fs = conf.filter_scheduler
    record = {"filters_dropped": [], "weighers_dropped": [], "not_carried": {}}
    filters = list(ALWAYS)
    for name in fs.enabled_filters:
        short = _short(name)
        if short in PARASOL_FILTERS:
            if short not in filters:
                filters.append(short)
        else:
            record["filters_dropped"].append(short)
    weighers = []
    host_name_weights = {}
    for name in fs.weight_classes:
        short = _short(name)
        expanded = ALL_NOVA_WEIGHERS if short == "all_weighers" else [short]
        for w in expanded:
            if w in PARASOL_WEIGHERS:
                if w not in weighers:
                    weighers.append(w)
                continue
            multiplier = NOVA_WEIGHER_MULTIPLIER.get(w)
            value = getattr(fs, multiplier) if multiplier else None
            entry = {"name": w, "multiplier": value}
            if w not in NOVA_WEIGHER_MULTIPLIER and w != "MetricsWeigher":
                table = _custom_weights(name)
                if w == "HostNameWeigher" and _is_table(table):
                    # The test's host -> weight table, as Parasol's table weigher (Nova's
                    # BaseHostWeigher multiplier is 1.0 unless the class says otherwise).
                    host_name_weights.update({str(h): float(v) for h, v in table.items()})
                    if w not in weighers:
                        weighers.append(w)
                    continue
                entry["custom_weights"] = table
            if value != 0.0:
                record["weighers_dropped"].append(entry)
    policy = {
        "algorithm": "nova",
        "enabled_filters": filters,
        "host_subset_size": fs.host_subset_size,
        # Liveness comes from Placement syncs and service notifications, not heartbeats.
        "host_timeout_s": 0,
        "weight_classes": weighers,
    }
    for name in SAME_NAME[1:]:
        policy[name] = float(getattr(fs, name))
    for name in FILTER_OPTIONS:
        value = getattr(fs, name)
        policy[name] = list(value) if isinstance(value, (list, tuple)) else value
    if host_name_weights:
        policy["host_name_weights"] = host_name_weights
    for name in ISOLATION_OPTIONS:
        value = getattr(fs, name)
        if value is not None:
            policy[name] = str(value)
    # Nova's [compute] option: the order NUMATopologyFilter tries a host's NUMA cells in.
    policy["packing_host_numa_cells_allocation_strategy"] = bool(
        conf.compute.packing_host_numa_cells_allocation_strategy)
    # Nova's [DEFAULT] option: the zone of a host in no aggregate with a zone.
    policy["default_availability_zone"] = str(conf.default_availability_zone)
    for group in ("filter_scheduler", "scheduler"):
        for name, value in non_default(conf, group).items():
            if (group, name) not in CARRIED and (group, name) not in IGNORED:
                record["not_carried"][f"{group}.{name}"] = value
    return policy, record


def _is_table(table):
    return isinstance(table, dict) and "unreadable" not in table and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in table.values())


def scheduler_options(conf):
    """Nova's `[scheduler]` options Parasol's `[scheduler]` has under the same name (the
    request filters, `max_placement_results`, `max_attempts`), and `[workarounds]
    disable_fallback_pcpu_query`."""
    out = {name: getattr(conf.scheduler, name) for name in SCHEDULER_SAME_NAME}
    out["disable_fallback_pcpu_query"] = bool(conf.workarounds.disable_fallback_pcpu_query)
    return out


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML form for {v!r}")


def toml(sections):
    """TOML text of {section: {key: value}}."""
    lines = []
    for section, keys in sections.items():
        lines.append(f"[{section}]")
        lines.extend(f"{k} = {toml_value(v)}" for k, v in keys.items())
        lines.append("")
    return "\n".join(lines)
