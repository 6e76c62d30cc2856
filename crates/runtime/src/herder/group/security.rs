//! TLS and SASL for the membership connections, from the same worker keys the data plane's
//! clients read (`security.protocol`, `ssl.*`, `sasl.*`, `sasl.jaas.config`; see
//! [`crate::log::kafka::settings`]), as Connect's group member uses the worker's top-level
//! client settings.
//!
//! - TLS (`SSL`, `SASL_SSL`): rustls. The server's chain must lead to `ssl.ca.location` /
//!   `ssl.ca.pem` (PEM; the system's roots when neither is set) and its name must match the
//!   broker's host unless `ssl.endpoint.identification.algorithm` is empty or `none`;
//!   `enable.ssl.certificate.verification=false` accepts any certificate, as librdkafka does.
//!   A client certificate comes from `ssl.certificate.location`/`ssl.key.location` or
//!   `ssl.certificate.pem`/`ssl.key.pem` (unencrypted PEM).
//! - SASL (`SASL_PLAINTEXT`, `SASL_SSL`): `PLAIN`, `SCRAM-SHA-256` and `SCRAM-SHA-512`
//!   through SaslHandshake and SaslAuthenticate, with `sasl.username`/`sasl.password`.
//!
//! Settings the membership client cannot honour (a PKCS#12 keystore, an encrypted key,
//! GSSAPI or OAUTHBEARER) are refused when the worker starts, naming the key.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use sluice_api::tls::RelaxedVerifier;
use sluice_api::Secret;

use crate::log::kafka::settings::Setting;

/// How the membership client reaches brokers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupSecurity {
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    ca: Option<Pem>,
    verify: Verify,
    client: Option<(Pem, Pem)>,
}

/// PEM text, given inline or as a file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pem {
    File(PathBuf),
    Inline(Secret),
}

impl Pem {
    fn bytes(&self, key: &str) -> Result<Vec<u8>, String> {
        match self {
            Pem::File(p) => std::fs::read(p).map_err(|e| format!("{key}: cannot read {}: {e}", p.display())),
            Pem::Inline(s) => Ok(s.expose().as_bytes().to_vec()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    /// Chain and host name.
    Full,
    /// Chain only (`ssl.endpoint.identification.algorithm` empty or `none`).
    ChainOnly,
    /// Nothing (`enable.ssl.certificate.verification=false`).
    Nothing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslSettings {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: Secret,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

impl GroupSecurity {
    /// From the worker's client settings in librdkafka names (top-level keys only, each
    /// with the worker property it came from).
    pub fn from_settings(settings: &BTreeMap<String, Setting>) -> Result<Self, String> {
        let get = |k: &str| settings.get(k).map(|s| s.value.trim()).filter(|v| !v.is_empty());
        let origin = |k: &str| settings.get(k).map_or_else(|| k.to_owned(), |s| s.origin.clone());
        let protocol = get("security.protocol").unwrap_or("PLAINTEXT").to_ascii_uppercase();
        let (tls, sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => return Err(format!("security.protocol={other}: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")),
        };
        let mut out = GroupSecurity::default();
        if tls {
            if let Some(k) = ["ssl.keystore.location", "ssl.key.password"].into_iter().find(|k| get(k).is_some()) {
                return Err(format!(
                    "{}: group membership reads client certificates as unencrypted PEM only (ssl.keystore.type=PEM with ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key)",
                    origin(k)
                ));
            }
            let ca = match (get("ssl.ca.location"), get("ssl.ca.pem")) {
                (Some(p), _) => Some(Pem::File(p.into())),
                (None, Some(pem)) => Some(Pem::Inline(Secret::new(pem))),
                (None, None) => None,
            };
            let verify = match get("enable.ssl.certificate.verification").map(str::to_ascii_lowercase).as_deref() {
                Some("false") => Verify::Nothing,
                Some("true") | None => match get("ssl.endpoint.identification.algorithm").map(str::to_ascii_lowercase).as_deref() {
                    None | Some("https") => Verify::Full,
                    Some("none") => Verify::ChainOnly,
                    Some(other) => {
                        return Err(format!("{}={other}: expected https or none", origin("ssl.endpoint.identification.algorithm")))
                    }
                },
                Some(other) => return Err(format!("{}={other}: expected true or false", origin("enable.ssl.certificate.verification"))),
            };
            let cert = get("ssl.certificate.location")
                .map(|p| Pem::File(p.into()))
                .or_else(|| get("ssl.certificate.pem").map(|p| Pem::Inline(Secret::new(p))));
            let key =
                get("ssl.key.location").map(|p| Pem::File(p.into())).or_else(|| get("ssl.key.pem").map(|p| Pem::Inline(Secret::new(p))));
            let client = match (cert, key) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                (Some(_), None) => {
                    return Err(format!("{} is set but no private key (ssl.key.location)", origin("ssl.certificate.location")))
                }
                (None, Some(_)) => {
                    return Err(format!("{} is set but no certificate (ssl.certificate.location)", origin("ssl.key.location")))
                }
            };
            out.tls = Some(TlsSettings { ca, verify, client });
        }
        if sasl {
            let mechanism = get("sasl.mechanisms").or_else(|| get("sasl.mechanism")).unwrap_or("GSSAPI");
            let mechanism = match mechanism.to_ascii_uppercase().as_str() {
                "PLAIN" => Mechanism::Plain,
                "SCRAM-SHA-256" => Mechanism::ScramSha256,
                "SCRAM-SHA-512" => Mechanism::ScramSha512,
                other => {
                    return Err(format!(
                        "sasl.mechanism={other}: group membership supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (GSSAPI is the default when sasl.mechanism is unset)"
                    ))
                }
            };
            let username = get("sasl.username")
                .ok_or_else(|| format!("{protocol} with {} needs a user name (sasl.jaas.config or sasl.username)", mechanism.name()))?;
            let password = settings
                .get("sasl.password")
                .map(|s| s.value.clone())
                .ok_or_else(|| format!("{protocol} with {} needs a password (sasl.jaas.config or sasl.password)", mechanism.name()))?;
            out.sasl = Some(SaslSettings { mechanism, username: username.to_owned(), password: Secret::new(password) });
        }
        if let Some(tls) = &out.tls {
            tls.client_config()?;
        }
        Ok(out)
    }
}

impl TlsSettings {
    /// A rustls configuration for these settings; files are read anew each time, so
    /// rotated certificates are picked up by the next connection.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = RootCertStore::empty();
        match &self.ca {
            Some(ca) => {
                let bytes = ca.bytes("ssl.ca.location")?;
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("ssl.ca.location: not PEM certificates: {e}"))?;
                if certs.is_empty() {
                    return Err("ssl.ca.location: no certificate in the PEM".to_owned());
                }
                for c in certs {
                    roots.add(c).map_err(|e| format!("ssl.ca.location: {e}"))?;
                }
            }
            None => {
                for c in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(c);
                }
            }
        }
        let builder =
            ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| format!("TLS: {e}"))?;
        let builder = match self.verify {
            Verify::Full => builder.with_root_certificates(roots),
            Verify::Nothing => builder.dangerous().with_custom_certificate_verifier(RelaxedVerifier::unchecked(provider)),
            Verify::ChainOnly => {
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("ssl.ca.location: {e}"))?;
                builder.dangerous().with_custom_certificate_verifier(RelaxedVerifier::chain_only(webpki, provider))
            }
        };
        let config = match &self.client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert.bytes("ssl.certificate.location")?)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("ssl.certificate.location: not a PEM certificate: {e}"))?;
                let key = PrivateKeyDer::from_pem_slice(&key.bytes("ssl.key.location")?)
                    .map_err(|e| format!("ssl.key.location: not an unencrypted PEM private key: {e}"))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| format!("ssl.certificate.location/ssl.key.location: {e}"))?
            }
        };
        Ok(Arc::new(config))
    }
}

/// The name of `host` as TLS compares it (an IP address or a DNS name).
pub fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| format!("{host} is not a host name TLS can check: {e}"))
}

/// The client side of one SCRAM exchange (RFC 5802; Kafka sends no channel binding).
pub struct Scram {
    mechanism: Mechanism,
    password: Secret,
    client_first_bare: String,
    nonce: String,
    server_signature: Option<Vec<u8>>,
}

impl Scram {
    pub fn new(mechanism: Mechanism, username: &str, password: &Secret) -> Self {
        let mut raw = [0u8; 24];
        getrandom::fill(&mut raw).expect("the system's random source");
        Self::with_nonce(mechanism, username, password, &base64::engine::general_purpose::STANDARD.encode(raw))
    }

    fn with_nonce(mechanism: Mechanism, username: &str, password: &Secret, nonce: &str) -> Self {
        let name = username.replace('=', "=3D").replace(',', "=2C");
        Self {
            mechanism,
            password: password.clone(),
            client_first_bare: format!("n={name},r={nonce}"),
            nonce: nonce.to_owned(),
            server_signature: None,
        }
    }

    pub fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// The client's final message for the server's first one.
    pub fn client_final(&mut self, server_first: &str) -> Result<String, String> {
        let attr =
            |name: char| server_first.split(',').find_map(|a| a.strip_prefix(name).and_then(|v| v.strip_prefix('='))).map(str::to_owned);
        if let Some(e) = attr('e') {
            return Err(format!("the broker refused the SCRAM exchange: {e}"));
        }
        let nonce = attr('r').ok_or("the broker's SCRAM message has no nonce")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the broker's SCRAM nonce does not extend ours".to_owned());
        }
        let salt = base64::engine::general_purpose::STANDARD
            .decode(attr('s').ok_or("the broker's SCRAM message has no salt")?)
            .map_err(|_| "the broker's SCRAM salt is not base64")?;
        let iterations: u32 =
            attr('i').and_then(|i| i.parse().ok()).filter(|i| *i > 0).ok_or("the broker's SCRAM message has no iteration count")?;
        let salted = self.hi(&salt, iterations);
        let client_key = self.hmac(&salted, b"Client Key");
        let stored_key = self.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = self.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = self.hmac(&salted, b"Server Key");
        self.server_signature = Some(self.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", base64::engine::general_purpose::STANDARD.encode(proof)))
    }

    /// Checks the server's final message: it proves the server knows the password too.
    pub fn verify_server_final(&self, server_final: &str) -> Result<(), String> {
        if let Some(e) = server_final.strip_prefix("e=") {
            return Err(format!("the broker refused the SCRAM proof: {e}"));
        }
        let v = server_final.strip_prefix("v=").ok_or("the broker's final SCRAM message has no signature")?;
        let v = base64::engine::general_purpose::STANDARD.decode(v).map_err(|_| "the broker's SCRAM signature is not base64")?;
        match &self.server_signature {
            Some(want) if *want == v => Ok(()),
            _ => Err("the broker's SCRAM signature does not match: it does not know this user's credentials".to_owned()),
        }
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self.mechanism {
            Mechanism::ScramSha512 => {
                let mut m = hmac::Hmac::<sha2::Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            _ => {
                let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(&self, data: &[u8]) -> Vec<u8> {
        use sha2::Digest;
        match self.mechanism {
            Mechanism::ScramSha512 => sha2::Sha512::digest(data).to_vec(),
            _ => sha2::Sha256::digest(data).to_vec(),
        }
    }

    /// PBKDF2 with this mechanism's HMAC (RFC 5802's `Hi`).
    fn hi(&self, salt: &[u8], iterations: u32) -> Vec<u8> {
        let password = self.password.expose().as_bytes();
        let mut u = self.hmac(password, &[salt, &1u32.to_be_bytes()].concat());
        let mut out = u.clone();
        for _ in 1..iterations {
            u = self.hmac(password, &u);
            out.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, Setting> {
        pairs.iter().map(|(k, v)| (k.to_string(), Setting { value: v.to_string(), origin: k.to_string() })).collect()
    }

    #[test]
    fn scram_sha_256_matches_rfc_7677() {
        let mut s = Scram::with_nonce(Mechanism::ScramSha256, "user", &Secret::new("pencil"), "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(s.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = s.client_final("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096").unwrap();
        assert_eq!(last, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
        s.verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").unwrap();
        assert!(s.verify_server_final("v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").unwrap_err().contains("does not match"));
        assert!(s.verify_server_final("e=invalid-proof").unwrap_err().contains("invalid-proof"));
    }

    #[test]
    fn scram_refuses_a_nonce_that_is_not_ours() {
        let mut s = Scram::with_nonce(Mechanism::ScramSha512, "u=,x", &Secret::new("p"), "abc");
        assert_eq!(s.client_first(), "n,,n=u=3D=2Cx,r=abc");
        assert!(s.client_final("r=zzz123,s=AAAA,i=4096").unwrap_err().contains("nonce"));
        assert!(s.client_final("r=abc,s=AAAA,i=4096").unwrap_err().contains("nonce"));
        assert!(s.client_final("r=abcdef,s=AAAA,i=4096").is_ok());
    }

    #[test]
    fn settings_name_what_membership_cannot_honour() {
        assert_eq!(GroupSecurity::from_settings(&settings(&[])).unwrap(), GroupSecurity::default());
        let s = GroupSecurity::from_settings(&settings(&[
            ("security.protocol", "sasl_plaintext"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ]))
        .unwrap();
        assert_eq!(
            s.sasl.as_ref().map(|s| (s.mechanism, s.username.as_str(), s.password.expose())),
            Some((Mechanism::ScramSha512, "u", "p"))
        );
        assert!(s.tls.is_none());
        assert!(!format!("{s:?}").contains("\"p\""), "the password stays out of Debug: {s:?}");
        let err = GroupSecurity::from_settings(&settings(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ]))
        .unwrap_err();
        assert!(err.contains("GSSAPI"), "{err}");
        let err = GroupSecurity::from_settings(&settings(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.password", "p"),
        ]))
        .unwrap_err();
        assert!(err.contains("user name"), "{err}");
        let err =
            GroupSecurity::from_settings(&settings(&[("security.protocol", "SSL"), ("ssl.keystore.location", "/k.p12")])).unwrap_err();
        assert!(err.contains("ssl.keystore.location"), "{err}");
        let err = GroupSecurity::from_settings(&settings(&[("security.protocol", "SSL"), ("ssl.ca.location", "/nonexistent/ca.pem")]))
            .unwrap_err();
        assert!(err.contains("ssl.ca.location") && err.contains("/nonexistent/ca.pem"), "{err}");
        let err = GroupSecurity::from_settings(&settings(&[("security.protocol", "TLS")])).unwrap_err();
        assert!(err.contains("security.protocol"), "{err}");
    }

    #[test]
    fn server_names_come_from_the_address() {
        assert_eq!(server_name("broker-1.example:9093").unwrap(), ServerName::try_from("broker-1.example").unwrap());
        assert!(matches!(server_name("127.0.0.1:9093").unwrap(), ServerName::IpAddress(_)));
        assert!(matches!(server_name("[::1]:9093").unwrap(), ServerName::IpAddress(_)));
    }
}
