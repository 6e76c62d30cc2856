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

/// `text` with credentials embedded in URLs hidden: `password=…` parameters (up to `&` or
/// `;`) and the password of `scheme://user:password@host`. For config values and messages
/// that quote a connection URL.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let lower = rest.to_ascii_lowercase();
        let param = lower.find("password=");
        let userinfo = lower.find("://").and_then(|i| {
            let after = &rest[i + 3..];
            let at = after.find('@')?;
            let colon = after[..at].find(':')?;
            // Only a userinfo part: no '/' before the '@'.
            (!after[..at].contains('/')).then_some((i + 3 + colon + 1, i + 3 + at))
        });
        match (param, userinfo) {
            (Some(p), u) if u.is_none_or(|(start, _)| p < start) => {
                let start = p + "password=".len();
                let end = rest[start..].find(['&', ';', ' ', '"', '\'']).map_or(rest.len(), |e| start + e);
                out.push_str(&rest[..start]);
                out.push_str(REDACTED);
                rest = &rest[end..];
            }
            (_, Some((start, end))) => {
                out.push_str(&rest[..start]);
                out.push_str(REDACTED);
                rest = &rest[end..];
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_urls_are_hidden() {
        assert_eq!(
            redact_urls("jdbc:postgresql://db:5432/app?user=u&password=s3cret&ssl=false"),
            "jdbc:postgresql://db:5432/app?user=u&password=[hidden]&ssl=false"
        );
        assert_eq!(redact_urls("postgres://user:pw@host/db"), "postgres://user:[hidden]@host/db");
        assert_eq!(redact_urls("\"jdbc:postgresql://h/d?PASSWORD=x\" is bad"), "\"jdbc:postgresql://h/d?PASSWORD=[hidden]\" is bad");
        assert_eq!(redact_urls("http://host:8083/connectors"), "http://host:8083/connectors");
        // pgJDBC's client key password is a password= parameter too.
        assert_eq!(
            redact_urls("jdbc:postgresql://h/d?sslkey=/k.pk8&sslpassword=k3y&sslmode=verify-full"),
            "jdbc:postgresql://h/d?sslkey=/k.pk8&sslpassword=[hidden]&sslmode=verify-full"
        );
        assert_eq!(redact_urls("no url here"), "no url here");
    }

    #[test]
    fn secret_is_redacted_in_debug_and_display() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "[hidden] [hidden]");
        assert_eq!(s.expose(), "hunter2");
    }
}
