//! RPC 4.0's legacy `request_spec` and `filter_properties` dicts, decoded into a [`RequestSpec`].
//!
//! Nova builds them with `RequestSpec.to_legacy_request_spec_dict()` and
//! `to_legacy_filter_properties_dict()`; the serializer turns nested objects (the flavor,
//! sometimes the instance) into versioned primitives, older callers sent plain dicts, so
//! both are accepted.

use super::destination::RequestLevelParams;
use super::error::{CodecError, Result};
use super::image::Image;
use super::object::{is_nova_object, Fields, NovaObject};
use super::request_spec::{read_hints, read_num_instances, Flavor, InstanceGroup, RequestSpec};
use super::specs::{settings, ResourceSpecs};
use serde_json::Value;

/// Decodes the 4.0 arguments into a spec and the instance uuids the request spec listed.
pub fn decode_legacy(
    request_spec: &Value,
    filter_properties: Option<&Value>,
) -> Result<(RequestSpec, Vec<String>)> {
    let rs = Fields::new(request_spec, "request_spec")?;
    let empty = Value::Object(Default::default());
    let fp = Fields::new(filter_properties.unwrap_or(&empty), "filter_properties")?;

    let flavor_value = rs
        .field("instance_type")
        .value()
        .map(|v| (v, rs.path_of("instance_type")))
        .or_else(|| {
            fp.field("instance_type")
                .value()
                .map(|v| (v, fp.path_of("instance_type")))
        });
    let (flavor, flavor_path) = match flavor_value {
        Some((v, path)) => (
            Flavor::from_fields(&object_or_dict(v, "Flavor", path.clone())?)?,
            path,
        ),
        None => return Err(CodecError::missing(rs.path_of("instance_type"))),
    };

    let instance = match rs.field("instance_properties").value() {
        Some(v) => Some(object_or_dict(
            v,
            "Instance",
            rs.path_of("instance_properties"),
        )?),
        None => None,
    };
    let from_instance = |key: &str| -> Result<Option<String>> {
        match &instance {
            Some(i) => i.opt_str(key),
            None => Ok(None),
        }
    };
    let instance_uuid = match &instance {
        Some(i) => i.opt_uuid("uuid")?,
        None => None,
    };
    let image = match rs.field("image").value() {
        Some(v) => Some(Image::from_value(v, rs.path_of("image"))?),
        None => None,
    };
    let instance_group = match fp.opt_str_list("group_policies")? {
        Some(policies) if !policies.is_empty() => {
            let dict = serde_json::json!({
                "policies": policies,
                "hosts": fp.opt_str_list("group_hosts")?.unwrap_or_default(),
                "members": fp.opt_str_list("group_members")?.unwrap_or_default(),
            });
            Some(InstanceGroup::from_fields(&Fields::new(
                &dict,
                fp.path_of("group_policies"),
            )?)?)
        }
        _ => None,
    };
    let instance_uuids = rs.opt_uuid_list("instance_uuids")?.unwrap_or_default();
    let paths = (
        format!("{}.extra_specs", flavor_path),
        rs.path_of("image.properties"),
    );
    let resource_specs = ResourceSpecs::parse(
        &settings(&flavor.extra_specs, image.as_ref(), &paths),
        flavor.vcpus as u64,
    )?;

    let spec = RequestSpec {
        version: (1, 0),
        demand: flavor.demand(false),
        flavor,
        num_instances: read_num_instances(&rs)?,
        instance_uuid: instance_uuid.or_else(|| instance_uuids.first().cloned()),
        availability_zone: from_instance("availability_zone")?,
        ignore_hosts: fp.opt_str_list("ignore_hosts")?.unwrap_or_default(),
        force_hosts: fp.opt_str_list("force_hosts")?.unwrap_or_default(),
        force_nodes: fp.opt_str_list("force_nodes")?.unwrap_or_default(),
        requested_destination: None,
        destination: None,
        instance_group,
        is_bfv: false,
        scheduler_hints: read_hints(&fp, "scheduler_hints")?,
        limits: None,
        project_id: from_instance("project_id")?,
        user_id: from_instance("user_id")?,
        image_id: image.as_ref().and_then(|i| i.id.clone()),
        image,
        requested_resources: Vec::new(),
        pci_request_ids: Default::default(),
        request_level: RequestLevelParams::default(),
        resource_specs,
        numa_pci: legacy_numa_pci(instance.as_ref())?,
    };
    Ok((spec, instance_uuids))
}

/// The instance's `numa_topology` and `pci_requests` (versioned objects, as Nova's
/// serializer writes an Instance's fields).
fn legacy_numa_pci(instance: Option<&Fields<'_>>) -> Result<crate::domain::numa::NumaPciRequest> {
    let Some(i) = instance else {
        return Ok(Default::default());
    };
    Ok(crate::domain::numa::NumaPciRequest {
        numa: super::numa::instance_numa(i, "numa_topology")?.map(std::sync::Arc::new),
        pci: super::numa::pci_requests(i, "pci_requests")?,
        ..Default::default()
    })
}

/// The fields of a value that may be a versioned object named `expected` or a plain dict.
fn object_or_dict<'a>(value: &'a Value, expected: &str, path: String) -> Result<Fields<'a>> {
    if is_nova_object(value) {
        Ok(NovaObject::parse(value, expected, path)?.data)
    } else {
        Fields::new(value, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{GroupPolicy, Resources};
    use serde_json::json;

    const U1: &str = "178b0921-8f85-4257-88b6-2e743b5a975c";
    const U2: &str = "6f1a2e4b-6b3b-4c8b-9c16-3b8c1f0a9c11";

    #[test]
    fn decodes_legacy_dicts_with_a_flavor_object_and_group_policies() {
        let rs = json!({
            "instance_properties": {"uuid": U1, "availability_zone": "az1", "project_id": "p"},
            "instance_type": {"nova_object.name": "Flavor", "nova_object.namespace": "nova",
                              "nova_object.version": "1.2",
                              "nova_object.data": {"name": "m1.small", "vcpus": 1, "memory_mb": 2048,
                                                   "root_gb": 20, "ephemeral_gb": 0, "swap": 1}},
            "num_instances": 2,
            "instance_uuids": [U1, U2],
            "image": {"id": "img"}
        });
        let fp = json!({"force_hosts": "h1", "ignore_hosts": ["h2"], "group_policies": ["anti-affinity"],
                        "group_hosts": ["h3"], "scheduler_hints": {"group": "g"}});
        let (spec, uuids) = decode_legacy(&rs, Some(&fp)).unwrap();
        assert_eq!(uuids, vec![U1, U2]);
        assert_eq!(spec.demand, Resources::new(1, 2048, 21));
        assert_eq!(spec.num_instances, 2);
        assert_eq!(spec.instance_uuid.as_deref(), Some(U1));
        assert_eq!(spec.availability_zone.as_deref(), Some("az1"));
        assert_eq!(spec.project_id.as_deref(), Some("p"));
        assert_eq!(spec.image_id.as_deref(), Some("img"));
        assert_eq!(spec.force_hosts, vec!["h1"]);
        assert_eq!(spec.ignore_hosts, vec!["h2"]);
        let group = spec.instance_group.unwrap();
        assert_eq!(group.policy, Some(GroupPolicy::AntiAffinity));
        assert_eq!(group.hosts, vec!["h3"]);
        assert_eq!(spec.scheduler_hints["group"], vec!["g"]);
    }

    #[test]
    fn takes_the_flavor_from_filter_properties_when_the_request_spec_has_none() {
        let rs = json!({"instance_properties": {"uuid": U1}});
        let fp = json!({"instance_type": {"vcpus": 2, "memory_mb": 512, "root_gb": 1}});
        let (spec, _) = decode_legacy(&rs, Some(&fp)).unwrap();
        assert_eq!(spec.demand, Resources::new(2, 512, 1));
    }

    #[test]
    fn a_legacy_request_without_any_flavor_names_instance_type() {
        let err = decode_legacy(&json!({}), None).unwrap_err();
        assert!(
            err.to_string().contains("request_spec.instance_type"),
            "{err}"
        );
    }
}
