//! Reading Nova's versioned-object JSON (`nova_object.*`) and plain dicts, field by field.

use super::bounds::{check_len_at, MAX_NAME_BYTES, MAX_SIZE};
use super::error::{CodecError, Result};
use super::versions;
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

    /// A string field of at most 255 bytes (a name, host, node or id); `None` when unset or
    /// null. Longer strings are read with [`Fields::opt_text`].
    pub fn opt_str(&self, key: &str) -> Result<Option<String>> {
        self.opt_text(key, MAX_NAME_BYTES)
    }

    /// A required string field.
    pub fn req_str(&self, key: &str) -> Result<String> {
        self.opt_str(key)?
            .ok_or_else(|| CodecError::missing(self.path_of(key)))
    }

    /// A string or integer field read as a string (Nova ids are sometimes either), at most
    /// 255 bytes.
    pub fn opt_id(&self, key: &str) -> Result<Option<String>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::String(s)) => {
                check_len_at(|| self.path_of(key), s, MAX_NAME_BYTES)?;
                Ok(Some(s.clone()))
            }
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

    /// A non-negative integer field (a size or a count) of at most 2^40; `None` when unset
    /// or null.
    pub fn opt_size(&self, key: &str) -> Result<Option<i64>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if (0..=MAX_SIZE).contains(&n) => Ok(Some(n)),
                Some(n) if n > MAX_SIZE => Err(CodecError::invalid(
                    self.path_of(key),
                    format!("must be at most {MAX_SIZE} (2^40), got {n}"),
                )),
                _ => Err(CodecError::invalid(
                    self.path_of(key),
                    format!("must be a non-negative integer, got {}", shown(v)),
                )),
            },
        }
    }

    /// A required non-negative integer field.
    pub fn req_size(&self, key: &str) -> Result<i64> {
        self.opt_size(key)?
            .ok_or_else(|| CodecError::missing(self.path_of(key)))
    }

    /// A list of at most 10,000 strings of at most 255 bytes; a lone string is taken as a
    /// one-element list (older Nova sent `force_hosts` that way). `None` when unset or null.
    pub fn opt_str_list(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::String(s)) => {
                check_len_at(|| self.path_of(key), s, MAX_NAME_BYTES)?;
                Ok(Some(vec![s.clone()]))
            }
            Some(v @ Value::Array(_)) => super::bounds::strings(v, &self.path_of(key)).map(Some),
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
    /// Reads a versioned object whose name must be `expected`, of the major this codec
    /// reads for it.
    pub fn parse(value: &'a Value, expected: &str, path: impl Into<String>) -> Result<Self> {
        let obj = Self::parse_header(value, path)?;
        if obj.name != expected {
            return Err(CodecError::WrongObject {
                path: obj.data.path,
                expected: expected.to_string(),
                got: obj.name.to_string(),
            });
        }
        versions::check(obj.name, obj.version, &obj.data.path)?;
        Ok(obj)
    }

    /// Reads a versioned object of any name this codec knows (namespace `nova`), of the
    /// major it reads for that name.
    pub fn parse_any(value: &'a Value, path: impl Into<String>) -> Result<Self> {
        let obj = Self::parse_header(value, path)?;
        versions::check(obj.name, obj.version, &obj.data.path)?;
        Ok(obj)
    }

    fn parse_header(value: &'a Value, path: impl Into<String>) -> Result<Self> {
        let head = Fields::new(value, path)?;
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
        let raw = head.req_str("nova_object.version")?;
        let version = parse_version(&raw).ok_or_else(|| {
            CodecError::invalid(
                head.path_of("nova_object.version"),
                format!("must be \"major.minor\", got {raw:?}"),
            )
        })?;
        let data = match head.field("nova_object.data") {
            FieldValue::Set(d) => d,
            _ => return Err(CodecError::missing(head.path_of("nova_object.data"))),
        };
        let data = Fields::new(data, head.path)?;
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

/// A JSON value shown in an error message, cut to 40 characters.
pub fn shown(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// True when `value` looks like a versioned object rather than a plain dict.
pub fn is_nova_object(value: &Value) -> bool {
    value.get("nova_object.name").is_some()
}

#[cfg(test)]
mod tests;
