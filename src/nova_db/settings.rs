//! `[nova_db]`: where Nova's databases are, how often to read them, and Nova's
//! `service_down_time`.

use super::url::{redact, split, DbUrl};
use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// Nova's `CellMapping.CELL0_UUID`: the cell of instances that were never scheduled.
pub const CELL0_UUID: Uuid = Uuid::nil();

/// A database URL from the settings file; `Debug` hides its password.
#[derive(Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct SecretUrl(pub String);

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let span = split(&self.0)
            .ok()
            .and_then(|p| p.password.map(|(at, p)| (at, at + p.len())));
        write!(f, "{:?}", redact(&self.0, span))
    }
}

impl SecretUrl {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One cell named by hand, for a deployment whose API database Parasol may not read.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CellSetting {
    /// The cell's uuid as `nova-manage cell_v2 list_cells` shows it (Selections carry it).
    pub uuid: String,
    #[serde(default)]
    pub name: String,
    /// The cell's `[database] connection`.
    pub database_url: SecretUrl,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NovaDbSettings {
    /// Read compute nodes and services from Nova's cell databases.
    pub enabled: bool,
    /// Nova's `[api_database] connection`; the cells come from its `cell_mappings` (unless
    /// `cells` names them), the host aggregates from its aggregate tables.
    pub api_database_url: SecretUrl,
    /// Or the cells themselves: read instead of the API database's mappings (a replica, a
    /// mapping whose address Parasol cannot reach, no access to the API database).
    pub cells: Vec<CellSetting>,
    /// Nova's `[database] connection`, only to fill in templated cell mappings
    /// (`{scheme}://{username}:{password}@{hostname}/…`).
    pub database_url: SecretUrl,
    /// Seconds between two reads of every cell.
    pub refresh_interval_s: f64,
    /// Nova's `[DEFAULT] service_down_time`: seconds without a heartbeat before a compute
    /// service counts as down.
    pub service_down_time_s: f64,
    /// Seconds to connect to and read one database before it counts as unreachable.
    pub timeout_s: f64,
}

impl Default for NovaDbSettings {
    fn default() -> Self {
        NovaDbSettings {
            enabled: false,
            api_database_url: SecretUrl::default(),
            cells: Vec::new(),
            database_url: SecretUrl::default(),
            refresh_interval_s: 60.0,
            service_down_time_s: 60.0,
            timeout_s: 10.0,
        }
    }
}

impl NovaDbSettings {
    /// Checks every key; the error names the key (`cells[1].uuid`) and what is wrong.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let seconds = [
            ("refresh_interval_s", self.refresh_interval_s),
            ("service_down_time_s", self.service_down_time_s),
            ("timeout_s", self.timeout_s),
        ];
        for (key, value) in seconds {
            if !(value.is_finite() && value > 0.0) {
                return Err((key.into(), "must be a positive number of seconds".into()));
            }
        }
        let url = |key: String, url: &SecretUrl| {
            DbUrl::parse(&url.0)
                .map(drop)
                .map_err(|e| (key, e.to_string()))
        };
        if !self.database_url.is_empty() {
            url("database_url".into(), &self.database_url)?;
        }
        if !self.api_database_url.is_empty() {
            url("api_database_url".into(), &self.api_database_url)?;
        }
        let mut seen = Vec::with_capacity(self.cells.len());
        for (i, cell) in self.cells.iter().enumerate() {
            let uuid = Uuid::parse_str(&cell.uuid)
                .map_err(|e| (format!("cells[{i}].uuid"), format!("`{}`: {e}", cell.uuid)))?;
            if uuid == CELL0_UUID {
                let reason = "is cell0, which has no compute nodes".to_string();
                return Err((format!("cells[{i}].uuid"), reason));
            }
            if seen.contains(&uuid) {
                return Err((
                    format!("cells[{i}].uuid"),
                    format!("{uuid} is listed twice"),
                ));
            }
            seen.push(uuid);
            url(format!("cells[{i}].database_url"), &cell.database_url)?;
        }
        if !self.enabled {
            return Ok(());
        }
        if self.api_database_url.is_empty() && self.cells.is_empty() {
            return Err((
                "api_database_url".into(),
                "or cells is required when enabled".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(uuid: &str, url: &str) -> CellSetting {
        CellSetting {
            uuid: uuid.into(),
            name: String::new(),
            database_url: SecretUrl(url.into()),
        }
    }

    #[test]
    fn bad_settings_are_refused_naming_the_key() {
        let good = "mysql+pymysql://nova:pw@db/nova";
        let uuid = "f5fdae7b-6d83-4c39-9a8f-09c1a1a2f7a1";
        let cases: Vec<(NovaDbSettings, &str)> = vec![
            (
                NovaDbSettings {
                    enabled: true,
                    ..Default::default()
                },
                "api_database_url",
            ),
            (
                NovaDbSettings {
                    timeout_s: 0.0,
                    ..Default::default()
                },
                "timeout_s",
            ),
            (
                NovaDbSettings {
                    service_down_time_s: f64::NAN,
                    ..Default::default()
                },
                "service_down_time_s",
            ),
            (
                NovaDbSettings {
                    cells: vec![cell("cell1", good)],
                    ..Default::default()
                },
                "cells[0].uuid",
            ),
            (
                NovaDbSettings {
                    cells: vec![cell(uuid, good), cell(uuid, good)],
                    ..Default::default()
                },
                "cells[1].uuid",
            ),
            (
                NovaDbSettings {
                    cells: vec![cell("00000000-0000-0000-0000-000000000000", good)],
                    ..Default::default()
                },
                "cells[0].uuid",
            ),
            (
                NovaDbSettings {
                    cells: vec![cell(uuid, "nova.db")],
                    ..Default::default()
                },
                "cells[0].database_url",
            ),
            (
                NovaDbSettings {
                    api_database_url: SecretUrl("oracle://nova:pw@db/nova".into()),
                    ..Default::default()
                },
                "api_database_url",
            ),
        ];
        for (settings, key) in cases {
            let (got, reason) = settings.validate().expect_err(key);
            assert_eq!(got, key, "{reason}");
            assert!(!reason.contains(":pw@"), "{reason}");
        }
    }

    #[test]
    fn the_documented_block_is_the_defaults_and_reads_through_config() {
        let file = config::File::from_str(include_str!("settings.toml"), config::FileFormat::Toml);
        let read: NovaDbSettings = config::Config::builder()
            .add_source(file)
            .build()
            .and_then(|c| c.get("nova_db"))
            .expect("the block deserializes");
        assert_eq!(
            format!("{read:?}"),
            format!("{:?}", NovaDbSettings::default())
        );
        let named = "[nova_db]\ncells = [{ uuid = \"f5fdae7b-6d83-4c39-9a8f-09c1a1a2f7a1\", \
                     database_url = \"sqlite:////var/lib/nova/nova.sqlite\" }]\n";
        let file = config::File::from_str(named, config::FileFormat::Toml);
        let read: NovaDbSettings = config::Config::builder()
            .add_source(file)
            .build()
            .and_then(|c| c.get("nova_db"))
            .expect("a named cell deserializes");
        assert_eq!(
            read.cells[0].database_url.0,
            "sqlite:////var/lib/nova/nova.sqlite"
        );
        assert!(read.validate().is_ok());
    }

    #[test]
    fn disabled_reader_needs_no_database() {
        assert!(NovaDbSettings::default().validate().is_ok());
    }

    #[test]
    fn debug_output_hides_passwords() {
        let settings = NovaDbSettings {
            api_database_url: SecretUrl("mysql+pymysql://nova:hunter22@db/nova_api".into()),
            cells: vec![cell("x", "postgresql://nova:hunter22@pg/nova")],
            ..Default::default()
        };
        let text = format!("{settings:?}");
        assert!(!text.contains("hunter22"), "{text}");
        assert!(
            text.contains("mysql+pymysql://nova:***@db/nova_api"),
            "{text}"
        );
    }
}
