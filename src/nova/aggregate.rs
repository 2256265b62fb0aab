//! Nova's Aggregate objects as nova-api casts them to the schedulers (`update_aggregates`
//! with a list, `delete_aggregate` with one): uuid, metadata and hosts.

use super::error::{CodecError, Result};
use super::object::{Fields, NovaObject};
use super::request_filters::Aggregate;
use serde_json::Value;
use std::collections::BTreeMap;

/// Reads one Aggregate object: its uuid and its metadata (values as strings).
pub fn decode_aggregate(value: &Value, path: &str) -> Result<Aggregate> {
    let obj = NovaObject::parse(value, "Aggregate", path)?;
    let d = &obj.data;
    let mut metadata = BTreeMap::new();
    if let Some(m) = d.opt_dict("metadata")? {
        super::bounds::check_count(m.path(), m.map().len())?;
        for (k, v) in m.map() {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Null => continue,
                other => other.to_string(),
            };
            metadata.insert(k.clone(), v);
        }
    }
    let hosts = d.opt_str_list("hosts")?.unwrap_or_default();
    super::bounds::check_count(&d.path_of("hosts"), hosts.len())?;
    Ok(Aggregate {
        uuid: d.req_str("uuid")?,
        metadata,
        hosts,
    })
}

/// Reads `args.aggregates` of `update_aggregates`.
pub fn decode_aggregates(args: &Value) -> Result<Vec<Aggregate>> {
    let a = Fields::new(args, "args")?;
    match a.required("aggregates")? {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| decode_aggregate(item, &format!("args.aggregates[{i}]")))
            .collect(),
        _ => Err(CodecError::invalid(
            a.path_of("aggregates"),
            "must be a list",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn aggregate(uuid: &str, metadata: Value) -> Value {
        json!({"nova_object.name": "Aggregate", "nova_object.namespace": "nova",
               "nova_object.version": "1.3",
               "nova_object.data": {"id": 1, "uuid": uuid, "name": "a", "hosts": ["h1"],
                                    "metadata": metadata}})
    }

    #[test]
    fn reads_uuid_and_metadata_of_each_aggregate() {
        let args = json!({"aggregates": [
            aggregate("u1", json!({"availability_zone": "az1", "filter_tenant_id": "p"})),
            aggregate("u2", json!({})),
        ]});
        let got = decode_aggregates(&args).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].uuid, "u1");
        assert_eq!(got[0].metadata["availability_zone"], "az1");
        assert!(got[1].metadata.is_empty());
        assert_eq!(got[0].hosts, ["h1"]);
    }

    #[test]
    fn a_malformed_aggregate_names_what_is_wrong() {
        let err = decode_aggregates(&json!({"aggregates": [{"x": 1}]})).unwrap_err();
        assert!(err.to_string().contains("args.aggregates[0]"), "{err}");
        let err = decode_aggregates(&json!({"aggregates": 3})).unwrap_err();
        assert!(err.to_string().contains("must be a list"), "{err}");
    }
}
