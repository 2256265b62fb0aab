//! Reading the settings: the file, then `PARASOL__SECTION__KEY` variables, merged by the
//! `config` crate; Nova's `[filter_scheduler]` names folded into `[policy]`; every key checked
//! against the known ones (with the nearest as a suggestion) before serde reads the values, so
//! an error names the key, where it came from and what would be valid.

use super::{nearest, Settings};
use config::{Map, Value, ValueKind};
use serde_json::Value as Json;
use std::fmt;
use std::path::{Path, PathBuf};

/// The origin `config` gives the values of environment variables.
const ENVIRONMENT: &str = "the environment";
/// Nova's section whose options Parasol keeps under `[policy]` with the same names.
pub const NOVA_SECTION: &str = "filter_scheduler";
/// `[policy]` keys that are not Nova options (so not accepted in `[filter_scheduler]`).
const PARASOL_ONLY_POLICY_KEYS: [&str; 10] = [
    "algorithm",
    // Nova's are in [metrics], carried by `parasol config from-nova`.
    "metrics_weight_setting",
    "metrics_required",
    "metrics_weight_of_unavailable",
    "metrics_weight_multiplier",
    // Nova's is in [DEFAULT], carried by `parasol config from-nova`.
    "default_availability_zone",
    "host_timeout_s",
    "host_name_weights",
    "host_name_weight_multiplier",
    "flex_weight_multiplier",
];

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("invalid configuration: key `{key}` {message}")]
    Key { key: String, message: String },
}

impl ConfigError {
    pub(super) fn key(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Key {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// What a load read: a file (and the environment), or no file at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    DefaultsAndEnvironment,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(path) => write!(f, "{}", path.display()),
            Source::DefaultsAndEnvironment => f.write_str("no file: defaults and environment"),
        }
    }
}

impl Settings {
    /// Reads `path` (required when `explicit`, else optional), then the environment.
    pub fn load(path: &Path, explicit: bool) -> Result<Settings, ConfigError> {
        Self::load_with_source(path, explicit).map(|(settings, _)| settings)
    }

    /// Like [`Settings::load`], also saying whether a file was read.
    pub fn load_with_source(
        path: &Path,
        explicit: bool,
    ) -> Result<(Settings, Source), ConfigError> {
        if explicit && !path.is_file() {
            return Err(ConfigError::File {
                path: path.to_path_buf(),
                message: "does not exist or is not a file".into(),
            });
        }
        let source = if path.is_file() {
            Source::File(path.to_path_buf())
        } else {
            Source::DefaultsAndEnvironment
        };
        let env = config::Environment::with_prefix("PARASOL")
            .prefix_separator("__")
            .separator("__")
            .try_parsing(true);
        let built = config::Config::builder()
            .add_source(
                config::File::from(path)
                    .format(config::FileFormat::Toml)
                    .required(false),
            )
            .add_source(env)
            .build()
            .map_err(|e| ConfigError::File {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        Ok((settings_from(built, Some(path))?, source))
    }

    /// Reads one file alone, no environment, as `parasol config check` does.
    pub fn check_file(path: &Path) -> Result<Settings, ConfigError> {
        let built = config::Config::builder()
            .add_source(config::File::from(path).format(config::FileFormat::Toml))
            .build()
            .map_err(|e| ConfigError::File {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        settings_from(built, Some(path))
    }

    /// Parses a whole TOML document (no environment).
    pub fn from_toml(text: &str) -> Result<Settings, ConfigError> {
        let built = config::Config::builder()
            .add_source(config::File::from_str(text, config::FileFormat::Toml))
            .build()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        settings_from(built, None)
    }
}

/// Settings from merged sources; `file` names the file in errors (`config` keeps a relative
/// path as the origin).
fn settings_from(built: config::Config, file: Option<&Path>) -> Result<Settings, ConfigError> {
    let mut tree =
        config::Source::collect(&built).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    let origin = Origin(file);
    fold_nova_section(&mut tree, origin)?;
    check_keys(&tree, &schema(), "", origin)?;
    let root = Value::new(None, ValueKind::Table(tree));
    let settings: Settings = serde_path_to_error::deserialize(root).map_err(|e| {
        let key = e.path().to_string();
        let message = describe(e.into_inner());
        if key.is_empty() || key == "?" {
            ConfigError::Invalid(message)
        } else {
            ConfigError::key(key, message)
        }
    })?;
    settings.validate()?;
    Ok(settings)
}

/// A serde error without the `config` crate's own key suffix (the path is given apart).
fn describe(e: config::ConfigError) -> String {
    match e {
        config::ConfigError::Type {
            unexpected,
            expected,
            ..
        } => format!("must be {expected}, not {unexpected}"),
        other => other.to_string(),
    }
}

/// Every key Parasol knows, with its default: the serialized default settings.
fn schema() -> Json {
    serde_json::to_value(Settings::default()).unwrap_or(Json::Null)
}

/// The `[policy]` keys that are also Nova `[filter_scheduler]` option names.
pub fn nova_policy_keys() -> Vec<String> {
    match schema().get("policy") {
        Some(Json::Object(keys)) => keys
            .keys()
            .filter(|k| !PARASOL_ONLY_POLICY_KEYS.contains(&k.as_str()))
            .cloned()
            .collect(),
        _ => Vec::new(),
    }
}

/// Moves `[filter_scheduler]` keys (Nova's names) into `[policy]`. A key the file sets under
/// both names is refused; one set by the environment overrides the file's.
fn fold_nova_section(tree: &mut Map<String, Value>, origin: Origin) -> Result<(), ConfigError> {
    let Some(section) = tree.remove(NOVA_SECTION) else {
        return Ok(());
    };
    let ValueKind::Table(section) = section.kind else {
        return Err(ConfigError::key(NOVA_SECTION, "must be a table"));
    };
    let aliases = nova_policy_keys();
    let policy = tree
        .entry("policy".to_string())
        .or_insert_with(|| Value::new(None, ValueKind::Table(Map::new())));
    let ValueKind::Table(policy) = &mut policy.kind else {
        return Err(ConfigError::key("policy", "must be a table"));
    };
    for (key, value) in section {
        let full = format!("{NOVA_SECTION}.{key}");
        if !aliases.contains(&key) {
            let hint = nearest(&key, aliases.iter().map(String::as_str))
                .map(|k| format!("did you mean `{NOVA_SECTION}.{k}`?"))
                .unwrap_or_else(|| {
                    format!("Parasol takes these of Nova's: {}", aliases.join(", "))
                });
            let origin = origin.of(&value, &full);
            return Err(ConfigError::key(
                full,
                format!("is not an option Parasol has{origin}; {hint}"),
            ));
        }
        let from_env = |v: &Value| v.origin() == Some(ENVIRONMENT);
        match policy.get(&key) {
            Some(set) if !from_env(set) && !from_env(&value) => {
                return Err(ConfigError::key(
                    full,
                    format!("is also set as `policy.{key}`: keep one of the two"),
                ))
            }
            Some(set) if from_env(set) => {}
            _ => {
                policy.insert(key, value);
            }
        }
    }
    Ok(())
}

/// Refuses a key the schema does not have, suggesting the nearest one in the same table, or
/// the same key in another section.
fn check_keys(
    tree: &Map<String, Value>,
    schema: &Json,
    prefix: &str,
    origin: Origin,
) -> Result<(), ConfigError> {
    let Json::Object(known) = schema else {
        return Ok(());
    };
    let mut keys: Vec<&String> = tree.keys().collect();
    keys.sort();
    for key in keys {
        let value = &tree[key];
        let full = format!("{prefix}{key}");
        match (known.get(key), &value.kind) {
            // A table with no keys by default is a map (`[policy] host_name_weights`): its
            // keys are the operator's (host names), whatever they are.
            (Some(Json::Object(sub)), ValueKind::Table(_)) if sub.is_empty() => {}
            (Some(sub @ Json::Object(_)), ValueKind::Table(table)) => {
                check_keys(table, sub, &format!("{full}."), origin)?
            }
            (Some(_), _) => {}
            (None, _) => return Err(unknown_key(key, &full, value, known, prefix, origin)),
        }
    }
    Ok(())
}

fn unknown_key(
    key: &str,
    full: &str,
    value: &Value,
    known: &serde_json::Map<String, Json>,
    prefix: &str,
    origin: Origin,
) -> ConfigError {
    let what = if prefix.is_empty() { "section" } else { "key" };
    let elsewhere = (!prefix.is_empty())
        .then(|| {
            schema().as_object().and_then(|sections| {
                sections
                    .iter()
                    .find(|(_, keys)| keys.get(key).is_some())
                    .map(|(section, _)| format!("{section}.{key}"))
            })
        })
        .flatten();
    let suggestion = elsewhere
        .or_else(|| nearest(key, known.keys().map(String::as_str)).map(|k| format!("{prefix}{k}")));
    let hint = match suggestion {
        Some(s) => format!("did you mean `{s}`?"),
        None => {
            let names: Vec<&str> = known.keys().map(String::as_str).collect();
            format!("known {what}s here: {}", names.join(", "))
        }
    };
    ConfigError::key(
        full,
        format!("is not a known {what}{}; {hint}", origin.of(value, full)),
    )
}

/// The file being read, to name where a value came from.
#[derive(Clone, Copy)]
struct Origin<'a>(Option<&'a Path>);

impl Origin<'_> {
    /// " (in FILE)" or " (from the environment variable PARASOL__A__B)" for a value.
    fn of(self, value: &Value, key: &str) -> String {
        match (value.origin(), self.0) {
            (Some(ENVIRONMENT), _) => format!(
                " (from the environment variable PARASOL__{})",
                key.replace('.', "__").to_ascii_uppercase()
            ),
            (Some(_), Some(file)) => format!(" (in {})", file.display()),
            (Some(other), None) => format!(" (in {other})"),
            (None, _) => String::new(),
        }
    }
}

#[cfg(test)]
mod tests;
