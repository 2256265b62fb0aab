"""Maps and seeds Nova's cells with Nova's own code, then prints Nova's own view of them.

Usage: python seed.py NOVA_CONF SPEC_JSON

NOVA_CONF names the API database ([api_database] connection, schema made by
`nova-manage api_db sync`) and the [database] connection templated mappings are filled from.
SPEC_JSON is the scenario tests/nova_db.rs writes:

    {"cell0": "<url>",
     "cells": [{"name": "cell1", "database_connection": "<url or template>",
                "transport_url": "fake://cell1", "disabled": false,
                "services": [{"host": "cmp1", "disabled_reason": null, "forced_down": false,
                              "heartbeat_ago_s": 0, "service": true,
                              "nodes": [{"uuid": "...", "name": "cmp1.example.org",
                                         "hypervisor_type": "QEMU", "hypervisor_version": 8002000,
                                         "supported_instances": [["x86_64", "kvm", "hvm"]],
                                         "cpu_info": {...} or "", "numa": true, "pci_pools": 1,
                                         "metrics": {"cpu.percent": 29},
                                         "mapped": 1, "deleted": false}]}]}],
     "aggregates": [{"name": "rack-a", "metadata": {"availability_zone": "az-a"},
                     "hosts": ["cmp1"]}]}

Cells are mapped by nova-manage's own `cell_v2 map_cell0` and `cell_v2 create_cell`
(`CellV2Commands`, in this process). Services are created with `objects.Service(...).create()`
and heartbeat as Nova's DB servicegroup driver makes them (`report_count += 1; save()`), under
oslo's time override when the heartbeat is `heartbeat_ago_s` in the past; `"service": false`
leaves the nodes without a service. Compute nodes are made with `objects.ComputeNode(...).create()`
and deleted with `destroy()`; their `metrics` are stored as the resource tracker stores its
monitors' (`jsonutils.dumps(MonitorMetricList.to_list())`). The printed view is nova-scheduler's own: `HostManager`'s host
states for every enabled cell (`get_host_states_by_uuids(ctxt, None, None)`) and the
servicegroup API's `service_is_up` for each. Aggregates are made with
`objects.Aggregate(ctxt, name=..., metadata={...}).create()` and `add_host(host)`, and printed as
nova-scheduler loads them at start (`HostManager._init_aggregates`: `AggregateList.get_all`).
"""

import datetime
import json
import sys

from oslo_serialization import jsonutils
from oslo_utils import timeutils

from nova.cmd import manage
from nova import config
from nova import context
from nova import objects
from nova.scheduler import host_manager
from nova import servicegroup


def main(conf_path, spec_path):
    config.parse_args(['seed'], default_config_files=[conf_path])
    objects.register_all()
    with open(spec_path) as f:
        spec = json.load(f)
    commands = manage.CellV2Commands()
    commands.map_cell0(database_connection=spec['cell0'])
    for cell_spec in spec['cells']:
        code = commands.create_cell(
            name=cell_spec['name'], database_connection=cell_spec['database_connection'],
            transport_url=cell_spec['transport_url'], disabled=cell_spec['disabled'])
        if code != 0:
            sys.exit('create_cell %s failed: %s' % (cell_spec['name'], code))
    ctxt = context.get_admin_context()
    cells = {c.name: c for c in objects.CellMappingList.get_all(ctxt)}
    for cell_spec in spec['cells']:
        if not cell_spec.get('services'):
            continue
        with context.target_cell(ctxt, cells[cell_spec['name']]) as cctxt:
            for service_spec in cell_spec['services']:
                seed_service(cctxt, service_spec)
    for aggregate_spec in spec.get('aggregates', []):
        aggregate = objects.Aggregate(ctxt, name=aggregate_spec['name'],
                                      metadata=aggregate_spec['metadata'])
        aggregate.create()
        for host in aggregate_spec['hosts']:
            aggregate.add_host(host)
    view = nova_view(ctxt)
    view['cell_uuids'] = {name: c.uuid for name, c in cells.items()}
    print(json.dumps(view))


def seed_service(cctxt, spec):
    if not spec.get('service', True):
        for node_spec in spec['nodes']:
            seed_node(cctxt, spec['host'], None, node_spec)
        return
    ago = datetime.timedelta(seconds=spec.get('heartbeat_ago_s', 0))
    timeutils.set_time_override(timeutils.utcnow() - ago)
    try:
        service = objects.Service(cctxt, host=spec['host'], binary='nova-compute',
                                  topic='compute', report_count=0)
        service.create()
        if spec.get('reports', True):
            service.report_count += 1
            service.save()
    finally:
        timeutils.clear_time_override()
    if spec.get('disabled_reason'):
        service.disabled = True
        service.disabled_reason = spec['disabled_reason']
        service.save()
    if spec.get('forced_down'):
        service.forced_down = True
        service.save()
    for node_spec in spec['nodes']:
        seed_node(cctxt, service.host, service.id, node_spec)


def seed_node(cctxt, host, service_id, spec):
    numa = None
    if spec.get('numa'):
        cell = objects.NUMACell(
            id=0, cpuset=set(range(4)), pcpuset=set(), memory=8192, cpu_usage=0,
            memory_usage=0, pinned_cpus=set(), siblings=[set([i]) for i in range(4)],
            mempages=[], network_metadata=objects.NetworkMetadata(
                physnets=set(), tunneled=False))
        numa = objects.NUMATopology(cells=[cell])._to_json()
    pools = objects.PciDevicePoolList(objects=[
        objects.PciDevicePool(product_id='1520', vendor_id='8086', numa_node=0,
                              tags={'dev_type': 'type-VF'}, count=4)
        for _ in range(spec.get('pci_pools', 0))])
    node = objects.ComputeNode(
        cctxt, uuid=spec['uuid'], host=host, hypervisor_hostname=spec['name'],
        service_id=service_id, vcpus=16, memory_mb=65536, local_gb=1000, vcpus_used=0,
        memory_mb_used=0, local_gb_used=0, free_ram_mb=65536, free_disk_gb=1000,
        disk_available_least=1000, current_workload=0, running_vms=0,
        hypervisor_type=spec['hypervisor_type'],
        hypervisor_version=spec['hypervisor_version'],
        cpu_info=(spec['cpu_info'] if isinstance(spec['cpu_info'], str)
                  else json.dumps(spec['cpu_info'])),
        supported_hv_specs=[objects.HVSpec.from_list(s) for s in spec['supported_instances']],
        numa_topology=numa, pci_device_pools=pools, host_ip='192.0.2.10', stats={},
        cpu_allocation_ratio=16.0, ram_allocation_ratio=1.5, disk_allocation_ratio=1.0,
        mapped=spec.get('mapped', 0))
    if spec.get('metrics'):
        metrics = objects.MonitorMetricList(objects=[
            objects.MonitorMetric(name=name, value=value, timestamp=timeutils.utcnow(),
                                  source='libvirt.LibvirtDriver')
            for name, value in sorted(spec['metrics'].items())])
        node.metrics = jsonutils.dumps(metrics.to_list())
    node.create()
    if spec.get('deleted'):
        node.destroy()


def nova_view(ctxt):
    manager = host_manager.HostManager()
    groups = servicegroup.API()
    hosts = []
    for state in manager.get_host_states_by_uuids(ctxt, None, None):
        service = state.service
        hosts.append({
            'cell_uuid': state.cell_uuid,
            'host': state.host,
            'node': state.nodename,
            'uuid': state.uuid,
            'hypervisor_hostname': state.hypervisor_hostname,
            'hypervisor_type': state.hypervisor_type,
            'hypervisor_version': state.hypervisor_version,
            'supported_instances': state.supported_instances,
            'cpu_info': json.loads(state.cpu_info) if state.cpu_info else None,
            'numa': state.numa_topology is not None,
            'pci_pools': len(state.pci_stats.pools),
            'metrics': {m.name: m.value for m in state.metrics or []},
            'up': groups.service_is_up(service),
            'disabled': service['disabled'],
            'disabled_reason': service['disabled_reason'],
            'forced_down': service['forced_down'],
            'version': service['version'],
        })
    # HostManager() loaded them at its start (`_init_aggregates`: `AggregateList.get_all`).
    aggregates = [{'uuid': a.uuid, 'hosts': sorted(a.hosts), 'metadata': a.metadata}
                  for a in manager.aggs_by_id.values()]
    return {
        'aggregates': sorted(aggregates, key=lambda a: a['uuid']),
        'now_ms': int(timeutils.utcnow(with_timezone=True).timestamp() * 1000),
        'cells': sorted(manager.cells),
        'enabled_cells': sorted(c.uuid for c in manager.enabled_cells),
        'hosts': sorted(hosts, key=lambda h: h['node']),
    }


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
