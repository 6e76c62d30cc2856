//! Errors typed by the action they trigger.
//!
//! - [`ConnectError::Retriable`]: back off and try again; the task stays RUNNING.
//! - [`ConnectError::Fatal`]: the task (or connector) goes FAILED with the trace; the worker
//!   restarts it after a backoff (`restart.policy`), as a restart may clear it.
//! - [`ConnectError::Permanent`]: FAILED, and no restart helps (credentials refused, a
//!   replication slot gone, an incompatible schema): it stays FAILED until someone acts.
//! - [`ConnectError::Config`]: the configuration is rejected; REST answers 400.

use std::error::Error as StdError;
use std::fmt::Write as _;

pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;
pub type ConnectResult<T> = Result<T, ConnectError>;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A transient failure: the caller backs off and retries.
    #[error("{message}")]
    Retriable {
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    /// A failure that retrying will not fix.
    #[error("{message}")]
    Fatal {
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    /// A failure no retry or restart can fix; the trace says what to do.
    #[error("{message}")]
    Permanent {
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    /// A configuration value is missing or invalid; names the key.
    #[error("invalid value for configuration {key}: {message}")]
    Config { key: String, message: String },
}

impl ConnectError {
    pub fn retriable(message: impl Into<String>) -> Self {
        Self::Retriable { message: message.into(), source: None }
    }

    pub fn retriable_from(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Retriable { message: message.into(), source: Some(source.into()) }
    }

    pub fn fatal(message: impl Into<String>) -> Self {
        Self::Fatal { message: message.into(), source: None }
    }

    pub fn fatal_from(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Fatal { message: message.into(), source: Some(source.into()) }
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        Self::Permanent { message: message.into(), source: None }
    }

    pub fn permanent_from(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Permanent { message: message.into(), source: Some(source.into()) }
    }

    pub fn config(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config { key: key.into(), message: message.into() }
    }

    pub fn is_retriable(&self) -> bool {
        matches!(self, Self::Retriable { .. })
    }

    /// A restart cannot help: a configuration error or a [`ConnectError::Permanent`] failure.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::Permanent { .. } | Self::Config { .. })
    }

    /// The error and its `source()` chain, one cause per line, as shown in a status trace.
    pub fn trace(&self) -> String {
        trace_of(self)
    }
}

/// `err`, then each error behind it (its `source()` chain), outermost first.
pub fn chain<'a>(err: &'a (dyn StdError + 'static)) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(err), |e: &&'a (dyn StdError + 'static)| (*e).source())
}

/// Renders an error and its chain of causes, one per line ("Caused by: …").
pub fn trace_of(err: &(dyn StdError + 'static)) -> String {
    let kind = match err.downcast_ref::<ConnectError>() {
        Some(ConnectError::Retriable { .. }) => "RetriableException",
        Some(ConnectError::Config { .. }) => "ConfigException",
        _ => "ConnectException",
    };
    let mut out = format!("{kind}: {err}");
    for cause in chain(err).skip(1) {
        let _ = write!(out, "\nCaused by: {cause}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lists_the_cause_chain() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = ConnectError::fatal_from("could not open /x", io);
        assert_eq!(err.trace(), "ConnectException: could not open /x\nCaused by: no such file");
        assert!(!err.is_retriable());
        assert!(ConnectError::retriable("x").is_retriable());
        assert!(ConnectError::permanent("slot gone").is_permanent());
        assert!(ConnectError::config("k", "bad").is_permanent());
        assert!(!err.is_permanent());
        assert_eq!(ConnectError::permanent("slot gone").trace(), "ConnectException: slot gone");
    }
}
