//! The one error type of the control plane, and how each kind maps to an HTTP status.
//!
//! Messages are shown verbatim to users (netctl prints the response body), so they name the object,
//! the field and the rule that was broken.

use crate::store::StoreError;

/// A control-plane failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A field failed validation (HTTP 400).
    #[error("invalid {field}: {rule}")]
    Invalid { field: String, rule: String },
    /// The object, or one it refers to, does not exist (HTTP 404).
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with existing state: in use, immutable field, pool exhausted (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// The state store failed (HTTP 503 when unavailable, 500 otherwise).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No leader is known to proxy to, or the leader could not be reached (HTTP 503).
    #[error("{0}")]
    NoLeader(String),
    /// A system netmaster drives failed, e.g. a Docker engine in Docker cluster mode (HTTP 502).
    #[error("{0}")]
    Upstream(String),
}

impl Error {
    /// A validation error naming `field` and the `rule` it broke.
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Error::Invalid {
            field: field.into(),
            rule: rule.into(),
        }
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Error::NotFound(what.into())
    }

    pub fn conflict(what: impl Into<String>) -> Self {
        Error::Conflict(what.into())
    }

    /// The HTTP status for this error.
    pub fn http_status(&self) -> u16 {
        match self {
            Error::Invalid { .. } => 400,
            Error::NotFound(_) => 404,
            Error::Conflict(_) => 409,
            Error::Upstream(_) => 502,
            Error::Store(
                StoreError::Unavailable(_)
                | StoreError::Contention { .. }
                | StoreError::DerivedIncomplete {
                    unavailable: true, ..
                },
            )
            | Error::NoLeader(_) => 503,
            Error::Store(_) => 500,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl crate::store::txn::StoreFailure for Error {
    fn is_unavailable(&self) -> bool {
        matches!(self, Error::Store(StoreError::Unavailable(_)))
    }
    fn is_derived_incomplete(&self) -> bool {
        matches!(self, Error::Store(StoreError::DerivedIncomplete { .. }))
    }
}
