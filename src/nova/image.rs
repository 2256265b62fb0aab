//! Nova's ImageMeta (or a legacy image dict): the id, the disk format and the properties
//! that shape the resource request. Other properties are not kept.

use super::bounds::{check_len, MAX_NAME_BYTES};
use super::error::{CodecError, Result};
use super::object::{is_nova_object, shown, Fields, NovaObject};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The image properties the resource request reads, by their ImageMetaProps names.
/// `traits_required` is a list, these others are single values.
pub const SCALAR_PROPS: [&str; 23] = [
    "hw_cpu_policy",
    "hw_cpu_thread_policy",
    "hw_cpu_realtime_mask",
    "hw_tpm_version",
    "hw_tpm_model",
    "hw_pci_numa_affinity_policy",
    "os_secure_boot",
    "hw_maxphysaddr_mode",
    "hw_firmware_type",
    "hw_firmware_stateless",
    "hw_virtio_packed_ring",
    "hw_ephemeral_encryption",
    "hw_ephemeral_encryption_format",
    "hw_sound_model",
    "hw_mem_encryption",
    "hw_mem_encryption_model",
    "hw_cdrom_bus",
    "hw_disk_bus",
    "hw_video_model",
    "hw_vif_model",
    "hw_architecture",
    "hw_emulation_architecture",
    "hw_viommu_model",
];

/// One image property value: ImageMetaProps sends strings, booleans and integers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum PropValue {
    Text(String),
    Bool(bool),
}

/// The parts of an image a scheduler reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Image {
    pub id: Option<String>,
    pub name: Option<String>,
    /// `disk_format` (`qcow2`, `raw`, …), when set.
    pub disk_format: Option<String>,
    /// `properties.traits_required`, in the image's order.
    pub traits_required: Vec<String>,
    /// The properties of [`SCALAR_PROPS`] that are set (not null).
    pub props: BTreeMap<String, PropValue>,
    /// Every property that is set and true in Python's sense (not null, `false`, 0, `""`,
    /// `[]` or `{}`), as Python's `str()` renders it: what Nova's
    /// `AggregateImagePropertiesIsolation` compares with aggregate metadata (`True` for a
    /// boolean, `['a', 'b']` for a list).
    pub truthy_text: BTreeMap<String, String>,
}

impl Image {
    /// Reads an ImageMeta primitive, or a plain image dict as legacy requests carry it
    /// (`properties` then a plain dict whose values may be strings).
    pub fn from_value(value: &Value, path: String) -> Result<Self> {
        let data = if is_nova_object(value) {
            NovaObject::parse(value, "ImageMeta", path)?.data
        } else {
            Fields::new(value, path)?
        };
        let props = match data.field("properties").value() {
            None => None,
            Some(v) if is_nova_object(v) => {
                Some(NovaObject::parse(v, "ImageMetaProps", data.path_of("properties"))?.data)
            }
            Some(v) => Some(Fields::new(v, data.path_of("properties"))?),
        };
        let mut image = Image {
            id: data.opt_id("id")?,
            name: data.opt_str("name")?,
            disk_format: data.opt_str("disk_format")?,
            ..Image::default()
        };
        if let Some(p) = props {
            image.traits_required = p.opt_str_list("traits_required")?.unwrap_or_default();
            for key in SCALAR_PROPS {
                if let Some(v) = read_prop(&p, key)? {
                    image.props.insert(key.to_string(), v);
                }
            }
            image.truthy_text = p
                .map()
                .iter()
                .filter(|(_, v)| python_truthy(v))
                .map(|(k, v)| (k.clone(), python_str(v)))
                .collect();
        }
        Ok(image)
    }

    /// A property as text (booleans as `true`/`false`), when set.
    pub fn text(&self, key: &str) -> Option<String> {
        self.props.get(key).map(|v| match v {
            PropValue::Text(s) => s.clone(),
            PropValue::Bool(b) => b.to_string(),
        })
    }
}

/// Python's truth value of a JSON value (`None`, `False`, 0, empty text or container: false).
fn python_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python's `str()` of a JSON value as the primitive decodes it: text as it is, `True` /
/// `False`, `None`, integers as written, floats with a fraction (`2.0`), lists and dicts
/// with `repr` of their items (`['a', 1]`, `{'k': 'v'}`).
fn python_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

fn python_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 1e16 {
                format!("{f:.1}")
            } else {
                f.to_string()
            }
        }
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            if s.contains('\'') && !s.contains('"') {
                format!("\"{}\"", s.replace('\\', "\\\\"))
            } else {
                format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
            }
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!(
                    "{}: {}",
                    python_repr(&Value::String(k.clone())),
                    python_repr(v)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn read_prop(p: &Fields<'_>, key: &str) -> Result<Option<PropValue>> {
    let path = p.path_of(key);
    match p.field(key).value() {
        None => Ok(None),
        Some(Value::String(s)) => {
            check_len(&path, s, MAX_NAME_BYTES)?;
            Ok(Some(PropValue::Text(s.clone())))
        }
        Some(Value::Bool(b)) => Ok(Some(PropValue::Bool(*b))),
        Some(Value::Number(n)) => Ok(Some(PropValue::Text(n.to_string()))),
        Some(other) => Err(CodecError::invalid(
            path,
            format!("must be a string or a boolean, got {}", shown(other)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_image_meta_primitive_and_keeps_only_the_properties_it_uses() {
        let v = json!({"nova_object.name": "ImageMeta", "nova_object.namespace": "nova",
            "nova_object.version": "1.8", "nova_object.data": {"id": "i", "disk_format": "raw",
            "properties": {"nova_object.name": "ImageMetaProps", "nova_object.namespace": "nova",
                "nova_object.version": "1.44", "nova_object.data": {"traits_required": ["CUSTOM_A"],
                "hw_cpu_policy": "dedicated", "hw_firmware_stateless": true, "hw_qemu_guest_agent": true,
                "hw_tpm_version": null}}}});
        let image = Image::from_value(&v, "image".into()).unwrap();
        assert_eq!(image.disk_format.as_deref(), Some("raw"));
        assert_eq!(image.traits_required, vec!["CUSTOM_A"]);
        assert_eq!(image.text("hw_cpu_policy").as_deref(), Some("dedicated"));
        assert_eq!(image.text("hw_firmware_stateless").as_deref(), Some("true"));
        assert_eq!(image.props.len(), 2);
    }

    #[test]
    fn every_truthy_property_is_kept_as_pythons_str_renders_it() {
        let v = json!({"nova_object.name": "ImageMeta", "nova_object.namespace": "nova",
            "nova_object.version": "1.8", "nova_object.data": {"properties": {
                "nova_object.name": "ImageMetaProps", "nova_object.namespace": "nova",
                "nova_object.version": "1.44", "nova_object.data": {
                "os_type": "linux", "hw_qemu_guest_agent": true, "hw_pmu": false,
                "hw_video_ram": 8, "hw_rng_rate": 0, "img_version": 2.0, "hw_numa_cpus": [[0, 1]],
                "traits_required": ["CUSTOM_A", "it's"], "img_signature": "", "hw_numa_mem": [],
                "img_hv_type": null, "extra": {"k": "v"}}}}});
        let image = Image::from_value(&v, "image".into()).unwrap();
        let want: BTreeMap<String, String> = [
            ("os_type", "linux"),
            ("hw_qemu_guest_agent", "True"),
            ("hw_video_ram", "8"),
            ("img_version", "2.0"),
            ("hw_numa_cpus", "[[0, 1]]"),
            ("traits_required", "['CUSTOM_A', \"it's\"]"),
            ("extra", "{'k': 'v'}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            image.truthy_text, want,
            "false, 0, empty and null are left out"
        );
    }

    #[test]
    fn a_legacy_image_dict_is_read_the_same_way() {
        let v = json!({"id": "i", "properties": {"hw_cpu_policy": "shared", "traits_required": "CUSTOM_B"}});
        let image = Image::from_value(&v, "image".into()).unwrap();
        assert_eq!(image.traits_required, vec!["CUSTOM_B"]);
        assert_eq!(image.text("hw_cpu_policy").as_deref(), Some("shared"));
    }

    #[test]
    fn bad_properties_and_a_newer_major_are_refused() {
        let props = |data: Value, version: &str| {
            json!({"nova_object.name": "ImageMeta", "nova_object.namespace": "nova",
            "nova_object.version": "1.8", "nova_object.data": {"properties": {
                "nova_object.name": "ImageMetaProps", "nova_object.namespace": "nova",
                "nova_object.version": version, "nova_object.data": data}}})
        };
        let cases = [
            (
                props(json!({"hw_cpu_policy": ["x"]}), "1.44"),
                "image.properties.hw_cpu_policy must be a string",
            ),
            (
                props(json!({"traits_required": [1]}), "1.44"),
                "image.properties.traits_required[0] must be a string",
            ),
            (
                props(json!({"hw_disk_bus": "v".repeat(300)}), "1.44"),
                "at most 255 bytes",
            ),
            (props(json!({}), "2.0"), "version 2.0 is not supported"),
        ];
        for (v, want) in cases {
            let err = Image::from_value(&v, "image".into())
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }
}
