//! Reading Nova's versioned-object JSON (`nova_object.*`) and plain dicts, field by field.

use super::error::{CodecError, Result};
use serde_json::{Map, Value};

/// A field of `nova_object.data` (or of a dict): unset, explicitly null, or set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldValue<'a> {
    /// The key is absent: Nova's "unset".
    Unset,
    /// The key is present with `null`.
    Null,
    /// The key is present with a value.
    Set(&'a Value),
}

impl<'a> FieldValue<'a> {
    /// The value when set, `None` when unset or null.
    pub fn value(self) -> Option<&'a Value> {
        match self {
            FieldValue::Set(v) => Some(v),
            _ => None,
        }
    }
}

/// Parses a `"major.minor"` version string.
pub fn parse_version(version: &str) -> Option<(u32, u32)> {
    let (major, minor) = version.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// A JSON object being read, with the dotted path used in error messages.
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Fields<'a> {
    /// Wraps `value`, which must be a JSON object.
    pub fn new(value: &'a Value, path: impl Into<String>) -> Result<Self> {
        let path = path.into();
        match value.as_object() {
            Some(map) => Ok(Fields { map, path }),
            None if path.is_empty() => {
                Err(CodecError::invalid("the message", "must be a JSON object"))
            }
            None => Err(CodecError::invalid(path, "must be a JSON object")),
        }
    }

    /// The dotted path of this object.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The dotted path of one of its fields.
    pub fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The raw field.
    pub fn field(&self, key: &str) -> FieldValue<'a> {
        match self.map.get(key) {
            None => FieldValue::Unset,
            Some(Value::Null) => FieldValue::Null,
            Some(v) => FieldValue::Set(v),
        }
    }

    /// The field's value, or a `Missing` error when unset or null.
    pub fn required(&self, key: &str) -> Result<&'a Value> {
        self.field(key)
            .value()
            .ok_or_else(|| CodecError::missing(self.path_of(key)))
    }

    /// A string field; `None` when unset or null.
    pub fn opt_str(&self, key: &str) -> Result<Option<String>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(CodecError::invalid(self.path_of(key), "must be a string")),
        }
    }

    /// A required string field.
    pub fn req_str(&self, key: &str) -> Result<String> {
        self.opt_str(key)?
            .ok_or_else(|| CodecError::missing(self.path_of(key)))
    }

    /// A string or integer field read as a string (Nova ids are sometimes either).
    pub fn opt_id(&self, key: &str) -> Result<Option<String>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(CodecError::invalid(self.path_of(key), "must be a string")),
        }
    }

    /// A boolean field; `None` when unset or null.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(CodecError::invalid(self.path_of(key), "must be a boolean")),
        }
    }

    /// A non-negative integer field (a size or a count); `None` when unset or null.
    pub fn opt_size(&self, key: &str) -> Result<Option<i64>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if n >= 0 => Ok(Some(n)),
                _ => Err(CodecError::invalid(
                    self.path_of(key),
                    format!("must be a non-negative integer, got {v}"),
                )),
            },
        }
    }

    /// A required non-negative integer field.
    pub fn req_size(&self, key: &str) -> Result<i64> {
        self.opt_size(key)?
            .ok_or_else(|| CodecError::missing(self.path_of(key)))
    }

    /// A list of strings; a lone string is taken as a one-element list (older Nova sent
    /// `force_hosts` that way). `None` when unset or null.
    pub fn opt_str_list(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(vec![s.clone()])),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(CodecError::invalid(
                        format!("{}[{i}]", self.path_of(key)),
                        "must be a string",
                    )),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(_) => Err(CodecError::invalid(
                self.path_of(key),
                "must be a list of strings",
            )),
        }
    }

    /// A nested JSON object (a plain dict); `None` when unset or null.
    pub fn opt_dict(&self, key: &str) -> Result<Option<Fields<'a>>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(v) => Fields::new(v, self.path_of(key)).map(Some),
        }
    }

    /// A nested versioned object named `expected`; `None` when unset or null.
    pub fn opt_object(&self, key: &str, expected: &str) -> Result<Option<NovaObject<'a>>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(v) => NovaObject::parse(v, expected, self.path_of(key)).map(Some),
        }
    }

    /// The underlying map.
    pub fn map(&self) -> &'a Map<String, Value> {
        self.map
    }
}

/// A decoded versioned-object header with access to its `nova_object.data`.
#[derive(Clone, Debug)]
pub struct NovaObject<'a> {
    /// `nova_object.name`.
    pub name: &'a str,
    /// `nova_object.version` as (major, minor).
    pub version: (u32, u32),
    /// `nova_object.data`.
    pub data: Fields<'a>,
}

impl<'a> NovaObject<'a> {
    /// Reads a versioned object whose name must be `expected`.
    pub fn parse(value: &'a Value, expected: &str, path: impl Into<String>) -> Result<Self> {
        let obj = Self::parse_any(value, path)?;
        if obj.name != expected {
            return Err(CodecError::WrongObject {
                path: obj.data.path,
                expected: expected.to_string(),
                got: obj.name.to_string(),
            });
        }
        Ok(obj)
    }

    /// Reads a versioned object of any name (namespace must still be `nova`).
    pub fn parse_any(value: &'a Value, path: impl Into<String>) -> Result<Self> {
        let path = path.into();
        let head = Fields::new(value, path.clone())?;
        let name = match head.field("nova_object.name").value() {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => {
                return Err(CodecError::invalid(
                    head.path_of("nova_object.name"),
                    "must be a string",
                ))
            }
            None => return Err(CodecError::missing(head.path_of("nova_object.name"))),
        };
        match head.field("nova_object.namespace").value() {
            Some(Value::String(ns)) if ns == "nova" => {}
            Some(other) => {
                return Err(CodecError::invalid(
                    head.path_of("nova_object.namespace"),
                    format!("must be \"nova\", got {other}"),
                ))
            }
            None => return Err(CodecError::missing(head.path_of("nova_object.namespace"))),
        }
        let version_path = head.path_of("nova_object.version");
        let raw = head.req_str("nova_object.version")?;
        let version = parse_version(&raw).ok_or_else(|| {
            CodecError::invalid(
                &version_path,
                format!("must be \"major.minor\", got {raw:?}"),
            )
        })?;
        let data = match head.field("nova_object.data") {
            FieldValue::Set(d) => Fields::new(d, path)?,
            _ => return Err(CodecError::missing(head.path_of("nova_object.data"))),
        };
        Ok(NovaObject {
            name,
            version,
            data,
        })
    }

    /// Refuses a major version other than `major`.
    pub fn require_major(&self, major: u32) -> Result<()> {
        if self.version.0 == major {
            return Ok(());
        }
        Err(CodecError::UnsupportedVersion {
            path: format!("{} ({})", self.data.path, self.name),
            version: format!("{}.{}", self.version.0, self.version.1),
            supported: format!("{major}.x"),
        })
    }
}

/// True when `value` looks like a versioned object rather than a plain dict.
pub fn is_nova_object(value: &Value) -> bool {
    value.get("nova_object.name").is_some()
}

#[cfg(test)]
mod tests {
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
        let err = NovaObject::parse(&obj("Flavor", "nova", "1.2"), "RequestSpec", "spec_obj")
            .unwrap_err();
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
}
