//! Unit tests of versioned-object reading.

use super::*;
use serde_json::json;

fn obj(name: &str, ns: &str, version: &str) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": ns,
           "nova_object.version": version, "nova_object.data": {"a": 1, "n": null}})
}

#[test]
fn parse_version_reads_major_and_minor_only() {
    let cases = [
        ("1.15", Some((1, 15))),
        ("4.5", Some((4, 5))),
        ("4", None),
        ("a.b", None),
        ("1.2.3", None),
    ];
    for (raw, want) in cases {
        assert_eq!(parse_version(raw), want, "{raw}");
    }
}

#[test]
fn wrong_object_name_names_expected_and_got() {
    let err =
        NovaObject::parse(&obj("Flavor", "nova", "1.2"), "RequestSpec", "spec_obj").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("spec_obj") && msg.contains("RequestSpec") && msg.contains("Flavor"),
        "{msg}"
    );
}

#[test]
fn foreign_namespace_and_bad_version_are_refused() {
    let ns = NovaObject::parse_any(&obj("Flavor", "cinder", "1.2"), "x").unwrap_err();
    assert!(ns.to_string().contains("nova_object.namespace"), "{ns}");
    let ver = NovaObject::parse_any(&obj("Flavor", "nova", "one"), "x").unwrap_err();
    assert!(ver.to_string().contains("nova_object.version"), "{ver}");
}

#[test]
fn absent_means_unset_and_null_means_none() {
    let v = obj("Flavor", "nova", "1.2");
    let o = NovaObject::parse(&v, "Flavor", "f").unwrap();
    assert_eq!(o.data.field("missing"), FieldValue::Unset);
    assert_eq!(o.data.field("n"), FieldValue::Null);
    assert_eq!(o.data.field("a"), FieldValue::Set(&json!(1)));
    assert_eq!(o.data.opt_size("n").unwrap(), None);
}
