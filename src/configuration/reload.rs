//! What a SIGHUP reload applies: the backend and what decisions read on every call take the
//! new file's values at once; what the running parts read only at start (the HTTP server,
//! the ledger, authentication, logging, the broker, the RPC server, Placement, Nova's
//! databases, the claim expiry and the statistics window) keeps its old values until a
//! restart, and the reload says which of those changed.

use super::{AmqpSettings, Settings};
use serde_json::Value;

/// Sections whose every key is read only at start.
pub const READ_AT_START: &[&str] = &[
    "server",
    "ledger",
    "auth",
    "log",
    "amqp",
    "rpc",
    "placement",
    "nova_db",
    "usage",
    "flex",
];

/// Keys of the other sections read only at start.
pub const KEYS_READ_AT_START: &[&str] = &["scheduler.claim_ttl_s", "scheduler.stats_window_s"];

/// A reload of the configuration: what runs after it and which keys changed.
#[derive(Debug)]
pub struct Reload {
    /// The new file's settings, with what is read only at start kept from the running ones.
    pub settings: Settings,
    /// Changed keys applied now.
    pub applied: Vec<String>,
    /// Changed keys that take effect at the next restart.
    pub waiting: Vec<String>,
}

impl Reload {
    /// The log line of this reload: what was applied and what waits for a restart.
    pub fn summary(&self) -> String {
        let list = |keys: &[String]| {
            if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(", ")
            }
        };
        format!(
            "applied now: {}; changed but waiting for a restart (read only at start, the old \
             values keep running): {}",
            list(&self.applied),
            list(&self.waiting)
        )
    }
}

impl Settings {
    /// What reloading `new` over these running settings does (see the module).
    pub fn reload(&self, new: Settings) -> Reload {
        let mut settings = new;
        // On SQLite the running queue is the default one with the ledger's id
        // (`startup::own_queue_for_sqlite`): the same file, not a change.
        let default_queue = AmqpSettings::default().queue;
        let own_queue = settings.amqp.queue == default_queue
            && self
                .amqp
                .queue
                .strip_prefix(&default_queue)
                .is_some_and(|rest| rest.starts_with('.'));
        if own_queue {
            settings.amqp.queue = self.amqp.queue.clone();
        }
        let (old, new) = (leaves(self), leaves(&settings));
        let mut applied = Vec::new();
        let mut waiting = Vec::new();
        for (key, value) in &new {
            if old.iter().any(|(k, v)| k == key && v == value) {
                continue;
            }
            if read_at_start(key) {
                waiting.push(key.clone());
            } else {
                applied.push(key.clone());
            }
        }
        settings.server = self.server.clone();
        settings.ledger = self.ledger.clone();
        settings.auth = self.auth.clone();
        settings.log = self.log.clone();
        settings.amqp = self.amqp.clone();
        settings.rpc = self.rpc.clone();
        settings.placement = self.placement.clone();
        settings.nova_db = self.nova_db.clone();
        settings.scheduler.claim_ttl_s = self.scheduler.claim_ttl_s;
        settings.scheduler.stats_window_s = self.scheduler.stats_window_s;
        Reload {
            settings,
            applied,
            waiting,
        }
    }
}

fn read_at_start(key: &str) -> bool {
    let section = key.split('.').next().unwrap_or(key);
    READ_AT_START.contains(&section) || KEYS_READ_AT_START.contains(&key)
}

/// Every key of `settings` with its value, as `section.key` (tables inside a section are
/// walked down; a list is one value).
fn leaves(settings: &Settings) -> Vec<(String, Value)> {
    fn walk(prefix: String, value: Value, out: &mut Vec<(String, Value)>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(key, v, out);
                }
            }
            other => out.push((prefix, other)),
        }
    }
    let mut out = Vec::new();
    walk(
        String::new(),
        serde_json::to_value(settings).unwrap_or_default(),
        &mut out,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_applies_the_backend_and_keeps_what_is_read_at_start() {
        let running = Settings::from_toml("[amqp]\nqueue = \"scheduler.a\"\n").unwrap();
        let new = Settings::from_toml(
            "[scheduler]\nbackend = \"apsr\"\nclaim_ttl_s = 7\n[auth]\nstrategy = \"token\"\n\
             token = \"0123456789abcdef0123\"\n[server]\nport = 9999\n[amqp]\nqueue = \"scheduler.a\"\n",
        )
        .unwrap();
        let reload = running.reload(new);
        assert_eq!(reload.applied, ["scheduler.backend"]);
        let mut waiting = reload.waiting.clone();
        waiting.sort();
        assert_eq!(
            waiting,
            [
                "auth.strategy",
                "auth.token",
                "scheduler.claim_ttl_s",
                "server.port"
            ]
        );
        assert_eq!(reload.settings.scheduler.backend.as_str(), "apsr");
        assert_eq!(reload.settings.server.port, running.server.port);
        assert_eq!(reload.settings.auth.token, running.auth.token);
        assert_eq!(
            reload.settings.scheduler.claim_ttl_s,
            running.scheduler.claim_ttl_s
        );
        let same = running.reload(running.clone());
        assert!(same.applied.is_empty() && same.waiting.is_empty());
        assert!(
            same.summary().contains("applied now: none"),
            "{}",
            same.summary()
        );
    }
}
