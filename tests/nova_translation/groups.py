"""Nova's own query for seeded random request shapes with every kind of request group.

Run by ``tests/nova_translation.rs`` in the cached nova virtualenv:
``python groups.py <empty dir> <seed> <count>``. It builds ``RequestSpec``s with Nova 34's
objects the way Nova's API and conductor fill them -- flavors with unnumbered and
suffixed ``resources<S>``/``trait<S>`` extra specs and ``group_policy``, CPU policies
(the PCPU fallback), images with ``traits_required``, request-level root traits and
``same_subtree``, and ``requested_resources`` made by Nova's own code: Neutron ports
(``RequestGroup.from_port_request``, ``from_extended_port_request`` with
``RequestLevelParams.from_port_request``), Cyborg device profiles
(``_CyborgClient.get_device_request_groups``) and PCI in Placement
(``RequestSpec.generate_request_groups_from_pci_requests``). For each it prints the spec's
``obj_to_primitive()`` (what crosses the RPC) with Nova's queries:

- ``from_request_spec``: ``ResourceRequest.from_request_spec(spec, pin).to_querystring()``;
- ``scheduler``: what ``SchedulerManager`` asks Placement, ``request_filter.process_reqspec``
  then ``utils.resources_from_request_spec`` (a real API and cell database on SQLite in
  ``argv[1]`` with one nova-compute service, so ``OWNER_NOVA`` is on);

each for ``pin`` true and false. Where Nova raises, the exception instead. A few named
shapes come first (each kind at least once, and the conflicts Nova refuses), then
``count`` random ones drawn from ``random.Random(seed)``.
"""

import copy
import json
import os
import random
import sys
import uuid

WORKDIR = os.path.abspath(sys.argv[1])
SEED = int(sys.argv[2])
COUNT = int(sys.argv[3])
CONF_FILE = os.path.join(WORKDIR, 'nova.conf')
with open(CONF_FILE, 'w') as f:
    f.write(
        "[DEFAULT]\ntransport_url = fake:/\n"
        "[database]\nconnection = sqlite:///%s/cell1.db\n"
        "[api_database]\nconnection = sqlite:///%s/api.db\n"
        "[filter_scheduler]\ntrack_instance_changes = false\n"
        "pci_in_placement = true\n"
        % (WORKDIR, WORKDIR))

from nova import config  # noqa: E402

config.parse_args(['groups', '--config-file', CONF_FILE], init_rpc=True)

import nova.conf  # noqa: E402
from nova.accelerator import cyborg  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.db import migration  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import request_filter  # noqa: E402
from nova.scheduler import utils  # noqa: E402

CONF = nova.conf.CONF
objects.register_all()


def setup_world(ctxt):
    """One cell with one compute node and its nova-compute service."""
    migration.db_sync(database='api')
    migration.db_sync(database='main')
    cell = objects.CellMapping(
        ctxt, uuid=str(uuid.UUID(int=1)), name='cell1', transport_url='fake:/',
        database_connection=CONF.database.connection)
    cell.create()
    with nova_context.target_cell(ctxt, cell) as cctxt:
        objects.ComputeNode(
            cctxt, host='h1', hypervisor_hostname='n1',
            uuid=str(uuid.UUID(int=2)), vcpus=8, memory_mb=8192, local_gb=100,
            vcpus_used=0, memory_mb_used=0, local_gb_used=0,
            hypervisor_type='fake', hypervisor_version=1,
            cpu_info='{}').create()
        objects.Service(cctxt, host='h1', binary='nova-compute',
                        topic='compute').create()
    objects.HostMapping(ctxt, host='h1', cell_mapping=cell).create()
    return objects.service.get_minimum_version_all_cells(
        ctxt, ['nova-compute'])


# --- the pieces of a shape ---------------------------------------------------

NESTED_CLASSES = ['VGPU', 'CUSTOM_FPGA', 'SRIOV_NET_VF', 'NET_BW_EGR_KILOBIT_PER_SEC',
                  'NET_BW_IGR_KILOBIT_PER_SEC', 'CUSTOM_MAGIC', 'PCPU', 'VCPU',
                  'MEMORY_MB', 'DISK_GB', 'PGPU', 'FPGA']
TRAITS = ['CUSTOM_PHYSNET_A', 'CUSTOM_VNIC_TYPE_DIRECT', 'HW_GPU_API_VULKAN',
          'CUSTOM_GOLD', 'HW_CPU_X86_AVX2', 'CUSTOM_FAST', 'HW_NIC_SRIOV',
          'CUSTOM_SLOW']
SUFFIXES = ['1', '2', '3', '10', '_gpu', '-nic', '_NET1', 'abc_DEF-9', 'x' * 64]
AMOUNTS = [0, 1, 1, 2, 4, 1000]


class Shape:
    """What one RequestSpec is made of, drawn or written by hand."""

    def __init__(self, name):
        self.name = name
        self.vcpus, self.memory_mb, self.root_gb = 2, 2048, 20
        self.ephemeral_gb, self.swap, self.is_bfv = 0, 0, False
        self.extra_specs = {}
        self.image_props = {}
        self.root_required, self.root_forbidden = set(), set()
        self.same_subtree = []
        self.ports = []          # (legacy?, resource request dict, port uuid)
        self.device_profiles = []  # (groups, owner)
        self.pci = []            # InstancePCIRequest kwargs
        self.aggregates, self.forbidden_aggregates = [], set()
        self.hints = {}


def rid(rng):
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def port_request(rng, legacy):
    bw = {'NET_BW_EGR_KILOBIT_PER_SEC': rng.choice([0, 1000, 10000])}
    if rng.random() < 0.6:
        bw['NET_BW_IGR_KILOBIT_PER_SEC'] = rng.choice([1000, 2000])
    required = ['CUSTOM_PHYSNET_A', rng.choice(['CUSTOM_VNIC_TYPE_NORMAL',
                                                 'CUSTOM_VNIC_TYPE_DIRECT'])]
    if legacy:
        return {'resources': bw, 'required': required}
    groups = []
    if rng.random() < 0.8:
        groups.append({'id': rid(rng), 'required': ['CUSTOM_VNIC_TYPE_NORMAL'],
                       'resources': {'NET_PACKET_RATE_KILOPACKET_PER_SEC':
                                     rng.choice([1, 1000])}})
    if not groups or rng.random() < 0.8:
        groups.append({'id': rid(rng), 'required': required, 'resources': bw})
    request = {'request_groups': groups}
    if len(groups) > 1 and rng.random() < 0.7:
        request['same_subtree'] = [g['id'] for g in groups]
    return request


def device_profile(rng):
    groups = []
    for _ in range(rng.choice([1, 1, 2])):
        rc = rng.choice(['FPGA', 'PGPU', 'CUSTOM_ACCELERATOR_FPGA'])
        g = {'resources:%s' % rc: str(rng.choice([1, 2])),
             'accel:bitstream_id': 'b-%d' % rng.randrange(9)}
        if rng.random() < 0.6:
            g['trait:CUSTOM_FPGA_INTEL_PAC_ARRIA10'] = 'required'
        if rng.random() < 0.2:
            g['trait:CUSTOM_SLOW'] = 'forbidden'
        groups.append(g)
    return groups


def pci_request(rng):
    if rng.random() < 0.5:
        spec = {'vendor_id': '8086', 'product_id': rng.choice(['1563', '154d'])}
    else:
        spec = {'resource_class': rng.choice(['gpu-a', 'CUSTOM_NIC', 'PGPU']),
                'traits': rng.choice(['', 'gold', 'gold,HW_GPU_API_VULKAN'])}
    return dict(count=rng.choice([1, 1, 2, 3]), spec=[spec], alias_name='a-%d' % rng.randrange(3),
                request_id=rid(rng))


def random_shape(rng, i):
    s = Shape('random %d (seed %d)' % (i, SEED))
    theme = ['flat', 'granular', 'port', 'extended port', 'accelerator', 'pci',
             'pcpu', 'everything'][i % 8]
    s.name += ': ' + theme
    s.vcpus = rng.choice([0, 1, 2, 4, 8])
    s.memory_mb = rng.choice([0, 512, 2048, 8192])
    s.root_gb = rng.choice([0, 10, 20])
    s.ephemeral_gb = rng.choice([0, 0, 5])
    s.swap = rng.choice([0, 0, 512, 1025])
    s.is_bfv = rng.random() < 0.15
    es = s.extra_specs
    if rng.random() < 0.3:
        es['resources:CUSTOM_LICENSE'] = str(rng.choice(AMOUNTS))
    if rng.random() < 0.15:
        es['resources:' + rng.choice(['VCPU', 'MEMORY_MB', 'DISK_GB'])] = \
            str(rng.choice(AMOUNTS))
    for t in rng.sample(TRAITS, rng.choice([0, 0, 1, 2])):
        es['trait:' + t] = rng.choice(['required', 'forbidden'])
    if theme in ('granular', 'everything') or rng.random() < 0.15:
        for suffix in rng.sample(SUFFIXES, rng.choice([1, 2, 3])):
            n = rng.choice([0, 1, 1, 2])
            for rc in rng.sample(NESTED_CLASSES, n):
                es['resources%s:%s' % (suffix, rc)] = str(rng.choice(AMOUNTS))
            for t in rng.sample(TRAITS, rng.choice([0, 1]) if n else 1):
                es['trait%s:%s' % (suffix, t)] = rng.choice(
                    ['required', 'required', 'forbidden'])
    if rng.random() < 0.6:
        es['group_policy'] = rng.choice(['none', 'isolate'])
    if theme == 'pcpu' or rng.random() < 0.1:
        policy = rng.choice(['dedicated', 'dedicated', 'mixed', 'shared'])
        if policy == 'mixed' and s.vcpus < 2:
            s.vcpus = 4
        es['hw:cpu_policy'] = policy
        if policy == 'mixed':
            es['hw:cpu_dedicated_mask'] = '^0'
        if policy != 'shared' and rng.random() < 0.5:
            es['hw:cpu_thread_policy'] = rng.choice(['isolate', 'require', 'prefer'])
        if policy != 'shared' and rng.random() < 0.3:
            es['hw:emulator_threads_policy'] = 'isolate'
    if rng.random() < 0.05:
        es['hw:pmem'] = '4GB,small'
    if rng.random() < 0.2:
        s.image_props['traits_required'] = rng.sample(TRAITS, rng.choice([1, 2]))
    if rng.random() < 0.15:
        s.root_required = set(rng.sample(['CUSTOM_ROOT', 'HW_CPU_X86_AVX2'], 1))
    if rng.random() < 0.15:
        s.root_forbidden = {'CUSTOM_BAD'}
    if theme in ('port', 'everything') or rng.random() < 0.1:
        for _ in range(rng.choice([1, 1, 2])):
            s.ports.append((True, port_request(rng, True), rid(rng)))
    if theme in ('extended port', 'everything') or rng.random() < 0.1:
        for _ in range(rng.choice([1, 1, 2])):
            s.ports.append((False, port_request(rng, False), None))
    if theme in ('accelerator', 'everything') or rng.random() < 0.05:
        es['accel:device_profile'] = 'dp-%d' % rng.randrange(3)
        s.device_profiles.append((device_profile(rng), None))
        if rng.random() < 0.3:
            s.device_profiles.append((device_profile(rng), rid(rng)))
    if theme in ('pci', 'everything') or rng.random() < 0.05:
        for _ in range(rng.choice([1, 1, 2])):
            s.pci.append(pci_request(rng))
        if rng.random() < 0.3:
            s.pci.append(dict(count=1, spec=[{'physical_network': 'physnet1'}],
                              alias_name=None, request_id=rid(rng)))
    suffixes = sorted({k.split(':')[0][len('resources'):] if k.startswith('resources')
                       else k.split(':')[0][len('trait'):]
                       for k in es if k.startswith(('resources', 'trait'))} - {''})
    if len(suffixes) >= 2 and rng.random() < 0.4:
        s.same_subtree.append(rng.sample(suffixes, 2))
    if rng.random() < 0.1:
        s.aggregates = [','.join(rid(rng) for _ in range(rng.choice([1, 2])))]
    if rng.random() < 0.1:
        s.forbidden_aggregates = {rid(rng)}
    if rng.random() < 0.05:
        s.hints = {'group': [rid(rng)]}
    return s


def named_shapes():
    """Each kind of group by hand, and what Nova refuses."""
    out = []

    def shape(name, **kw):
        s = Shape(name)
        for k, v in kw.items():
            setattr(s, k, v)
        out.append(s)
        return s

    shape('flat m1.small')
    shape('one numbered VGPU group, VCPU stays unnumbered',
          extra_specs={'resources1:VGPU': '1'})
    shape('two numbered groups without a policy: Nova leaves it unset',
          extra_specs={'resources1:VGPU': '1', 'resources2:VGPU': '1'})
    shape('a suffixed group asking VCPU and MEMORY_MB takes them from the flavor',
          extra_specs={'resources_cpu:VCPU': '2', 'resources_cpu:MEMORY_MB': '1024',
                       'group_policy': 'isolate'})
    shape('a numbered group of zeros is dropped but still counts as the flavor\'s',
          extra_specs={'resources1:VGPU': '0'},
          ports=[(True, {'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 10}}, str(uuid.UUID(int=7)))])
    shape('a numbered group of traits only',
          extra_specs={'trait1:CUSTOM_GOLD': 'required', 'trait1:CUSTOM_SLOW': 'forbidden'})
    shape('one port: group_policy stays unset',
          ports=[(True, {'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
                         'required': ['CUSTOM_PHYSNET_A']}, str(uuid.UUID(int=8)))])
    shape('two ports: Nova defaults group_policy to none',
          ports=[(True, {'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1000}}, str(uuid.UUID(int=9))),
                 (True, {'resources': {'NET_BW_IGR_KILOBIT_PER_SEC': 1000}}, str(uuid.UUID(int=10)))])
    shape('an extended port: packet rate and bandwidth in one subtree',
          ports=[(False, {'request_groups': [
              {'id': str(uuid.UUID(int=11)), 'resources': {'NET_PACKET_RATE_KILOPACKET_PER_SEC': 1000},
               'required': ['CUSTOM_VNIC_TYPE_NORMAL']},
              {'id': str(uuid.UUID(int=12)), 'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1000},
               'required': ['CUSTOM_PHYSNET_A', 'CUSTOM_VNIC_TYPE_NORMAL']}],
              'same_subtree': [str(uuid.UUID(int=11)), str(uuid.UUID(int=12))]}, None)])
    shape('a device profile of two groups, and COMPUTE_ACCELERATORS on the root',
          extra_specs={'accel:device_profile': 'dp1'},
          device_profiles=[([{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL_PAC_ARRIA10': 'required'},
                             {'resources:PGPU': '1'}], None)])
    shape('PCI in Placement: count 2 is two groups, OWNER_NOVA on each',
          pci=[dict(count=2, spec=[{'vendor_id': '8086', 'product_id': '1563'}],
                    alias_name='nic', request_id=str(uuid.UUID(int=13)))])
    shape('a neutron PCI request makes no group',
          pci=[dict(count=1, spec=[{'physical_network': 'physnet1'}], alias_name=None,
                    request_id=str(uuid.UUID(int=14)))])
    shape('root_required, root_forbidden and same_subtree of flavor groups',
          extra_specs={'resources_a:VGPU': '1', 'resources_b:CUSTOM_FPGA': '1',
                       'group_policy': 'none'},
          root_required={'CUSTOM_ROOT'}, root_forbidden={'CUSTOM_BAD'},
          same_subtree=[['_b', '_a']])
    shape('the PCPU fallback of a dedicated flavor with a numbered group',
          extra_specs={'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'require',
                       'resources1:VGPU': '1'})
    shape('image traits go to the unnumbered group only',
          extra_specs={'trait1:CUSTOM_FAST': 'required', 'resources1:VGPU': '1'},
          image_props={'traits_required': ['CUSTOM_GOLD']})
    shape('Nova refuses a port whose id is a flavor suffix',
          extra_specs={'resources1:VGPU': '1'},
          ports=[(True, {'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1}}, '1')])
    shape('Nova refuses a port group without a requester',
          ports=[(True, {'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1}}, None)])
    shape('Nova refuses a port group asking nothing',
          ports=[(True, {'resources': {}}, str(uuid.UUID(int=15)))])
    shape('Nova refuses two groups of one requester',
          ports=[(True, {'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1}}, str(uuid.UUID(int=16))),
                 (True, {'resources': {'NET_BW_IGR_KILOBIT_PER_SEC': 1}}, str(uuid.UUID(int=16)))])
    return out


# --- building and running ----------------------------------------------------

def build(ctxt, s):
    flavor = objects.Flavor(
        id=1, name='f', flavorid='f', vcpus=s.vcpus, memory_mb=s.memory_mb,
        root_gb=s.root_gb, ephemeral_gb=s.ephemeral_gb, swap=s.swap,
        rxtx_factor=1.0, vcpu_weight=0, disabled=False, is_public=True,
        extra_specs=dict(s.extra_specs), description=None)
    image = objects.ImageMeta(
        id=str(uuid.UUID(int=3)), name='cirros', status='active',
        disk_format='qcow2', container_format='bare', min_ram=0, min_disk=0,
        size=1, properties=objects.ImageMetaProps(**s.image_props))
    level = objects.RequestLevelParams(
        root_required=set(s.root_required), root_forbidden=set(s.root_forbidden),
        same_subtree=[list(x) for x in s.same_subtree])
    groups = []
    for legacy, request, port in s.ports:
        if legacy:
            groups.append(objects.RequestGroup.from_port_request(ctxt, port, request))
        else:
            groups.extend(objects.RequestGroup.from_extended_port_request(ctxt, request))
            level.extend_with(objects.RequestLevelParams.from_port_request(request))
    for dp_groups, owner in s.device_profiles:
        groups.extend(cyborg._CyborgClient.get_device_request_groups(None, dp_groups, owner))
    dest = None
    if s.aggregates or s.forbidden_aggregates:
        dest = objects.Destination(aggregates=list(s.aggregates),
                                   forbidden_aggregates=set(s.forbidden_aggregates))
    rs = objects.RequestSpec(
        flavor=flavor, image=image, project_id='p0', user_id='u0',
        availability_zone=None, num_instances=1, ignore_hosts=None,
        force_hosts=None, force_nodes=None, requested_destination=dest,
        retry=None, limits=None, instance_group=None,
        scheduler_hints=dict(s.hints), instance_uuid=str(uuid.UUID(int=4)),
        is_bfv=s.is_bfv, requested_resources=groups,
        security_groups=objects.SecurityGroupList(objects=[]),
        network_metadata=objects.NetworkMetadata(physnets=set(), tunneled=False),
        requested_networks=objects.NetworkRequestList(objects=[]))
    rs.request_level_params = level
    if s.pci:
        rs.pci_requests = objects.InstancePCIRequests(requests=[
            objects.InstancePCIRequest(**kw) for kw in s.pci])
        rs.generate_request_groups_from_pci_requests()
    return rs


def run(ctxt, hm, s):
    rs = build(ctxt, s)
    out = {'name': s.name, 'spec': rs.obj_to_primitive()}
    try:
        queries = {}
        for pin, key in ((True, 'pinned'), (False, 'fallback')):
            queries.setdefault('from_request_spec', {})[key] = (
                utils.ResourceRequest.from_request_spec(
                    copy.deepcopy(rs), pin).to_querystring())
            work = copy.deepcopy(rs)
            request_filter.process_reqspec(ctxt, work)
            queries.setdefault('scheduler', {})[key] = (
                utils.resources_from_request_spec(ctxt, work, hm, pin).to_querystring())
        out.update(queries)
    except Exception as e:  # what Nova raises is the expected answer
        out['nova_error'] = '%s: %s' % (type(e).__name__, e)
    return out


def main():
    ctxt = nova_context.get_admin_context()
    version = setup_world(ctxt)
    hm = host_manager.HostManager()
    rng = random.Random(SEED)
    shapes = named_shapes() + [random_shape(rng, i) for i in range(COUNT)]
    sys.stdout.write('{"min_compute_service_version": %d, "shapes": [\n' % version)
    sys.stdout.write(',\n'.join(json.dumps(run(ctxt, hm, s), sort_keys=True)
                                for s in shapes))
    sys.stdout.write(']}\n')


if __name__ == '__main__':
    main()
