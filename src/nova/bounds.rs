//! Upper bounds on what comes in, and the readers that enforce them.
//!
//! Every field the codec reads is bounded (README "Input bounds"): an integer size, amount
//! or count is at most [`MAX_SIZE`] (2^40); a name, host, node, id, trait, resource class,
//! extra-spec key or value at most [`MAX_NAME_BYTES`] (255, Nova's `String(255)` columns);
//! a scheduler-hint value at most [`MAX_TEXT_BYTES`]; a list or map at most [`MAX_ITEMS`]
//! entries. Ids that are UUIDs in Nova (instance uuids, compute node uuids) must be UUIDs
//! in the hyphenated form Nova writes; they are kept lowercased, so one instance is one key.

use super::error::{CodecError, Result};
use super::object::Fields;
use serde_json::Value;

/// The largest size, amount or count accepted (2^40).
pub const MAX_SIZE: i64 = 1 << 40;
/// The longest name, id, host, trait or extra spec accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// The longest scheduler-hint value accepted, in bytes.
pub const MAX_TEXT_BYTES: usize = 65_536;
/// The most entries of a list or map accepted.
pub const MAX_ITEMS: usize = 10_000;

/// Refuses a string longer than `max` bytes.
pub fn check_len(path: &str, s: &str, max: usize) -> Result<()> {
    if s.len() > max {
        return Err(CodecError::invalid(
            path,
            format!("must be at most {max} bytes, got {}", s.len()),
        ));
    }
    Ok(())
}

/// Refuses more than [`MAX_ITEMS`] entries.
pub fn check_count(path: &str, count: usize) -> Result<()> {
    if count > MAX_ITEMS {
        return Err(CodecError::invalid(
            path,
            format!("must have at most {MAX_ITEMS} entries, got {count}"),
        ));
    }
    Ok(())
}

/// [`check_len`], its path written only for an error: the field readers check every field
/// of every call, and valid input never needs the path (a `format!` each).
pub(super) fn check_len_at(path: impl FnOnce() -> String, s: &str, max: usize) -> Result<()> {
    if s.len() > max {
        return check_len(&path(), s, max);
    }
    Ok(())
}

/// A UUID in the hyphenated 8-4-4-4-12 form, lowercased.
pub fn uuid(path: &str, s: &str) -> Result<String> {
    uuid_at(|| path.to_string(), s)
}

/// [`uuid`], its path written only for an error.
fn uuid_at(path: impl FnOnce() -> String, s: &str) -> Result<String> {
    let hyphenated = s.len() == 36 && [8, 13, 18, 23].iter().all(|&i| s.as_bytes()[i] == b'-');
    if hyphenated && uuid::Uuid::try_parse(s).is_ok() {
        return Ok(s.to_ascii_lowercase());
    }
    let shown: String = s.chars().take(40).collect();
    Err(CodecError::invalid(
        path(),
        format!("must be a UUID (8-4-4-4-12 hex digits), got {shown:?}"),
    ))
}

impl<'a> Fields<'a> {
    /// A string of at most `max` bytes; `None` when unset or null.
    pub fn opt_text(&self, key: &str, max: usize) -> Result<Option<String>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::String(s)) => {
                check_len_at(|| self.path_of(key), s, max)?;
                Ok(Some(s.clone()))
            }
            Some(_) => Err(CodecError::invalid(self.path_of(key), "must be a string")),
        }
    }

    /// A UUID field; `None` when unset or null.
    pub fn opt_uuid(&self, key: &str) -> Result<Option<String>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::String(s)) => uuid_at(|| self.path_of(key), s).map(Some),
            Some(_) => Err(CodecError::invalid(
                self.path_of(key),
                "must be a UUID string",
            )),
        }
    }

    /// A required UUID field.
    pub fn req_uuid(&self, key: &str) -> Result<String> {
        self.opt_uuid(key)?
            .ok_or_else(|| CodecError::missing(self.path_of(key)))
    }

    /// A list of UUIDs (a lone string is a one-element list); `None` when unset or null.
    pub fn opt_uuid_list(&self, key: &str) -> Result<Option<Vec<String>>> {
        let Some(items) = self.opt_str_list(key)? else {
            return Ok(None);
        };
        items
            .iter()
            .enumerate()
            .map(|(i, s)| uuid_at(|| format!("{}[{i}]", self.path_of(key)), s))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// A JSON list of at most [`MAX_ITEMS`] values; `None` when unset or null.
    pub fn opt_list(&self, key: &str) -> Result<Option<&'a Vec<Value>>> {
        match self.field(key).value() {
            None => Ok(None),
            Some(Value::Array(items)) => {
                check_count(&self.path_of(key), items.len())?;
                Ok(Some(items))
            }
            Some(_) => Err(CodecError::invalid(self.path_of(key), "must be a list")),
        }
    }
}

/// A JSON list of at most [`MAX_ITEMS`] strings of at most 255 bytes.
pub fn strings(value: &Value, path: &str) -> Result<Vec<String>> {
    let Value::Array(items) = value else {
        return Err(CodecError::invalid(path, "must be a list of strings"));
    };
    check_count(path, items.len())?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = || format!("{path}[{i}]");
            match item {
                Value::String(s) => check_len_at(at, s, MAX_NAME_BYTES).map(|_| s.clone()),
                _ => Err(CodecError::invalid(at(), "must be a string")),
            }
        })
        .collect()
}

/// Refuses a uuid that appears twice in `uuids` (compared lowercased), naming both places.
pub fn refuse_duplicates(path: &str, uuids: &[String]) -> Result<()> {
    let mut seen = std::collections::HashMap::with_capacity(uuids.len());
    for (i, u) in uuids.iter().enumerate() {
        if let Some(first) = seen.insert(u.to_ascii_lowercase(), i) {
            return Err(CodecError::invalid(
                format!("{path}[{i}]"),
                format!("repeats {path}[{first}] ({u}): each instance is placed once"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_must_be_hyphenated_and_come_back_lowercased() {
        let cases = [
            ("178b0921-8f85-4257-88b6-2e743b5a975c", true),
            ("178B0921-8F85-4257-88B6-2E743B5A975C", true),
            ("178b09218f85425788b62e743b5a975c", false),
            ("{178b0921-8f85-4257-88b6-2e743b5a975c}", false),
            ("178b0921-8f85-4257-88b6-2e743b5a975g", false),
            ("u1", false),
            ("", false),
        ];
        for (s, ok) in cases {
            assert_eq!(uuid("x", s).is_ok(), ok, "{s}");
        }
        assert_eq!(
            uuid("x", "178B0921-8F85-4257-88B6-2E743B5A975C").unwrap(),
            "178b0921-8f85-4257-88b6-2e743b5a975c"
        );
    }

    #[test]
    fn a_repeated_uuid_names_both_places() {
        let a = "178b0921-8f85-4257-88b6-2e743b5a975c".to_string();
        let b = "6f1a2e4b-6b3b-4c8b-9c16-3b8c1f0a9c11".to_string();
        assert!(refuse_duplicates("instance_uuids", &[a.clone(), b.clone()]).is_ok());
        let err = refuse_duplicates("instance_uuids", &[a.clone(), b, a.to_uppercase()])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("instance_uuids[2] repeats instance_uuids[0]"),
            "{err}"
        );
    }

    #[test]
    fn long_strings_and_long_lists_are_refused_with_their_size() {
        let err = check_len("host", &"h".repeat(256), MAX_NAME_BYTES).unwrap_err();
        assert_eq!(err.to_string(), "host must be at most 255 bytes, got 256");
        assert!(check_len("host", &"h".repeat(255), MAX_NAME_BYTES).is_ok());
        assert!(check_count("l", MAX_ITEMS).is_ok());
        assert!(check_count("l", MAX_ITEMS + 1).is_err());
    }
}
