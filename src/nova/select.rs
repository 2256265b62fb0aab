//! The arguments of `select_destinations`, from an RPC call of any 4.x version or the HTTP body.

use super::bounds::refuse_duplicates;
use super::error::{CodecError, Result};
use super::legacy::decode_legacy;
use super::object::Fields;
use super::request_spec::{RequestSpec, MAX_INSTANCES};
use serde_json::Value;

/// `select_destinations(ctxt, spec_obj, instance_uuids, return_objects=False,
/// return_alternates=False)`, decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectDestinationsArgs {
    /// Boxed: the arguments travel by value through the call's futures, each of which holds
    /// room for them (a `RequestSpec` is about 1.6 KB).
    pub spec: Box<RequestSpec>,
    /// Uuids of the instances to place (may be empty; see [`RequestSpec::contexts`]): at
    /// most [`MAX_INSTANCES`], each a UUID (lowercased), none twice.
    pub instance_uuids: Vec<String>,
    /// Answer Selection objects rather than the legacy host dicts.
    pub return_objects: bool,
    /// Add alternates after each chosen host.
    pub return_alternates: bool,
}

impl SelectDestinationsArgs {
    /// Decodes the `args` of an RPC call sent at `version`: 4.0–4.2 carry the legacy
    /// `request_spec`/`filter_properties` dicts, 4.3 `spec_obj`, 4.4 adds `instance_uuids`,
    /// 4.5 adds `return_objects` and `return_alternates`. Keys a version would not send are
    /// still read when present; a major other than 4 is refused.
    pub fn from_rpc_args(args: &Value, version: (u32, u32)) -> Result<Self> {
        if version.0 != 4 {
            return Err(CodecError::UnsupportedVersion {
                path: "select_destinations".to_string(),
                version: format!("{}.{}", version.0, version.1),
                supported: "4.x".to_string(),
            });
        }
        let a = Fields::new(args, "args")?;
        if version.1 < 3 && a.field("spec_obj").value().is_none() {
            let request_spec = a.required("request_spec")?;
            let (spec, instance_uuids) =
                decode_legacy(request_spec, a.field("filter_properties").value())?;
            check_instances("args.request_spec.instance_uuids", &instance_uuids)?;
            return Ok(SelectDestinationsArgs {
                spec: Box::new(spec),
                instance_uuids,
                return_objects: false,
                return_alternates: false,
            });
        }
        Self::from_fields(&a, "spec_obj")
    }

    /// Decodes the HTTP body `{"spec_obj", "instance_uuids", "return_objects",
    /// "return_alternates"}` (the 4.5 shape; the flags default to false).
    pub fn from_http_body(body: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(body).map_err(|source| CodecError::Json {
            what: "request body".to_string(),
            source,
        })?;
        Self::from_fields(&Fields::new(&value, "")?, "spec_obj")
    }

    fn from_fields(a: &Fields<'_>, spec_key: &str) -> Result<Self> {
        let spec_value = a.required(spec_key)?;
        let spec = RequestSpec::from_primitive_at(spec_value, &a.path_of(spec_key))?;
        let instance_uuids = a.opt_uuid_list("instance_uuids")?.unwrap_or_default();
        check_instances(&a.path_of("instance_uuids"), &instance_uuids)?;
        Ok(SelectDestinationsArgs {
            spec: Box::new(spec),
            instance_uuids,
            return_objects: a.opt_bool("return_objects")?.unwrap_or(false),
            return_alternates: a.opt_bool("return_alternates")?.unwrap_or(false),
        })
    }
}

/// At most [`MAX_INSTANCES`] uuids, none twice: two selections for one instance would
/// claim twice what one allocation holds.
fn check_instances(path: &str, uuids: &[String]) -> Result<()> {
    if uuids.len() as i64 > MAX_INSTANCES {
        return Err(CodecError::invalid(
            path,
            format!(
                "must list at most {MAX_INSTANCES} instances, got {}",
                uuids.len()
            ),
        ));
    }
    refuse_duplicates(path, uuids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> Value {
        json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "nova",
               "nova_object.version": "1.10",
               "nova_object.data": {"flavor": {"nova_object.name": "Flavor", "nova_object.namespace": "nova",
                   "nova_object.version": "1.2", "nova_object.data": {"vcpus": 1, "memory_mb": 64, "root_gb": 0}}}})
    }

    #[test]
    fn the_http_body_defaults_both_flags_to_false() {
        let body = json!({"spec_obj": spec()}).to_string();
        let args = SelectDestinationsArgs::from_http_body(body.as_bytes()).unwrap();
        assert!(!args.return_objects && !args.return_alternates && args.instance_uuids.is_empty());
        assert_eq!(args.spec.version, (1, 10));
    }

    #[test]
    fn bad_http_bodies_say_what_is_wrong() {
        let cases: [(&[u8], &str); 4] = [
            (b"[]", "the message must be a JSON object"),
            (b"{}", "spec_obj is missing"),
            (b"{\"spec_obj\": 1}", "spec_obj must be a JSON object"),
            (
                b"{\"spec_obj\": null, \"return_objects\": true}",
                "spec_obj is missing",
            ),
        ];
        for (body, want) in cases {
            let err = SelectDestinationsArgs::from_http_body(body)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
        let flags = json!({"spec_obj": spec(), "return_objects": "yes"}).to_string();
        let err = SelectDestinationsArgs::from_http_body(flags.as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("return_objects must be a boolean"),
            "{err}"
        );
    }

    #[test]
    fn rpc_versions_below_4_3_read_the_legacy_dicts_and_need_a_request_spec() {
        let err = SelectDestinationsArgs::from_rpc_args(&json!({}), (4, 0)).unwrap_err();
        assert!(
            err.to_string().contains("args.request_spec is missing"),
            "{err}"
        );
        let err = SelectDestinationsArgs::from_rpc_args(&json!({}), (3, 9)).unwrap_err();
        assert!(
            err.to_string().contains("version 3.9 is not supported"),
            "{err}"
        );
        let args = json!({"spec_obj": spec(), "instance_uuids": [A]});
        let d = SelectDestinationsArgs::from_rpc_args(&args, (4, 4)).unwrap();
        assert_eq!(d.instance_uuids, vec![A]);
    }

    const A: &str = "178b0921-8f85-4257-88b6-2e743b5a975c";
}
