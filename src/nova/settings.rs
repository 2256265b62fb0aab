//! Reading one setting from the flavor's extra specs and the image's properties together,
//! as `nova.virt.hardware._get_flavor_image_meta` does, with the value checks of Nova's
//! API extra-spec validators: a malformed value is a codec error naming the key.

use super::error::{CodecError, Result};
use super::image::Image;
use std::collections::BTreeMap;

/// The extra specs of a flavor and the properties of its image, with the paths that
/// locate them in error messages.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    pub extra_specs: &'a BTreeMap<String, String>,
    pub image: Option<&'a Image>,
    /// `spec_obj.flavor.extra_specs`.
    pub specs_path: &'a str,
    /// `spec_obj.image.properties`.
    pub props_path: &'a str,
}

/// oslo's `strutils.bool_from_string` words (compared lowercased, trimmed).
const TRUE_WORDS: [&str; 6] = ["1", "t", "true", "on", "y", "yes"];
const FALSE_WORDS: [&str; 6] = ["0", "f", "false", "off", "n", "no"];

impl<'a> Settings<'a> {
    /// The error path of an extra spec.
    pub fn spec_path(&self, key: &str) -> String {
        format!("{}.{key}", self.specs_path)
    }

    /// The error path of an image property.
    pub fn prop_path(&self, key: &str) -> String {
        format!("{}.{key}", self.props_path)
    }

    /// An extra spec's value.
    pub fn spec(&self, key: &str) -> Option<&'a str> {
        self.extra_specs.get(key).map(String::as_str)
    }

    /// An image property's value as text.
    pub fn prop(&self, key: &str) -> Option<String> {
        self.image.and_then(|i| i.text(key))
    }

    /// An extra spec that must be one of `allowed` when set.
    pub fn spec_enum(&self, key: &str, allowed: &[&str]) -> Result<Option<&'a str>> {
        match self.spec(key) {
            Some(v) => one_of(&self.spec_path(key), v, allowed).map(Some),
            None => Ok(None),
        }
    }

    /// An image property that must be one of `allowed` when set.
    pub fn prop_enum(&self, key: &str, allowed: &[&str]) -> Result<Option<String>> {
        match self.prop(key) {
            Some(v) => {
                one_of(&self.prop_path(key), &v, allowed)?;
                Ok(Some(v))
            }
            None => Ok(None),
        }
    }

    /// An extra spec read as a boolean (oslo's words), when set.
    pub fn spec_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.spec(key) {
            Some(v) => boolean(&self.spec_path(key), v).map(Some),
            None => Ok(None),
        }
    }

    /// An image property read as a boolean, when set.
    pub fn prop_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.prop(key) {
            Some(v) => boolean(&self.prop_path(key), &v).map(Some),
            None => Ok(None),
        }
    }

    /// `hw:<key>` / `hw_<key>` (or `os:`/`os_`) that must be one of `allowed` and must not
    /// differ between flavor and image (`_get_unique_flavor_image_meta`); the flavor's
    /// value wins when only one is set.
    pub fn unique(&self, prefix: &str, key: &str, allowed: &[&str]) -> Result<Option<String>> {
        let spec_key = format!("{prefix}:{key}");
        let prop_key = format!("{prefix}_{key}");
        let flavor = self
            .spec_enum(&spec_key, allowed)?
            .filter(|v| !v.is_empty());
        let image = self
            .prop_enum(&prop_key, allowed)?
            .filter(|v| !v.is_empty());
        if let (Some(f), Some(i)) = (flavor, image.as_deref()) {
            if f != i {
                return Err(self.conflict(&spec_key, f, &prop_key, i));
            }
        }
        Ok(flavor.map(str::to_string).or(image))
    }

    /// A boolean `hw:<key>` / `hw_<key>` pair that must agree when both are set; true when
    /// either asks for it.
    pub fn agreeing_bools(&self, key: &str) -> Result<bool> {
        let spec_key = format!("hw:{key}");
        let prop_key = format!("hw_{key}");
        let flavor = self.spec_bool(&spec_key)?;
        let image = self.prop_bool(&prop_key)?;
        if let (Some(f), Some(i)) = (flavor, image) {
            if f != i {
                return Err(self.conflict(&spec_key, &f.to_string(), &prop_key, &i.to_string()));
            }
        }
        Ok(flavor.unwrap_or(false) || image.unwrap_or(false))
    }

    /// Nova's FlavorImageConflict, located at the extra spec.
    pub fn conflict(&self, spec_key: &str, spec: &str, prop_key: &str, prop: &str) -> CodecError {
        CodecError::invalid(
            self.spec_path(spec_key),
            format!(
                "is {spec:?}, conflicting with the image's {prop_key} {prop:?} \
                 (Nova refuses this flavor and image together)"
            ),
        )
    }
}

/// `value` when it is one of `allowed`, else an error listing them.
pub fn one_of<'v>(path: &str, value: &'v str, allowed: &[&str]) -> Result<&'v str> {
    if allowed.contains(&value) {
        return Ok(value);
    }
    Err(CodecError::invalid(
        path,
        format!("is {value:?}, not one of: {}", allowed.join(", ")),
    ))
}

/// A boolean written in one of oslo's words.
pub fn boolean(path: &str, value: &str) -> Result<bool> {
    let word = value.trim().to_ascii_lowercase();
    if TRUE_WORDS.contains(&word.as_str()) {
        return Ok(true);
    }
    if FALSE_WORDS.contains(&word.as_str()) {
        return Ok(false);
    }
    Err(CodecError::invalid(
        path,
        format!("is {value:?}, not a boolean (true/false, yes/no, on/off, 1/0)"),
    ))
}

/// A non-negative integer as Python's `int()` reads it (surrounding blanks, a sign,
/// underscores between digits), at most 2^40.
pub fn amount(path: &str, value: &str) -> Result<u64> {
    let bad = || {
        CodecError::invalid(
            path,
            format!("is {value:?}, not a non-negative integer amount"),
        )
    };
    let t = value.trim();
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'+') => (false, &t[1..]),
        Some(b'-') => (true, &t[1..]),
        _ => (false, t),
    };
    let well_formed = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    if !well_formed {
        return Err(bad());
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    let n: u64 = match clean.trim_start_matches('0') {
        "" => 0,
        rest if rest.len() > 13 => u64::MAX,
        rest => rest.parse().map_err(|_| bad())?,
    };
    if negative && n > 0 {
        return Err(bad());
    }
    if n > super::bounds::MAX_SIZE as u64 {
        return Err(CodecError::invalid(
            path,
            format!("is {value:?}, more than {} (2^40)", super::bounds::MAX_SIZE),
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_like_python_int_and_refuse_the_rest() {
        let cases = [
            ("4", Some(4)),
            (" +3 ", Some(3)),
            ("007", Some(7)),
            ("1_000", Some(1000)),
            ("-0", Some(0)),
            ("0", Some(0)),
            ("1099511627776", Some(1 << 40)),
            ("1099511627777", None),
            ("99999999999999999999999", None),
            ("-1", None),
            ("abc", None),
            ("1.5", None),
            ("", None),
            ("1__0", None),
            ("_1", None),
            ("+", None),
        ];
        for (raw, want) in cases {
            assert_eq!(amount("k", raw).ok(), want, "{raw:?}");
        }
    }

    #[test]
    fn booleans_take_oslo_words_only() {
        for (raw, want) in [
            ("Yes", Some(true)),
            (" on ", Some(true)),
            ("0", Some(false)),
            ("maybe", None),
        ] {
            assert_eq!(boolean("k", raw).ok(), want, "{raw:?}");
        }
    }
}
