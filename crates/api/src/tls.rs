//! Server-certificate checks looser than rustls' default, for the TLS clients that offer
//! them (libpq's `sslmode=require`/`verify-ca`, Kafka's
//! `ssl.endpoint.identification.algorithm=none` and
//! `enable.ssl.certificate.verification=false`). Handshake signatures are verified in every
//! case; only what the certificate itself must prove is relaxed.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};

/// A server-certificate verifier that checks less than the full chain-and-name check.
#[derive(Debug)]
pub struct RelaxedVerifier {
    /// `None`: any certificate; `Some`: the chain must lead to a trusted root, the name is
    /// not compared.
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl RelaxedVerifier {
    /// Accepts any certificate: encrypted, but the peer is not authenticated.
    pub fn unchecked(provider: Arc<CryptoProvider>) -> Arc<Self> {
        Arc::new(Self { chain: None, provider })
    }

    /// The chain must lead to one of `webpki`'s roots; the host name is not compared.
    pub fn chain_only(webpki: Arc<WebPkiServerVerifier>, provider: Arc<CryptoProvider>) -> Arc<Self> {
        Arc::new(Self { chain: Some(webpki), provider })
    }
}

impl ServerCertVerifier for RelaxedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let Some(webpki) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
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
        rustls::crypto::verify_tls12_signature(m, c, d, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
