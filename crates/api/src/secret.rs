//! Secrets as a type: never printed by `Debug` or `Display`.

use std::fmt;

/// What REST responses, logs and traces show in place of a secret.
pub const REDACTED: &str = "[hidden]";

#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; call only where it is handed to the system that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_is_redacted_in_debug_and_display() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "[hidden] [hidden]");
        assert_eq!(s.expose(), "hunter2");
    }
}
