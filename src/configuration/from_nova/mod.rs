//! `parasol config from-nova nova.conf`: the `parasol.toml` that keeps a cloud's own scheduler
//! options, and a warning naming each option it cannot carry.
//!
//! # Layout
//! - `policy`: filters, weighers and multipliers, looked up in Parasol's policy registry (so
//!   one added there is carried from then on).
//! - `metrics`: `[metrics]`, the options of `MetricsFilter` and `MetricsWeigher`.
//! - `links`: the broker (`transport_url`) and Placement's Keystone credentials.

mod links;
mod metrics;
mod policy;
#[cfg(test)]
mod tests;

pub use policy::{IMPLICIT_FILTERS, NOVA_ALL_WEIGHERS, NOVA_DEFAULT_FILTERS};

use super::nova_conf::NovaConf;
use toml::Value;

/// Sections whose every option is either carried or warned about; the others hold nothing
/// the scheduler reads and are named in one note.
const READ_SECTIONS: [&str; 6] = [
    "DEFAULT",
    "scheduler",
    "filter_scheduler",
    "placement",
    "oslo_messaging_rabbit",
    "metrics",
];

/// `[DEFAULT]` options that are not the scheduler's (logging, paths, …): not warned about.
/// Every other `[DEFAULT]` option is warned about only when it is a scheduler option, listed
/// here as what Nova's scheduler reads from `[DEFAULT]`.
const DEFAULT_SCHEDULER_OPTIONS: [&str; 6] = [
    "cpu_allocation_ratio",
    "ram_allocation_ratio",
    "disk_allocation_ratio",
    "initial_cpu_allocation_ratio",
    "initial_ram_allocation_ratio",
    "initial_disk_allocation_ratio",
];

/// The produced file and the warnings, one per option not carried.
#[derive(Debug, Default)]
pub struct Translation {
    pub toml: String,
    pub warnings: Vec<String>,
}

/// One carried option: Parasol key, value, and the Nova option it came from.
type Carried = (String, Value, String);

/// The options carried so far, by Parasol section; the Nova options read; the warnings.
#[derive(Default)]
struct Out {
    sections: Vec<(&'static str, Vec<Carried>)>,
    read: Vec<(String, String)>,
    warnings: Vec<String>,
}

impl Out {
    fn set(&mut self, section: &'static str, key: &str, value: Value, from: impl Into<String>) {
        let index = match self.sections.iter().position(|(s, _)| *s == section) {
            Some(i) => i,
            None => {
                self.sections.push((section, Vec::new()));
                self.sections.len() - 1
            }
        };
        self.sections[index]
            .1
            .push((key.to_string(), value, from.into()));
    }

    /// Marks a Nova option as handled (carried, or warned about already).
    fn read(&mut self, section: &str, key: &str) {
        self.read.push((section.to_string(), key.to_string()));
    }

    fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    /// The value of `[section] key` converted like `like` (integer, float, bool or string),
    /// marked as read; a value of the wrong type is warned about and not carried.
    fn typed(&mut self, conf: &NovaConf, section: &str, key: &str, like: &Value) -> Option<Value> {
        let raw = conf.get(section, key)?;
        self.read(section, key);
        let value = match like {
            Value::Integer(_) => raw.parse().ok().map(Value::Integer),
            Value::Float(_) => raw.parse().ok().map(Value::Float),
            Value::Boolean(_) => truthy(raw).map(Value::Boolean),
            _ => Some(Value::String(raw.to_string())),
        };
        if value.is_none() {
            self.warn(format!(
                "[{section}] {key} = {raw:?} is not {}: not carried",
                like.type_str()
            ));
        }
        value
    }
}

/// oslo.config's boolean spellings.
fn truthy(raw: &str) -> Option<bool> {
    match raw.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Translates a parsed nova.conf; `source` names it in the output's header.
pub fn translate(conf: &NovaConf, source: &str) -> Translation {
    let mut out = Out::default();
    out.set(
        "scheduler",
        "backend",
        Value::String("filter".into()),
        "as nova-scheduler decides (README \"Backends\": caching, asc, apsr)",
    );
    policy::carry(conf, &mut out);
    let simple: [(&str, &str, &'static str, &str, Value); 5] = [
        (
            "scheduler",
            "max_attempts",
            "scheduler",
            "max_attempts",
            Value::Integer(0),
        ),
        (
            "DEFAULT",
            "service_down_time",
            "policy",
            "host_timeout_s",
            Value::Integer(0),
        ),
        (
            "DEFAULT",
            "control_exchange",
            "amqp",
            "exchange",
            Value::String(String::new()),
        ),
        (
            "DEFAULT",
            "host",
            "rpc",
            "host",
            Value::String(String::new()),
        ),
        (
            "DEFAULT",
            "default_availability_zone",
            "policy",
            "default_availability_zone",
            Value::String(String::new()),
        ),
    ];
    for (section, key, to_section, to_key, like) in simple {
        if let Some(v) = out.typed(conf, section, key, &like) {
            out.set(to_section, to_key, v, format!("[{section}] {key}"));
        }
    }
    out.set(
        "rpc",
        "enabled",
        Value::Boolean(true),
        "serve Nova's scheduler RPC",
    );
    links::transport(conf, &mut out);
    links::placement(conf, &mut out);
    links::nova_db(conf, &mut out);
    links::notifications(conf, &mut out);
    let on = Some(Value::Boolean(true));
    if out.typed(conf, "DEFAULT", "debug", &Value::Boolean(false)) == on {
        out.set(
            "log",
            "level",
            Value::String("debug".into()),
            "[DEFAULT] debug",
        );
    }
    if out.typed(conf, "DEFAULT", "use_json", &Value::Boolean(false)) == on {
        out.set(
            "log",
            "format",
            Value::String("json".into()),
            "[DEFAULT] use_json",
        );
    }
    leftovers(conf, &mut out);
    Translation {
        toml: render(&out, source),
        warnings: out.warnings,
    }
}

/// Warns for each option of the read sections that nothing carried, and names the sections
/// not read at all.
fn leftovers(conf: &NovaConf, out: &mut Out) {
    let mut ignored = Vec::new();
    for (section, keys) in &conf.sections {
        if !READ_SECTIONS.contains(&section.as_str()) {
            // A section one option of which was carried ([api_database] connection) is read.
            if !out.read.iter().any(|(s, _)| s == section) {
                ignored.push(format!("[{section}]"));
            }
            continue;
        }
        for key in keys.keys() {
            let handled = out.read.iter().any(|(s, k)| s == section && k == key);
            let relevant =
                section != "DEFAULT" || DEFAULT_SCHEDULER_OPTIONS.contains(&key.as_str());
            if handled || !relevant {
                continue;
            }
            let why = match (section.as_str(), key.as_str()) {
                ("DEFAULT", _) => "Parasol takes allocation ratios from each host's inventory (Placement or its host-state events)",
                ("placement", "insecure") => "Parasol always verifies Placement's and Keystone's certificates: trust their CA with [placement] cafile",
                ("placement", "certfile" | "keyfile") => "Parasol presents no client certificate to Placement",
                _ => "Parasol has no such option",
            };
            out.warn(format!("[{section}] {key} is not carried: {why}"));
        }
    }
    if !ignored.is_empty() {
        out.warn(format!(
            "not read, as they hold no scheduler options: {}",
            ignored.join(", ")
        ));
    }
}

/// The TOML text: a header, then each section with a comment naming each value's origin.
fn render(out: &Out, source: &str) -> String {
    let mut text = format!(
        "# Parasol configuration made by `parasol config from-nova {source}`.\n\
         # Only the options the cloud set are written; every other key keeps Parasol's default\n\
         # (etc/parasol.toml documents each). Check it with `parasol config check FILE`.\n"
    );
    for (section, entries) in &out.sections {
        text.push_str(&format!("\n[{section}]\n"));
        for (key, value, from) in entries {
            for line in wrap(from, 94) {
                text.push_str(&format!("# {line}\n"));
            }
            text.push_str(&format!("{key} = {value}\n"));
        }
    }
    text
}

/// `text` in lines of at most `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("lines is never empty");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}
