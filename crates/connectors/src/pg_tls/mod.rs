//! TLS to PostgreSQL, configured as libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey` and
//! `sslpassword` configure it; used by the Postgres source (`database.ssl*`) and the JDBC sink
//! (the same names as parameters of `connection.url`).
//!
//! | sslmode | encrypted | server certificate checked |
//! |---|---|---|
//! | `disable` | no | – |
//! | `prefer` (default) | when the server offers TLS | no |
//! | `require` | yes | no; against `sslrootcert` when one is given (as libpq) |
//! | `verify-ca` | yes | chain against `sslrootcert` (or the Mozilla roots) |
//! | `verify-full` | yes | chain, and the host name (or IP address) |
//!
//! With `sslcert` and `sslkey` the client presents its certificate in every mode but
//! `disable` (see `client_cert.rs` for the key formats). Sessions:
//!
//! ```text
//!  catalog, snapshot, heartbeat, sink ── tokio-postgres ── PgTls::connector()   (rustls config built here)
//!  replication (walsender)           ── pgwire-replication ── PgTls::replication() (paths; the library
//!                                                             builds its own rustls config from them)
//! ```
//!
//! rustls with the aws-lc-rs provider; TLS 1.2 and 1.3.

mod client_cert;
mod refusal;

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use sluice_api::tls::RelaxedVerifier;

pub use client_cert::ClientCert;
pub use refusal::{find_refusal, CertificateRefused, ExplainingConnect};

/// The configuration keys a connector's TLS settings come from, as error messages name them.
#[derive(Debug, PartialEq, Eq)]
pub struct KeyNames {
    pub root_cert: &'static str,
    pub cert: &'static str,
    pub key: &'static str,
    pub password: &'static str,
}

/// The Postgres source's keys (Debezium's names).
pub const SOURCE_KEYS: KeyNames =
    KeyNames { root_cert: "database.sslrootcert", cert: "database.sslcert", key: "database.sslkey", password: "database.sslpassword" };

/// The JDBC sink's: parameters of `connection.url` (pgJDBC's names).
pub const URL_KEYS: KeyNames = KeyNames {
    root_cert: "sslrootcert (in connection.url)",
    cert: "sslcert (in connection.url)",
    key: "sslkey (in connection.url)",
    password: "sslpassword (in connection.url)",
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    /// libpq's names (`allow` is taken as `prefer`).
    pub fn parse(v: &str) -> Result<Self, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "disable" => Ok(Self::Disable),
            "allow" | "prefer" => Ok(Self::Prefer),
            "require" => Ok(Self::Require),
            "verify-ca" | "verify_ca" => Ok(Self::VerifyCa),
            "verify-full" | "verify_full" => Ok(Self::VerifyFull),
            other => Err(format!("sslmode {other:?} is not one of disable, prefer, require, verify-ca, verify-full")),
        }
    }
}

/// How to reach one PostgreSQL server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgTls {
    pub mode: SslMode,
    /// PEM file of trusted certificate authorities.
    pub root_cert: Option<PathBuf>,
    /// The certificate the client presents, if any.
    pub client: Option<ClientCert>,
    /// Where these settings came from, for error messages.
    pub names: &'static KeyNames,
}

/// The replication session's TLS settings, and what must stay open until its handshake is
/// done (an unnamed copy of the client identity, when one was needed).
pub struct ReplicationTls {
    pub config: pgwire_replication::TlsConfig,
    pub hold: Option<std::fs::File>,
}

impl PgTls {
    /// Settings named as the Postgres source's keys; see [`PgTls::named`].
    pub fn new(mode: SslMode, root_cert: Option<PathBuf>) -> Self {
        Self { mode, root_cert, client: None, names: &SOURCE_KEYS }
    }

    pub fn named(mut self, names: &'static KeyNames) -> Self {
        self.names = names;
        self
    }

    pub fn with_client(mut self, client: Option<ClientCert>) -> Self {
        self.client = client;
        self
    }

    /// `sslcert`, `sslkey` and `sslpassword` as given (empty values count as absent): both
    /// files or neither; a password only with a key.
    pub fn client_from(
        names: &KeyNames,
        cert: Option<String>,
        key: Option<String>,
        password: Option<sluice_api::Secret>,
    ) -> Result<Option<ClientCert>, (&'static str, String)> {
        let given = |v: Option<String>| v.filter(|v| !v.trim().is_empty()).map(PathBuf::from);
        let password = password.filter(|p| !p.expose().is_empty());
        match (given(cert), given(key)) {
            (Some(cert), Some(key)) => Ok(Some(ClientCert { cert, key, password })),
            (Some(_), None) => Err((names.key, format!("{} is set, so {} must name its private key", names.cert, names.key))),
            (None, Some(_)) => Err((names.cert, format!("{} is set, so {} must name the client certificate", names.key, names.cert))),
            (None, None) if password.is_some() => Err((names.password, format!("{} is set but {} is not", names.password, names.key))),
            (None, None) => Ok(None),
        }
    }

    /// What tokio-postgres is told: whether TLS is tried and required (the certificate
    /// checks are the connector's).
    pub fn tokio_mode(&self) -> tokio_postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }

    /// The configuration key a [`PgTls::connector`] or [`PgTls::replication`] error is about
    /// (the first one it names).
    pub fn key_in(&self, message: &str) -> &'static str {
        let n = self.names;
        [n.cert, n.key, n.password, n.root_cert]
            .into_iter()
            .filter_map(|k| message.find(k).map(|at| (at, k)))
            .min()
            .map_or(n.root_cert, |(_, k)| k)
    }

    /// The TLS connector for tokio-postgres sessions; an error names the key at fault.
    pub fn connector(&self) -> Result<ExplainingConnect, String> {
        let inner = tokio_postgres_rustls::MakeRustlsConnect::new(self.client_config()?);
        Ok(ExplainingConnect::new(inner, self.names, self.client.as_ref().map(|c| c.cert.clone())))
    }

    /// The same settings for the replication stream to `host`. pgwire-replication reads the
    /// client certificate and key itself, from PEM paths, unencrypted: other keys are handed
    /// to it as an unnamed PEM copy (see [`ReplicationTls::hold`]).
    pub fn replication(&self, host: &str) -> Result<ReplicationTls, String> {
        use pgwire_replication::SslMode as R;
        let mode = match (self.mode, &self.root_cert) {
            (SslMode::Disable, _) => R::Disable,
            (SslMode::Prefer, _) => R::Prefer,
            (SslMode::Require, None) => R::Require,
            (SslMode::Require, Some(_)) | (SslMode::VerifyCa, _) => R::VerifyCa,
            (SslMode::VerifyFull, _) => R::VerifyFull,
        };
        let (mut cert_path, mut key_path, mut hold) = (None, None, None);
        if let (Some(client), false) = (&self.client, mode == R::Disable) {
            let identity = client.load(self.names, &rustls::crypto::aws_lc_rs::default_provider())?;
            let (c, k, h) = client_cert::for_replication(&identity, client)
                .map_err(|e| format!("cannot hand {} to the replication session: {e}", self.names.key))?;
            (cert_path, key_path, hold) = (Some(c), Some(k), h);
        }
        let config = pgwire_replication::TlsConfig {
            mode,
            ca_pem_path: self.root_cert.clone(),
            // An IP address is checked against the certificate's IP addresses (as libpq
            // does); the library wants it spelled out for verify-full.
            sni_hostname: host.parse::<std::net::IpAddr>().is_ok().then(|| host.to_owned()),
            client_cert_pem_path: cert_path,
            client_key_pem_path: key_path,
        };
        Ok(ReplicationTls { config, hold })
    }

    /// The client certificate for a rustls config, read and checked.
    fn identity(&self, provider: &rustls::crypto::CryptoProvider) -> Result<Option<client_cert::Identity>, String> {
        match (&self.client, self.mode) {
            (Some(client), m) if m != SslMode::Disable => client.load(self.names, provider).map(Some),
            _ => Ok(None),
        }
    }

    fn client_config(&self) -> Result<ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        let identity = self.identity(&provider)?;
        let finish = |b: rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>| match identity {
            None => Ok(b.with_no_client_auth()),
            Some(id) => b.with_client_auth_cert(id.chain, id.key).map_err(|e| format!("{}: {e}", self.names.key)),
        };
        let check_chain = matches!(self.mode, SslMode::VerifyCa | SslMode::VerifyFull) || self.root_cert.is_some();
        if !check_chain {
            // `require` without a root certificate: encrypted, the certificate not checked (libpq's behaviour).
            return finish(builder.dangerous().with_custom_certificate_verifier(RelaxedVerifier::unchecked(provider)));
        }
        let mut roots = RootCertStore::empty();
        match &self.root_cert {
            Some(path) => {
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("cannot read {} {}: {e}", self.names.root_cert, path.display()))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!("{} {} holds no usable certificate", self.names.root_cert, path.display()));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        // `verify-ca`: the chain must lead to a trusted root; the name is not compared.
        let verifier: Arc<dyn ServerCertVerifier> =
            if self.mode == SslMode::VerifyFull { webpki } else { RelaxedVerifier::chain_only(webpki, provider) };
        finish(builder.dangerous().with_custom_certificate_verifier(verifier))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_as_libpq_names_them() {
        assert_eq!(SslMode::parse("verify-full").unwrap(), SslMode::VerifyFull);
        assert_eq!(SslMode::parse("REQUIRE").unwrap(), SslMode::Require);
        assert_eq!(SslMode::parse("allow").unwrap(), SslMode::Prefer);
        assert!(SslMode::parse("sometimes").unwrap_err().contains("sometimes"));
    }

    #[test]
    fn a_missing_root_certificate_is_named() {
        let err = PgTls::new(SslMode::VerifyCa, Some("/nonexistent/root.crt".into())).connector().err().unwrap();
        assert!(err.contains("/nonexistent/root.crt"), "{err}");
        assert!(PgTls::new(SslMode::Require, None).connector().is_ok());
    }
}
