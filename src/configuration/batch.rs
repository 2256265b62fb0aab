//! `[batch]`: ECSched's batch placement in the service (docs/architecture.md §12.5): whether
//! a multi-create is solved as one min-cost-flow assignment, and its bounds.

use crate::choice::Choice;
use serde::{Deserialize, Serialize};

/// The longest `window_ms` accepted: the window adds its length to a call's latency.
pub const MAX_WINDOW_MS: u64 = 100;

/// When calls are placed as a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum BatchMode {
    /// One instance at a time, as Nova (today's path, unchanged).
    #[default]
    Off,
    /// A multi-create (`num_instances` ≥ 2) solved as one assignment.
    Call,
    /// `call`, and concurrent single calls gathered within `window_ms` and solved together,
    /// each claimed and answered on its own.
    Window,
}

crate::choice_from_string!(BatchMode);

impl Choice for BatchMode {
    const ALL: &'static [Self] = &[BatchMode::Off, BatchMode::Call, BatchMode::Window];
    fn as_str(self) -> &'static str {
        match self {
            BatchMode::Off => "off",
            BatchMode::Call => "call",
            BatchMode::Window => "window",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchSettings {
    pub mode: BatchMode,
    /// A larger multi-create is placed one instance at a time (counted as a fallback).
    pub max_instances: usize,
    /// A solve that took longer is discarded and the call placed one instance at a time
    /// (counted as a fallback).
    pub solve_timeout_ms: u64,
    /// `window`: how long single calls are gathered (at most [`MAX_WINDOW_MS`]).
    pub window_ms: u64,
}

impl Default for BatchSettings {
    fn default() -> Self {
        BatchSettings {
            mode: BatchMode::Off,
            max_instances: 200,
            solve_timeout_ms: 100,
            window_ms: 10,
        }
    }
}

impl BatchSettings {
    /// Ranges serde cannot check: the key (within `[batch]`) and what is wrong.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(2..=crate::nova::MAX_INSTANCES as usize).contains(&self.max_instances) {
            return Err((
                "max_instances",
                format!(
                    "must be from 2 to {} (a call's largest num_instances)",
                    crate::nova::MAX_INSTANCES
                ),
            ));
        }
        if !(1..=60_000).contains(&self.solve_timeout_ms) {
            return Err(("solve_timeout_ms", "must be from 1 to 60000".into()));
        }
        if !(1..=MAX_WINDOW_MS).contains(&self.window_ms) {
            return Err((
                "window_ms",
                format!(
                    "must be from 1 to {MAX_WINDOW_MS}: the window adds its length to a call's latency"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Settings;

    #[test]
    fn batch_defaults_to_off_and_takes_call_and_window() {
        let s = Settings::from_toml("").unwrap();
        assert_eq!(s.batch.mode, super::BatchMode::Off);
        let s = Settings::from_toml("[batch]\nmode = \"call\"\nmax_instances = 50\n").unwrap();
        assert_eq!(s.batch.mode, super::BatchMode::Call);
        assert_eq!(s.batch.max_instances, 50);
        let s = Settings::from_toml("[batch]\nmode = \"window\"\nwindow_ms = 100\n").unwrap();
        assert_eq!(s.batch.mode, super::BatchMode::Window);
        assert_eq!(s.batch.window_ms, 100);
    }

    #[test]
    fn batch_values_out_of_range_are_refused_naming_the_key() {
        for (toml, key) in [
            ("window_ms = 101", "batch.window_ms"),
            ("window_ms = 0", "batch.window_ms"),
            ("max_instances = 1", "batch.max_instances"),
            ("max_instances = 10001", "batch.max_instances"),
            ("solve_timeout_ms = 0", "batch.solve_timeout_ms"),
        ] {
            let err = Settings::from_toml(&format!("[batch]\n{toml}\n")).unwrap_err();
            let err = format!("{err:#}");
            assert!(err.contains(key), "{toml}: {err}");
        }
        let err = Settings::from_toml("[batch]\nmode = \"calls\"\n").unwrap_err();
        assert!(format!("{err:#}").contains("off, call, window"), "{err:#}");
    }
}
