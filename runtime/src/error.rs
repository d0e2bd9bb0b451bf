//! The runtime's error type, categorised by who is at fault.

use lafuse_core::Fault;
use thiserror::Error;

/// Errors raised while executing kernels and instructions.
///
/// The variant says who has to act: the user (bad shapes, arguments, files), nobody yet
/// (`Unsupported`: valid but not implemented), the machine (`Resource`), or us (`Internal`).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum RuntimeError {
    /// The user's input is wrong: shapes that do not match, an index out of range, a bad
    /// argument value, a missing or malformed file.
    #[error("{0}")]
    User(String),
    /// A valid request that lafuse does not implement yet; names the construct.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Out of memory budget or another machine limit.
    #[error("resources: {0}")]
    Resource(String),
    /// A bug in lafuse.
    #[error("internal error (a bug in lafuse, please report it): {0}")]
    Internal(String),
}

impl RuntimeError {
    pub fn user(msg: impl Into<String>) -> Self {
        RuntimeError::User(msg.into())
    }
    pub fn unsupported(msg: impl Into<String>) -> Self {
        RuntimeError::Unsupported(msg.into())
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        RuntimeError::Internal(msg.into())
    }

    /// Who has to act on this error.
    pub fn fault(&self) -> Fault {
        match self {
            RuntimeError::User(_) => Fault::User,
            RuntimeError::Unsupported(_) => Fault::Unsupported,
            RuntimeError::Resource(_) => Fault::Resource,
            RuntimeError::Internal(_) => Fault::Internal,
        }
    }
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
