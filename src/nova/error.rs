//! The one error type of the Nova codec: every variant names the field or part that is wrong.

use thiserror::Error;

/// Why a Nova message could not be decoded.
///
/// `path` is a dotted location such as `spec_obj.flavor.vcpus`, so a 400 reply or a
/// dead-letter reason says exactly what to fix.
#[derive(Debug, Error)]
pub enum CodecError {
    /// The bytes (or an embedded JSON string) are not JSON.
    #[error("{what} is not valid JSON: {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A versioned object carries another `nova_object.name` (or namespace) than expected.
    #[error("{path}: expected a {expected} object, got {got}")]
    WrongObject {
        path: String,
        expected: String,
        got: String,
    },
    /// A required field is absent or null.
    #[error("{path} is missing")]
    Missing { path: String },
    /// A field is present but has the wrong type or value.
    #[error("{path} {reason}")]
    Invalid { path: String, reason: String },
    /// A version whose major this codec does not speak.
    #[error("{path}: version {version} is not supported (expected {supported})")]
    UnsupportedVersion {
        path: String,
        version: String,
        supported: String,
    },
    /// The oslo.messaging envelope is malformed.
    #[error("bad oslo.messaging envelope: {0}")]
    Envelope(String),
}

impl CodecError {
    /// A field-level error with a free-form reason (`"must be a non-negative integer"`).
    pub fn invalid(path: impl Into<String>, reason: impl Into<String>) -> Self {
        CodecError::Invalid {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// A required field that is absent or null.
    pub fn missing(path: impl Into<String>) -> Self {
        CodecError::Missing { path: path.into() }
    }

    /// The Python exception class a Nova caller would expect for this error
    /// (`UnsupportedVersion` for versions, `ValueError` otherwise).
    pub fn oslo_class(&self) -> (&'static str, &'static str) {
        match self {
            CodecError::UnsupportedVersion { .. } => {
                ("UnsupportedVersion", "oslo_messaging.rpc.client")
            }
            _ => ("ValueError", "builtins"),
        }
    }
}

/// Shorthand for results of this codec.
pub type Result<T, E = CodecError> = std::result::Result<T, E>;
