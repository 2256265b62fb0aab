"""What the Nova-side scripts of tests/nova_compat share (not a pytest module): Nova's own
configuration on the test's broker and exchange, and the request spec of one small instance."""

import os
import tempfile
import uuid


def configure(program, amqp_url, exchange, extra=""):
    """Parses a nova.conf for `program` as Nova's services do: transport_url (oslo's scheme is
    rabbit://, and its default vhost "/" is written as an empty path), control_exchange, then
    `extra` (more [DEFAULT] options, then further sections)."""
    from nova import config, objects

    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    transport_url = "rabbit://" + amqp_url.split("://", 1)[1].replace("/%2f", "/").replace("/%2F", "/")
    conf.write(f"[DEFAULT]\ntransport_url = {transport_url}\ncontrol_exchange = {exchange}\n{extra}")
    conf.close()
    objects.register_all()
    config.parse_args([program, "--config-file", conf.name], configure_db=False, init_rpc=True)
    os.unlink(conf.name)  # read by parse_args; nothing reads it again


def one_instance_spec(ctxt, instance):
    """A RequestSpec for one instance `instance` of a 1 VCPU / 512 MB / 1 GB flavor."""
    from nova import objects

    flavor = objects.Flavor(id=1, name="f1", memory_mb=512, vcpus=1, root_gb=1, ephemeral_gb=0,
                            flavorid="1", swap=0, rxtx_factor=1.0, vcpu_weight=0, disabled=False,
                            is_public=True, extra_specs={}, projects=[], description=None)
    image = objects.ImageMeta.from_dict({"id": str(uuid.uuid4()), "name": "cirros", "properties": {}})
    spec = objects.RequestSpec.from_components(
        ctxt, instance, image, flavor, None, objects.InstancePCIRequests(requests=[]), {}, None,
        None, project_id="p", user_id="u")
    spec.num_instances = 1
    return spec
