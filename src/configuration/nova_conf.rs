//! A nova.conf read as oslo.config reads it (`oslo_config/iniparser.py`): `[section]`
//! headers, `key = value` or `key: value` (split at the first of the two), `#` and `;`
//! comment lines, indented continuation lines, surrounding quotes removed, and a key repeated
//! in a section keeping every value (Nova's multi-valued options).

use std::collections::BTreeMap;

/// One option as written: its values (several for a repeated key) and the line of the first.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub values: Vec<String>,
    pub line: usize,
}

impl Entry {
    /// The value oslo.config uses for a single-valued option: the last one.
    pub fn last(&self) -> &str {
        self.values.last().map(String::as_str).unwrap_or("")
    }
}

/// Every option set in a nova.conf, by section (`DEFAULT` included) and key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NovaConf {
    pub sections: BTreeMap<String, BTreeMap<String, Entry>>,
}

/// A line oslo.config would refuse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl NovaConf {
    pub fn parse(text: &str) -> Result<NovaConf, ParseError> {
        let mut conf = NovaConf::default();
        let mut section: Option<String> = None;
        // The entry the next continuation line extends: (section, key).
        let mut open: Option<(String, String)> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: &str| ParseError {
                line,
                message: message.to_string(),
            };
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
                open = None;
                continue;
            }
            if raw.starts_with([' ', '\t']) {
                let (s, k) = open
                    .as_ref()
                    .ok_or_else(|| err("unexpected continuation line"))?;
                if let Some(value) = conf
                    .sections
                    .get_mut(s)
                    .and_then(|keys| keys.get_mut(k))
                    .and_then(|e| e.values.last_mut())
                {
                    value.push('\n');
                    value.push_str(trimmed);
                }
                continue;
            }
            if let Some(name) = trimmed.strip_prefix('[') {
                let name = name
                    .strip_suffix(']')
                    .ok_or_else(|| err("invalid section header"))?
                    .trim();
                if name.is_empty() {
                    return Err(err("empty section name"));
                }
                section = Some(name.to_string());
                open = None;
                continue;
            }
            let s = section
                .clone()
                .ok_or_else(|| err("an option before any [section]"))?;
            let split = match (trimmed.find('='), trimmed.find(':')) {
                (Some(e), Some(c)) => e.min(c),
                (Some(e), None) => e,
                (None, Some(c)) => c,
                (None, None) => {
                    return Err(err("a line that is neither key = value nor [section]"))
                }
            };
            let key = trimmed[..split].trim();
            if key.is_empty() {
                return Err(err("an option without a name"));
            }
            let value = unquote(trimmed[split + 1..].trim());
            let entry = conf
                .sections
                .entry(s.clone())
                .or_default()
                .entry(key.to_string())
                .or_insert(Entry {
                    values: Vec::new(),
                    line,
                });
            entry.values.push(value.to_string());
            open = Some((s, key.to_string()));
        }
        Ok(conf)
    }

    /// The entry of `key` in `section`.
    pub fn entry(&self, section: &str, key: &str) -> Option<&Entry> {
        self.sections.get(section).and_then(|keys| keys.get(key))
    }

    /// The value of a single-valued option.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.entry(section, key).map(Entry::last)
    }
}

fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

/// An oslo `ListOpt` value: comma-separated, each item trimmed, empty items dropped.
pub fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sections_options_comments_quotes_repeats_and_continuations() {
        let text = "[DEFAULT]\n# a comment\n;another\nhost = ctl1\ntransport_url: \"rabbit://u:p@h:5672/\"\n\
                    [filter_scheduler]\navailable_filters = a.b\navailable_filters = c.d\n\
                    enabled_filters = ComputeFilter,\n    ServerGroupAffinityFilter\n";
        let conf = NovaConf::parse(text).unwrap();
        assert_eq!(conf.get("DEFAULT", "host"), Some("ctl1"));
        assert_eq!(
            conf.get("DEFAULT", "transport_url"),
            Some("rabbit://u:p@h:5672/")
        );
        assert_eq!(
            conf.entry("filter_scheduler", "available_filters")
                .unwrap()
                .values,
            ["a.b", "c.d"]
        );
        let filters = conf.get("filter_scheduler", "enabled_filters").unwrap();
        assert_eq!(
            list(filters),
            ["ComputeFilter", "ServerGroupAffinityFilter"]
        );
        assert_eq!(conf.entry("DEFAULT", "host").unwrap().line, 4);
    }

    #[test]
    fn lines_oslo_refuses_are_refused_with_their_number() {
        let cases = [
            ("host = x\n", 1, "an option before any [section]"),
            (
                "[DEFAULT]\nnot an option\n",
                2,
                "a line that is neither key = value nor [section]",
            ),
            ("[DEFAULT\n", 1, "invalid section header"),
            ("[DEFAULT]\n= x\n", 2, "an option without a name"),
            (
                "[DEFAULT]\n\n  continued\n",
                3,
                "unexpected continuation line",
            ),
        ];
        for (text, line, message) in cases {
            let err = NovaConf::parse(text).unwrap_err();
            assert_eq!(
                (err.line, err.message.as_str()),
                (line, message),
                "{text:?}"
            );
        }
    }
}
