"""Nova's own resource request for RequestSpecs built with Nova's own objects.

Run by ``tests/nova_translation.rs`` in the cached nova virtualenv (the pinned
``tests/nova_functional/requirements.txt``). It sets up a real Nova API database and
one cell database on SQLite files in ``argv[1]`` (Nova's alembic migrations),
creates compute nodes, host mappings, services and host aggregates with Nova's
objects, then for every case builds a ``RequestSpec`` and runs what
nova-scheduler runs before asking Placement (``SchedulerManager.select_destinations``):
``request_filter.process_reqspec`` and ``utils.resources_from_request_spec``, the
second time with ``enable_pinning_translate=False`` as the PCPU fallback query.

It prints one JSON document: the world (aggregates with metadata and hosts,
compute nodes), and per case the options, the spec's ``obj_to_primitive()``
*before* the request filters ran, and Nova's result. A last section runs Nova's
API extra-spec validators on malformed extra specs. Its output is committed as
``tests/fixtures/nova_translation.json`` (regenerate with
``python golden.py <empty dir> > tests/fixtures/nova_translation.json`` in the
venv); the live test checks that the fixture still says what Nova says.
"""

import copy
import json
import os
import sys
import uuid

WORKDIR = os.path.abspath(sys.argv[1])
CONF_FILE = os.path.join(WORKDIR, 'nova.conf')
with open(CONF_FILE, 'w') as f:
    f.write(
        "[DEFAULT]\ntransport_url = fake:/\n"
        "[database]\nconnection = sqlite:///%s/cell1.db\n"
        "[api_database]\nconnection = sqlite:///%s/api.db\n"
        "[filter_scheduler]\ntrack_instance_changes = false\n"
        % (WORKDIR, WORKDIR))

from nova import config  # noqa: E402

config.parse_args(['golden', '--config-file', CONF_FILE], init_rpc=True)

import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.db import migration  # noqa: E402
from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.api.validation.extra_specs import validators  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import request_filter  # noqa: E402
from nova.scheduler import utils  # noqa: E402

CONF = nova.conf.CONF
objects.register_all()
validators.load_validators()

NS = uuid.UUID('6ba7b811-9dad-11d1-80b4-00c04fd430c8')


def u(name):
    """A fixed uuid per name, so runs are reproducible."""
    return str(uuid.uuid5(NS, 'parasol-golden-' + name))


# --- the world -------------------------------------------------------------

# (host, node) of every compute node: h2 is an Ironic-style service of two nodes.
NODES = [('h1', 'n1'), ('h2', 'n2a'), ('h2', 'n2b'), ('h3', 'n3')]

# name -> metadata; every aggregate holds h1 (membership is Placement's concern,
# the request filters read only uuids and metadata).
AGGREGATES = {
    'tenant-p1': {'filter_tenant_id': 'p1'},
    'tenant-p1-second-key': {'filter_tenant_id2': 'p1', 'other': 'x'},
    'tenant-p2-az2': {'filter_tenant_id': 'p2', 'availability_zone': 'az2'},
    'owner-p1-not-a-tenant-key': {'owner': 'p1'},
    'az1': {'availability_zone': 'az1'},
    'az1-again': {'availability_zone': 'az1', 'ssd': 'true'},
    'iso-ssd': {'trait:CUSTOM_SSD': 'required'},
    'iso-gpu-ssd': {'trait:CUSTOM_GPU': 'required',
                    'trait:CUSTOM_SSD': 'required'},
    'iso-avx2': {'trait:HW_CPU_X86_AVX2': 'required'},
    'trait-forbidden-is-not-isolating': {'trait:CUSTOM_SLOW': 'forbidden'},
    'plain': {},
}


def setup_world(ctxt):
    migration.db_sync(database='api')
    migration.db_sync(database='main')
    cell = objects.CellMapping(
        ctxt, uuid=u('cell1'), name='cell1', transport_url='fake:/',
        database_connection=CONF.database.connection)
    cell.create()
    with nova_context.target_cell(ctxt, cell) as cctxt:
        for host, node in NODES:
            objects.ComputeNode(
                cctxt, host=host, hypervisor_hostname=node, uuid=u(node),
                vcpus=8, memory_mb=8192, local_gb=100, vcpus_used=0,
                memory_mb_used=0, local_gb_used=0, hypervisor_type='fake',
                hypervisor_version=1, cpu_info='{}').create()
    for host in sorted({h for h, _ in NODES}):
        objects.HostMapping(ctxt, host=host, cell_mapping=cell).create()
    for name, metadata in AGGREGATES.items():
        agg = objects.Aggregate(ctxt, name=name, uuid=u('agg-' + name),
                                metadata=metadata)
        agg.create()
        agg.add_host('h1')
    return cell


def add_compute_services(ctxt, cell):
    """nova-compute services at this Nova's SERVICE_VERSION (OWNER_NOVA on)."""
    with nova_context.target_cell(ctxt, cell) as cctxt:
        for host in sorted({h for h, _ in NODES}):
            objects.Service(cctxt, host=host, binary='nova-compute',
                            topic='compute').create()


def world(ctxt, cell):
    aggs = objects.AggregateList.get_all(ctxt)
    with nova_context.target_cell(ctxt, cell) as cctxt:
        nodes = objects.ComputeNodeList.get_all(cctxt)
    return {
        'aggregates': sorted(
            ({'uuid': a.uuid, 'name': a.name, 'metadata': dict(a.metadata),
              'hosts': sorted(a.hosts)} for a in aggs),
            key=lambda a: a['name']),
        'compute_nodes': sorted(
            ({'host': n.host, 'node': n.hypervisor_hostname, 'uuid': n.uuid}
             for n in nodes), key=lambda n: n['node']),
    }


# --- building specs --------------------------------------------------------

def flavor(vcpus=1, memory_mb=2048, root_gb=20, ephemeral_gb=0, swap=0,
           extra_specs=None, name='m1.small'):
    return objects.Flavor(
        id=1, name=name, flavorid='f-' + name, vcpus=vcpus,
        memory_mb=memory_mb, root_gb=root_gb, ephemeral_gb=ephemeral_gb,
        swap=swap, rxtx_factor=1.0, vcpu_weight=0, disabled=False,
        is_public=True, extra_specs=dict(extra_specs or {}), description=None)


def image(disk_format='qcow2', **props):
    return objects.ImageMeta(
        id=u('image'), name='cirros', status='active', disk_format=disk_format,
        container_format='bare', min_ram=0, min_disk=0, size=1,
        properties=objects.ImageMetaProps(**props))


def spec(fl=None, img=None, project_id='p0', availability_zone=None,
         destination=None, force_hosts=None, force_nodes=None, hints=None,
         is_bfv=False, requested_resources=None, root_required=None,
         root_forbidden=None, same_subtree=None, num_instances=1):
    rs = objects.RequestSpec(
        flavor=fl or flavor(), image=img if img is not None else image(),
        project_id=project_id, user_id='u0',
        availability_zone=availability_zone, num_instances=num_instances,
        ignore_hosts=None, force_hosts=force_hosts, force_nodes=force_nodes,
        requested_destination=destination, retry=None, limits=None,
        instance_group=None, scheduler_hints=hints or {},
        instance_uuid=u('instance'), is_bfv=is_bfv,
        requested_resources=requested_resources or [],
        security_groups=objects.SecurityGroupList(objects=[]),
        network_metadata=objects.NetworkMetadata(physnets=set(),
                                                 tunneled=False),
        requested_networks=objects.NetworkRequestList(objects=[]))
    rs.request_level_params = objects.RequestLevelParams(
        root_required=set(root_required or []),
        root_forbidden=set(root_forbidden or []),
        same_subtree=same_subtree or [])
    return rs


def dest(**kw):
    d = objects.Destination()
    for k, v in kw.items():
        setattr(d, k, v)
    return d


def port_group():
    return objects.RequestGroup(
        requester_id=u('port'), use_same_provider=True,
        resources={'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
        required_traits={'CUSTOM_PHYSNET_A'})


TENANT = {'limit_tenants_to_placement_aggregate': True}
TENANT_REQUIRED = dict(TENANT, placement_aggregate_required_for_tenants=True)
ISOLATE = {'enable_isolated_aggregate_filtering': True}
IMAGE_TYPE = {'query_placement_for_image_type_support': True}
IMAGE_PREFILTER = {'image_metadata_prefilter': True}
ALL_FILTERS = dict(TENANT, **ISOLATE, **IMAGE_TYPE, **IMAGE_PREFILTER)


def cases():
    """(name, options, spec, parasol_unsupported) for every case."""
    F = flavor
    return [
        ('plain m1.small', {}, spec(), None),
        ('ephemeral and 1 MB of swap round up to a GB', {},
         spec(F(root_gb=10, ephemeral_gb=5, swap=1)), None),
        ('swap of 1025 MB is two GB', {}, spec(F(swap=1025)), None),
        ('boot from volume drops root_gb only', {},
         spec(F(root_gb=20, ephemeral_gb=5, swap=512), is_bfv=True), None),
        ('boot from volume without local disk asks no DISK_GB', {},
         spec(F(root_gb=20), is_bfv=True), None),
        ('a zero-sized flavor asks nothing but what is set', {},
         spec(F(vcpus=0, memory_mb=0, root_gb=0)), None),
        ('resources:VCPU overrides the flavor', {},
         spec(F(vcpus=2, extra_specs={'resources:VCPU': '4'})), None),
        ('resources:MEMORY_MB=0 removes memory', {},
         spec(F(extra_specs={'resources:MEMORY_MB': '0'})), None),
        ('resources:DISK_GB=0 removes disk', {},
         spec(F(ephemeral_gb=3, extra_specs={'resources:DISK_GB': '0'})),
         None),
        ('an Ironic flavor: one custom class, the standard ones zeroed', {},
         spec(F(extra_specs={'resources:CUSTOM_BAREMETAL_GOLD': '1',
                             'resources:VCPU': '0',
                             'resources:MEMORY_MB': '0',
                             'resources:DISK_GB': '0'})), None),
        ('a standard class beyond the three: VGPU', {},
         spec(F(extra_specs={'resources:VGPU': '1'})), None),
        ('a custom class next to the flavor sizes', {},
         spec(F(extra_specs={'resources:CUSTOM_LICENSE': '2'})), None),
        ('an amount written with spaces and a plus sign', {},
         spec(F(extra_specs={'resources:VCPU': ' +3 '})), None),
        ('trait required', {},
         spec(F(extra_specs={'trait:HW_CPU_X86_AVX2': 'required'})), None),
        ('trait forbidden', {},
         spec(F(extra_specs={'trait:CUSTOM_SLOW': 'forbidden'})), None),
        ('traits required and forbidden together', {},
         spec(F(extra_specs={'trait:HW_CPU_X86_AVX2': 'required',
                             'trait:CUSTOM_SSD': 'required',
                             'trait:CUSTOM_SLOW': 'forbidden'})), None),
        ('an unknown trait is passed on for the scheduler to refuse', {},
         spec(F(extra_specs={'trait:CUSTOM_NOBODY_HAS_THIS': 'required'})),
         None),
        ('hw:cpu_policy=dedicated asks PCPU', {},
         spec(F(vcpus=4, extra_specs={'hw:cpu_policy': 'dedicated'})), None),
        ('image hw_cpu_policy=dedicated asks PCPU', {},
         spec(F(vcpus=2), image(hw_cpu_policy='dedicated')), None),
        ('hw:cpu_policy=shared asks VCPU', {},
         spec(F(vcpus=2, extra_specs={'hw:cpu_policy': 'shared'})), None),
        ('image shared under a flavor without policy', {},
         spec(F(vcpus=2), image(hw_cpu_policy='shared')), None),
        ('flavor dedicated wins over image shared', {},
         spec(F(vcpus=2, extra_specs={'hw:cpu_policy': 'dedicated'}),
              image(hw_cpu_policy='shared')), None),
        ('dedicated with thread policy isolate forbids hyperthreading', {},
         spec(F(vcpus=2, extra_specs={'hw:cpu_policy': 'dedicated',
                                      'hw:cpu_thread_policy': 'isolate'})),
         None),
        ('dedicated with image thread policy require', {},
         spec(F(vcpus=2, extra_specs={'hw:cpu_policy': 'dedicated'}),
              image(hw_cpu_thread_policy='require')), None),
        ('thread policy prefer adds no trait', {},
         spec(F(vcpus=2, extra_specs={'hw:cpu_policy': 'dedicated',
                                      'hw:cpu_thread_policy': 'prefer'})),
         None),
        ('dedicated with isolated emulator threads asks one more PCPU', {},
         spec(F(vcpus=4, extra_specs={'hw:cpu_policy': 'dedicated',
                                      'hw:emulator_threads_policy':
                                      'isolate'})), None),
        ('mixed with a dedicated mask ^0', {},
         spec(F(vcpus=4, extra_specs={'hw:cpu_policy': 'mixed',
                                      'hw:cpu_dedicated_mask': '^0'})), None),
        ('mixed with a dedicated mask 2-3 and isolated emulator threads', {},
         spec(F(vcpus=4, extra_specs={'hw:cpu_policy': 'mixed',
                                      'hw:cpu_dedicated_mask': '2-3',
                                      'hw:emulator_threads_policy':
                                      'isolate'})), None),
        ('mixed with a realtime mask', {},
         spec(F(vcpus=4, extra_specs={'hw:cpu_policy': 'mixed',
                                      'hw:cpu_realtime': 'yes',
                                      'hw:cpu_realtime_mask': '^0-1'})),
         None),
        ('image traits_required', {},
         spec(img=image(traits_required=['CUSTOM_GOLD', 'HW_NIC_SRIOV'])),
         None),
        ('image trait required and flavor trait forbidden are both kept', {},
         spec(F(extra_specs={'trait:CUSTOM_GOLD': 'forbidden'}),
              image(traits_required=['CUSTOM_GOLD'])), None),
        ('requested_destination aggregates are member_of any-of groups', {},
         spec(destination=dest(aggregates=[u('a') + ',' + u('b'), u('c')])),
         None),
        ('requested_destination forbidden aggregates', {},
         spec(destination=dest(forbidden_aggregates={u('a'), u('b')})), None),
        ('requested_destination host of one node is in_tree', {},
         spec(destination=dest(host='h1')), None),
        ('requested_destination node alone is in_tree', {},
         spec(destination=dest(node='n2a')), None),
        ('requested_destination host of two nodes lifts the limit', {},
         spec(destination=dest(host='h2')), None),
        ('requested_destination host and node', {},
         spec(destination=dest(host='h2', node='n2b')), None),
        ('force_hosts is in_tree', {}, spec(force_hosts=['h3']), None),
        ('force_nodes is in_tree', {}, spec(force_nodes=['n2b']), None),
        ('force_hosts and force_nodes together', {},
         spec(force_hosts=['h2'], force_nodes=['n2a']), None),
        ('requested_destination host wins over force_hosts', {},
         spec(force_hosts=['h3'], destination=dest(host='h1')), None),
        ('a forced host Nova does not know is NoValidHost', {},
         spec(force_hosts=['ghost']), None),
        ('a forced host with a node of another host is NoValidHost', {},
         spec(force_hosts=['h1'], force_nodes=['n3']), None),
        ('a server group hint lifts the limit', {},
         spec(hints={'group': [u('group')]}), None),
        ('a same_host hint lifts the limit', {},
         spec(hints={'same_host': [u('other')]}), None),
        ('an unrelated hint keeps the limit', {},
         spec(hints={'build_near_host_ip': ['10.0.0.1']}), None),
        ('max_placement_results is the limit',
         {'max_placement_results': 7}, spec(), None),
        ('tenant aggregates of p1 (any filter_tenant_id* key)', TENANT,
         spec(project_id='p1'), None),
        ('tenant aggregate of p2', TENANT, spec(project_id='p2'), None),
        ('a tenant without aggregates, not required', TENANT,
         spec(project_id='p9'), None),
        ('a tenant without aggregates, required: NoValidHost',
         TENANT_REQUIRED, spec(project_id='p9'), None),
        ('the tenant options off ignore tenant aggregates', {},
         spec(project_id='p1'), None),
        ('required for tenants without limit_tenants does nothing',
         {'placement_aggregate_required_for_tenants': True},
         spec(project_id='p9'), None),
        ('an availability zone of two aggregates', {},
         spec(availability_zone='az1'), None),
        ('an availability zone without aggregates', {},
         spec(availability_zone='nowhere'), None),
        ('zone and tenant are two member_of groups', TENANT,
         spec(project_id='p2', availability_zone='az2'), None),
        ('zone added after the caller aggregates', {},
         spec(availability_zone='az1', destination=dest(aggregates=[u('c')])),
         None),
        ('isolation without traits forbids every isolating aggregate',
         ISOLATE, spec(), None),
        ('isolation with CUSTOM_SSD forbids the aggregate also needing GPU',
         ISOLATE, spec(F(extra_specs={'trait:CUSTOM_SSD': 'required'})),
         None),
        ('isolation with both traits forbids only AVX2', ISOLATE,
         spec(F(extra_specs={'trait:CUSTOM_SSD': 'required',
                             'trait:CUSTOM_GPU': 'required'})), None),
        ('isolation counts image traits', ISOLATE,
         spec(img=image(traits_required=['HW_CPU_X86_AVX2'])), None),
        ('isolation adds to the caller forbidden aggregates', ISOLATE,
         spec(destination=dest(forbidden_aggregates={u('a')})), None),
        ('isolation counts the thread policy trait', ISOLATE,
         spec(F(vcpus=2, extra_specs={'hw:cpu_policy': 'dedicated',
                                      'hw:cpu_thread_policy': 'require'})),
         None),
        ('image type support asks the disk format trait', IMAGE_TYPE,
         spec(img=image(disk_format='raw')), None),
        ('image type support skips boot from volume', IMAGE_TYPE,
         spec(is_bfv=True), None),
        ('image metadata prefilter', IMAGE_PREFILTER,
         spec(img=image(hw_disk_bus='virtio', hw_vif_model='e1000e',
                        hw_architecture='x86_64',
                        hw_video_model='virtio')), None),
        ('image metadata prefilter gives up on an unknown trait',
         IMAGE_PREFILTER,
         spec(img=image(hw_disk_bus='scsi', hw_viommu_model='virtio')), None),
        ('root traits the caller set are kept', {},
         spec(root_required=['CUSTOM_ROOT'], root_forbidden=['CUSTOM_BAD']),
         None),
        ('secure boot required', {},
         spec(F(extra_specs={'os:secure_boot': 'required'})), None),
        ('secure boot optional adds nothing', {},
         spec(img=image(os_secure_boot='optional')), None),
        ('vTPM 2.0 CRB', {},
         spec(F(extra_specs={'hw:tpm_version': '2.0',
                             'hw:tpm_model': 'tpm-crb'})), None),
        ('vTPM 1.2 from the image, host secret security', {},
         spec(F(extra_specs={'hw:tpm_secret_security': 'host'}),
              image(hw_tpm_version='1.2')), None),
        ('PCI NUMA affinity socket', {},
         spec(F(extra_specs={'hw:pci_numa_affinity_policy': 'socket'})),
         None),
        ('maxphysaddr emulate from the image', {},
         spec(img=image(hw_maxphysaddr_mode='emulate')), None),
        ('stateless UEFI firmware', {},
         spec(img=image(hw_firmware_type='uefi',
                        hw_firmware_stateless=True)), None),
        ('stateless firmware is ignored without UEFI', {},
         spec(img=image(hw_firmware_stateless=True)), None),
        ('packed virtqueue', {},
         spec(F(extra_specs={'hw:virtio_packed_ring': 'true'})), None),
        ('virtio sound', {}, spec(img=image(hw_sound_model='virtio')), None),
        ('ephemeral encryption with a format', {},
         spec(F(extra_specs={'hw:ephemeral_encryption': 'yes',
                             'hw:ephemeral_encryption_format': 'luks'})),
         None),
        ('persistent memory namespaces', {},
         spec(F(extra_specs={'hw:pmem': '4GB, 4GB,small-one'})), None),
        ('group_policy with the unnumbered group only', {},
         spec(F(extra_specs={'group_policy': 'isolate'})), None),
        ('a numbered request group is out of scope', {},
         spec(F(extra_specs={'resources1:CUSTOM_FPGA': '1',
                             'trait1:CUSTOM_FAST': 'required'})),
         "request group '1'"),
        ('a port resource request is out of scope', {},
         spec(requested_resources=[port_group()]), 'requested_resources'),
        ('same_subtree is out of scope', {},
         spec(same_subtree=[['a', 'b']]), 'same_subtree'),
        ('memory encryption, the default model', {},
         spec(F(extra_specs={'hw:mem_encryption': 'true'}),
              image(hw_firmware_type='uefi', hw_machine_type='q35')), None),
        ('memory encryption with the image model', {},
         spec(img=image(hw_mem_encryption=True, hw_mem_encryption_model='amd-sev-es',
                        hw_firmware_type='uefi', hw_machine_type='q35')), None),
        ('memory encryption, flavor and image agreeing on the model', {},
         spec(F(extra_specs={'hw:mem_encryption': 'true',
                             'hw:mem_encryption_model': 'amd-sev-snp'}),
              image(hw_mem_encryption=True, hw_mem_encryption_model='amd-sev-snp',
                    hw_firmware_type='uefi', hw_firmware_stateless=True,
                    hw_machine_type='q35')), None),
        ('memory encryption turned off by both', {},
         spec(F(extra_specs={'hw:mem_encryption': 'false'}),
              image(hw_mem_encryption=False)), None),
        ('everything together', ALL_FILTERS,
         spec(F(vcpus=4, ephemeral_gb=10, swap=2048,
                extra_specs={'hw:cpu_policy': 'dedicated',
                             'hw:cpu_thread_policy': 'isolate',
                             'resources:CUSTOM_LICENSE': '1',
                             'trait:CUSTOM_SSD': 'required',
                             'trait:CUSTOM_SLOW': 'forbidden'}),
              image(traits_required=['CUSTOM_GPU'], hw_disk_bus='virtio'),
              project_id='p1', availability_zone='az1',
              destination=dest(aggregates=[u('c')],
                               forbidden_aggregates={u('b')}),
              force_hosts=['h3'], hints={'different_host': [u('x')]}),
         None),
        ('everything with boot from volume and a shared image policy',
         dict(TENANT_REQUIRED, **ISOLATE, **IMAGE_TYPE),
         spec(F(vcpus=3, extra_specs={'resources:MEMORY_MB': '1024',
                                      'trait:HW_CPU_X86_AVX2': 'required'}),
              image(hw_cpu_policy='shared', traits_required=['CUSTOM_SSD']),
              project_id='p2', availability_zone='az2', is_bfv=True,
              force_nodes=['n2a']), None),
    ]


# Cases run again once nova-compute services exist (OWNER_NOVA is required).
OWNER_CASES = {'plain m1.small', 'everything together',
               'root traits the caller set are kept'}


# --- running Nova ----------------------------------------------------------

def group_json(g):
    return {
        'requester_id': g.requester_id,
        'resources': dict(g.resources),
        'required_traits': sorted(g.required_traits),
        'forbidden_traits': sorted(g.forbidden_traits),
        'member_of': [list(a) for a in g.aggregates],
        'forbidden_aggregates': sorted(g.forbidden_aggregates),
        'in_tree': g.in_tree,
    }


def request_json(rr):
    groups = [group_json(g) for g in rr._rg_by_id.values()]
    return {
        'unnumbered': next(
            (g for g in groups if g['requester_id'] is None), None),
        'numbered': [g for g in groups if g['requester_id'] is not None],
        'root_required': sorted(rr._root_required),
        'root_forbidden': sorted(rr._root_forbidden),
        'same_subtree': [sorted(s) for s in rr._same_subtree],
        'group_policy': rr.group_policy,
        'limit': rr._limit,
        'cpu_pinning_requested': rr.cpu_pinning_requested,
        'querystring': rr.to_querystring(),
    }


OPTION_NAMES = [
    'limit_tenants_to_placement_aggregate',
    'placement_aggregate_required_for_tenants',
    'enable_isolated_aggregate_filtering',
    'query_placement_for_image_type_support',
    'image_metadata_prefilter',
    'max_placement_results',
]


def run_case(ctxt, hm, name, options, rs, unsupported, min_version):
    for key, value in options.items():
        CONF.set_override(key, value, group='scheduler')
    try:
        primitive = rs.obj_to_primitive()
        effective = {k: getattr(CONF.scheduler, k) for k in OPTION_NAMES}
        work = copy.deepcopy(rs)
        try:
            request_filter.process_reqspec(ctxt, work)
            pinned = utils.resources_from_request_spec(ctxt, work, hm, True)
            fallback = utils.resources_from_request_spec(
                ctxt, work, hm, False)
            result = {'request': request_json(pinned),
                      'fallback': request_json(fallback)}
        except exception.RequestFilterFailed as e:
            # SchedulerManager.select_destinations: NoValidHost(reason=e.message)
            result = {'no_valid_host': e.message}
        except exception.NoValidHost as e:
            result = {'no_valid_host': e.kwargs['reason']}
        return {'name': name, 'options': effective,
                'min_compute_service_version': min_version,
                'parasol_unsupported': unsupported,
                'spec': primitive, 'nova': result}
    finally:
        for key in options:
            CONF.clear_override(key, group='scheduler')


MALFORMED = [
    ('resources:VCPU', 'abc'),
    ('resources:MEMORY_MB', '1.5'),
    ('resources:CUSTOM_GOLD', ''),
    ('resources:NOT_A_CLASS', '1'),
    ('trait:HW_CPU_X86_AVX2', 'maybe'),
    ('trait:CUSTOM_SSD', 'Required'),
    ('hw:cpu_policy', 'bogus'),
    ('hw:cpu_thread_policy', 'sometimes'),
    ('hw:emulator_threads_policy', 'always'),
    ('hw:cpu_dedicated_mask', '0-x'),
    ('hw:tpm_version', '3.0'),
    ('hw:tpm_model', 'tpm-xyz'),
    ('os:secure_boot', 'yes'),
    ('hw:virtio_packed_ring', 'maybe'),
    ('hw:pci_numa_affinity_policy', 'nearby'),
    ('hw:maxphysaddr_mode', 'auto'),
    ('hw:sound_model', 'beeper'),
    ('hw:ephemeral_encryption_format', 'zip'),
    ('group_policy', 'together'),
]


def malformed():
    out = []
    for key, value in MALFORMED:
        try:
            validators.validate(key, value)
            nova_api = None
        except exception.ValidationError as e:
            nova_api = str(e)
        out.append({'key': key, 'value': value, 'nova_api_error': nova_api})
    return out


def main():
    ctxt = nova_context.get_admin_context()
    cell = setup_world(ctxt)
    hm = host_manager.HostManager()
    all_cases = cases()
    out = []
    for name, options, rs, unsupported in all_cases:
        out.append(run_case(ctxt, hm, name, options, rs, unsupported, 0))
    add_compute_services(ctxt, cell)
    version = objects.service.get_minimum_version_all_cells(
        ctxt, ['nova-compute'])
    for name, options, rs, unsupported in all_cases:
        if name in OWNER_CASES:
            out.append(run_case(ctxt, hm, name + ' (nova-compute %d)' % version,
                                options, rs, unsupported, version))
    dump({'world': world(ctxt, cell), 'cases': out,
          'malformed': malformed()}, sys.stdout)


def dump(doc, stream):
    """JSON with one case per line, so a fixture diff shows the cases that changed."""
    def line(v):
        return json.dumps(v, sort_keys=True, separators=(',', ':'))
    stream.write('{"world": %s,\n "malformed": [\n  ' % line(doc['world']))
    stream.write(',\n  '.join(line(m) for m in doc['malformed']))
    stream.write('],\n "cases": [\n  ')
    stream.write(',\n  '.join(line(c) for c in doc['cases']))
    stream.write(']}\n')


if __name__ == '__main__':
    main()
