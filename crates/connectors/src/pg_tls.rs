//! TLS to PostgreSQL, configured as libpq's `sslmode` and `sslrootcert` configure it; used by
//! the Postgres source (`database.sslmode`, `database.sslrootcert`) and the JDBC sink
//! (`sslmode`, `sslrootcert` in `connection.url`).
//!
//! | sslmode | encrypted | server certificate checked |
//! |---|---|---|
//! | `disable` | no | – |
//! | `prefer` (default) | when the server offers TLS | no |
//! | `require` | yes | no; against `sslrootcert` when one is given (as libpq) |
//! | `verify-ca` | yes | chain against `sslrootcert` (or the Mozilla roots) |
//! | `verify-full` | yes | chain, and the host name (or IP address) |
//!
//! rustls with the aws-lc-rs provider; TLS 1.2 and 1.3.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, Error as TlsError, RootCertStore, SignatureScheme};

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
}

impl PgTls {
    pub fn new(mode: SslMode, root_cert: Option<PathBuf>) -> Self {
        Self { mode, root_cert }
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

    /// The TLS connector for tokio-postgres sessions.
    pub fn connector(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(self.client_config()?))
    }

    /// The same settings for the replication stream to `host`.
    pub fn replication(&self, host: &str) -> pgwire_replication::TlsConfig {
        use pgwire_replication::SslMode as R;
        let mode = match (self.mode, &self.root_cert) {
            (SslMode::Disable, _) => R::Disable,
            (SslMode::Prefer, _) => R::Prefer,
            (SslMode::Require, None) => R::Require,
            (SslMode::Require, Some(_)) | (SslMode::VerifyCa, _) => R::VerifyCa,
            (SslMode::VerifyFull, _) => R::VerifyFull,
        };
        pgwire_replication::TlsConfig {
            mode,
            ca_pem_path: self.root_cert.clone(),
            // An IP address is checked against the certificate's IP addresses (as libpq
            // does); the library wants it spelled out for verify-full.
            sni_hostname: host.parse::<std::net::IpAddr>().is_ok().then(|| host.to_owned()),
            client_cert_pem_path: None,
            client_key_pem_path: None,
        }
    }

    fn client_config(&self) -> Result<ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        let check_chain = matches!(self.mode, SslMode::VerifyCa | SslMode::VerifyFull) || self.root_cert.is_some();
        if !check_chain {
            return Ok(builder.dangerous().with_custom_certificate_verifier(Arc::new(Unchecked(provider))).with_no_client_auth());
        }
        let mut roots = RootCertStore::empty();
        match &self.root_cert {
            Some(path) => {
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("cannot read sslrootcert {}: {e}", path.display()))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!("sslrootcert {} holds no usable certificate", path.display()));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        let verifier: Arc<dyn ServerCertVerifier> = if self.mode == SslMode::VerifyFull { webpki } else { Arc::new(ChainOnly(webpki)) };
        Ok(builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth())
    }
}

/// `require` without a root certificate: encrypted, the certificate not checked (libpq's
/// behaviour); handshake signatures are still verified.
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name is not compared.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(TlsError::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(m, c, d)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
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
