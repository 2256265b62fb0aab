"""Nova 34's side of ``tests/placement_claims.rs``, run in the cached nova virtualenv.

``spec``: reads a JSON list of request descriptions on stdin and prints, for each, the
``RequestSpec.obj_to_primitive()`` that nova-conductor sends to the scheduler, built with
Nova's own objects (flavor with extra specs, image properties, boot from volume, forced
hosts, ignored hosts, server group, requested destination aggregates, ``requested_resources``
groups as a port's resource request gives them, a flavor's PCI requests with the request
groups ``[filter_scheduler] pci_in_placement`` makes of them).

``cell``: reads ``{"url", "nodes": [{"host", "uuid", "pci_pools": [...]}]}`` and makes the
cell database at ``url`` with Nova's own migrations and objects (a service and a compute
node per node, the node's ``pci_stats`` from ``pci_pools``). Prints ``{"nodes": n}``.

``claim URL``: reads ``{"instance", "selection", "project_id", "user_id"}`` on stdin, where
``selection`` is a Selection primitive from Parasol's answer, and does what a reschedule does
with Nova's ``SchedulerReportClient`` against the Placement at URL: nova-compute removes the
failed host's claim (``delete_allocation_for_instance(force=True)``, as
``_do_build_and_run_instance``), then nova-conductor claims the alternate's
``allocation_request`` (``nova.scheduler.utils.claim_resources``, as
``ComputeTaskManager.build_instances``). Prints ``{"claimed": bool}``.
"""

import json
import sys

from nova import context as nova_context
from nova import objects

objects.register_all()


def flavor(d):
    return objects.Flavor(
        id=1, name=d.get('flavor', 'm1'), flavorid='f-' + d.get('flavor', 'm1'),
        vcpus=d.get('vcpus', 1), memory_mb=d.get('memory_mb', 512),
        root_gb=d.get('root_gb', 1), ephemeral_gb=d.get('ephemeral_gb', 0),
        swap=d.get('swap', 0), rxtx_factor=1.0, vcpu_weight=0, disabled=False,
        is_public=True, extra_specs=dict(d.get('extra_specs', {})),
        description=None)


def image(d):
    return objects.ImageMeta(
        id='155d900f-4e14-4e4c-a73d-069cbf4541e6', name='cirros',
        status='active', disk_format='qcow2', container_format='bare',
        min_ram=0, min_disk=0, size=1,
        properties=objects.ImageMetaProps(**d.get('image_props', {})))


def group(d):
    g = d.get('group')
    if not g:
        return None
    return objects.InstanceGroup(
        uuid=g['uuid'], name='g', policy=g['policy'], rules={},
        members=list(g.get('members', [])), hosts=list(g.get('hosts', [])),
        project_id=d.get('project_id', 'p0'), user_id=d.get('user_id', 'u0'))


def requested_group(g):
    # A port's (or device profile's) request group, as Neutron's resource request gives it.
    return objects.RequestGroup(
        requester_id=g['requester_id'], use_same_provider=True,
        resources=dict(g.get('resources', {})),
        required_traits=set(g.get('required_traits', [])),
        forbidden_traits=set(), aggregates=[], forbidden_aggregates=set(),
        in_tree=None, provider_uuids=[])


def spec(d):
    destination = None
    if d.get('member_of'):
        destination = objects.Destination(aggregates=list(d['member_of']))
    rs = objects.RequestSpec(
        flavor=flavor(d), image=image(d),
        project_id=d.get('project_id', 'p0'), user_id=d.get('user_id', 'u0'),
        availability_zone=None, num_instances=d.get('num_instances', 1),
        ignore_hosts=d.get('ignore_hosts'), force_hosts=d.get('force_hosts'),
        force_nodes=None,
        requested_destination=destination, retry=None, limits=None,
        instance_group=group(d), scheduler_hints={},
        instance_uuid=d['instance_uuids'][0], is_bfv=d.get('is_bfv', False),
        requested_resources=[requested_group(g)
                             for g in d.get('requested_resources', [])],
        security_groups=objects.SecurityGroupList(objects=[]),
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False),
        requested_networks=objects.NetworkRequestList(objects=[]))
    if d.get('pci_requests'):
        # A flavor's `pci_passthrough:alias`, with its request groups made by Nova's own
        # `generate_request_groups_from_pci_requests` as `[filter_scheduler]
        # pci_in_placement` makes them (one group of one device per device asked).
        rs.pci_requests = objects.InstancePCIRequests(requests=[
            objects.InstancePCIRequest(
                count=r['count'], spec=[dict(r['spec'])], alias_name=r['alias_name'],
                request_id=r['request_id'])
            for r in d['pci_requests']])
        import nova.conf
        nova.conf.CONF.set_override('pci_in_placement', True, group='filter_scheduler')
        rs.generate_request_groups_from_pci_requests()
    return rs.obj_to_primitive()


def cell(d):
    """A cell database made by Nova's own migrations, with each node's service and compute
    node (its PCI device pools as the resource tracker reports them) made by Nova's objects.
    """
    import nova.conf
    from nova import config
    from nova.db import migration
    # Before parse_args, which configures the database API from it.
    nova.conf.CONF.set_override('connection', d['url'], group='database')
    config.parse_args(['nova_side'], default_config_files=[])
    migration.db_sync(database='main')
    ctxt = nova_context.get_admin_context()
    for n in d['nodes']:
        service = objects.Service(ctxt, host=n['host'], binary='nova-compute',
                                  topic='compute', report_count=0)
        service.create()
        service.report_count += 1
        service.save()
        pools = objects.PciDevicePoolList(objects=[
            objects.PciDevicePool(vendor_id=p['vendor_id'], product_id=p['product_id'],
                                  numa_node=p.get('numa_node'), count=p['count'],
                                  tags=dict(p['tags']))
            for p in n.get('pci_pools', [])])
        objects.ComputeNode(
            ctxt, uuid=n['uuid'], host=n['host'], hypervisor_hostname=n['host'],
            service_id=service.id, vcpus=8, memory_mb=8192, local_gb=100, vcpus_used=0,
            memory_mb_used=0, local_gb_used=0, free_ram_mb=8192, free_disk_gb=100,
            disk_available_least=100, current_workload=0, running_vms=0,
            hypervisor_type='QEMU', hypervisor_version=8002000, cpu_info='',
            supported_hv_specs=[], numa_topology=None, pci_device_pools=pools,
            host_ip='192.0.2.10', stats={}, cpu_allocation_ratio=16.0,
            ram_allocation_ratio=1.5, disk_allocation_ratio=1.0, mapped=1).create()
    return {'nodes': len(d['nodes'])}


def claim(url, d):
    from keystoneauth1 import adapter, session, token_endpoint
    from nova.scheduler.client import report
    from nova.scheduler import utils

    sess = session.Session(auth=token_endpoint.Token(url, 'admin'))
    client = report.SchedulerReportClient(
        adapter=adapter.Adapter(sess, service_type='placement',
                                endpoint_override=url))
    selection = objects.Selection.obj_from_primitive(d['selection'])
    # The conductor's context is elevated (no policy check needed).
    ctx = nova_context.RequestContext(user_id=d['user_id'],
                                      project_id=d['project_id'], is_admin=True)
    rs = objects.RequestSpec(project_id=d['project_id'],
                             user_id=d['user_id'], scheduler_hints={})
    client.delete_allocation_for_instance(ctx, d['instance'], force=True)
    claimed = utils.claim_resources(
        ctx, client, rs, d['instance'],
        json.loads(selection.allocation_request),
        allocation_request_version=selection.allocation_request_version)
    return {'claimed': bool(claimed)}


def main():
    command = sys.argv[1]
    doc = json.load(sys.stdin)
    if command == 'spec':
        out = [spec(d) for d in doc]
    elif command == 'cell':
        out = cell(doc)
    elif command == 'claim':
        out = claim(sys.argv[2], doc)
    else:
        raise SystemExit('unknown command %r' % command)
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    main()
