//! Errors of the control layer: a bad parameter (named by its config key or CLI flag) or a
//! failed write of the plan CLI's output.

use thiserror::Error;

/// Everything that can go wrong when building a controller or running the plan CLI.
#[derive(Debug, Error)]
pub enum ControlError {
    /// A configuration key of the `[asc]` / `[apsr]` section holds an invalid value.
    #[error("invalid value for `{key}`: {reason}")]
    InvalidParam { key: &'static str, reason: String },
    /// A command-line flag of `parasol apsr plan` holds an invalid value.
    #[error("invalid value for `{flag}`: {reason}")]
    InvalidFlag { flag: &'static str, reason: String },
    /// Writing the plan to its output failed.
    #[error("cannot write the plan: {0}")]
    Io(#[from] std::io::Error),
}

impl ControlError {
    pub(crate) fn param(key: &'static str, reason: impl Into<String>) -> Self {
        ControlError::InvalidParam {
            key,
            reason: reason.into(),
        }
    }

    pub(crate) fn flag(flag: &'static str, reason: impl Into<String>) -> Self {
        ControlError::InvalidFlag {
            flag,
            reason: reason.into(),
        }
    }

    /// The config key or CLI flag the error is about, if any.
    pub fn subject(&self) -> Option<&'static str> {
        match self {
            ControlError::InvalidParam { key, .. } => Some(key),
            ControlError::InvalidFlag { flag, .. } => Some(flag),
            ControlError::Io(_) => None,
        }
    }
}

/// Converts a config value in seconds to whole milliseconds (rounded), refusing negative,
/// non-finite or overflowing values with an error naming `key`.
pub(crate) fn seconds_to_ms(key: &'static str, seconds: f64) -> Result<u64, ControlError> {
    let ms = (seconds * 1_000.0).round();
    if !ms.is_finite() || ms < 0.0 || ms > u64::MAX as f64 {
        return Err(ControlError::param(
            key,
            format!("{seconds} is not a duration in seconds"),
        ));
    }
    Ok(ms as u64)
}
