//! HTTPS listeners, configured as Kafka Connect configures them: `listeners=https://host:port`
//! and the `ssl.*` keys, or the same keys under `listeners.https.` (all or nothing: when any
//! `listeners.https.` key is set, only those are read, as Connect's
//! `valuesWithPrefixAllOrNothing` does). `admin.listeners` read theirs under
//! `admin.listeners.https.` the same way.
//!
//! | key | |
//! |---|---|
//! | `ssl.keystore.location` | the server's certificate and key: PEM (key and chain in one file) or PKCS12 |
//! | `ssl.keystore.type` | `PEM`, `PKCS12`; unset: read from the file. `JKS` is refused with the command that converts it |
//! | `ssl.keystore.password` | PKCS12: the store's password |
//! | `ssl.key.password` | PEM: the password of an encrypted PKCS#8 key |
//! | `ssl.keystore.key`, `ssl.keystore.certificate.chain` | PEM: the key and chain inline instead of a file |
//! | `ssl.truststore.location`, `.type`, `.password`, `ssl.truststore.certificates` | the CAs client certificates (and, for forwarding, other workers) must lead to |
//! | `ssl.client.auth` | `none` (default), `requested`, `required`: mutual TLS |
//! | `ssl.enabled.protocols` | `TLSv1.2,TLSv1.3` (default) or either; older versions are refused by name |
//! | `ssl.cipher.suites` | IANA names (as Java takes them), a subset of what rustls offers; weak suites are not offered at all |
//! | `ssl.endpoint.identification.algorithm` | `https` (default): a follower checks the leader's name when forwarding |
//!
//! A follower forwarding a write to an `https://` leader trusts the truststore and presents
//! the keystore's certificate, as Connect's `RestClient` does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use sluice_api::pem::{encode_key, is_pem, parse_chain, parse_key};
use sluice_api::{ConnectError, ConnectResult, Props, Secret};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// The prefix of the REST listeners' own SSL keys.
pub const PREFIX: &str = "listeners.https.";
/// The prefix of the admin listeners' own SSL keys (`admin.listeners`, KIP-495).
pub const ADMIN_PREFIX: &str = "admin.listeners.https.";

/// The SSL keys in force for the REST API and the key names to report (with the prefix
/// when they came from it).
pub struct SslValues {
    values: BTreeMap<String, String>,
    prefix: &'static str,
}

impl SslValues {
    /// Connect's all-or-nothing rule: the `listeners.https.` keys when any is set, else the
    /// top-level `ssl.*` keys.
    pub fn from_worker(props: &Props, prefix: &'static str) -> Self {
        let prefixed: BTreeMap<String, String> =
            props.iter().filter_map(|(k, v)| k.strip_prefix(prefix).map(|k| (k.to_owned(), v.clone()))).collect();
        if prefixed.is_empty() {
            let values = props.iter().filter(|(k, _)| k.starts_with("ssl.")).map(|(k, v)| (k.clone(), v.clone())).collect();
            Self { values, prefix: "" }
        } else {
            Self { values: prefixed, prefix }
        }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn secret(&self, key: &str) -> Option<Secret> {
        self.values.get(key).filter(|v| !v.is_empty()).map(|v| Secret::new(v.clone()))
    }

    /// The key's name as the user wrote it.
    fn name(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn error(&self, key: &str, message: impl std::fmt::Display) -> ConnectError {
        ConnectError::config(self.name(key), message.to_string())
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// What a store file holds, by `ssl.*store.type` or, unset, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreType {
    Pem,
    Pkcs12,
}

fn store_type(ssl: &SslValues, type_key: &str, bytes: Option<&[u8]>) -> ConnectResult<StoreType> {
    match ssl.get(type_key).map(str::to_ascii_uppercase).as_deref() {
        Some("PEM") => Ok(StoreType::Pem),
        Some("PKCS12" | "P12") => Ok(StoreType::Pkcs12),
        Some("JKS") => Err(ssl.error(
            type_key,
            "JKS stores cannot be read by sluice; convert the store to PKCS12 \
             (keytool -importkeystore -srckeystore STORE.jks -destkeystore STORE.p12 -deststoretype PKCS12) and set the type to PKCS12, \
             or export it to PEM",
        )),
        Some(other) => Err(ssl.error(type_key, format!("'{other}' is not a store type sluice reads (PEM or PKCS12)"))),
        None => Ok(if bytes.is_some_and(is_pem) { StoreType::Pem } else { StoreType::Pkcs12 }),
    }
}

/// A PKCS12 store's key (if any), certificates of its key entry (leaf first) and other
/// certificates.
struct Pkcs12Content {
    key: Option<PrivateKeyDer<'static>>,
    chain: Vec<CertificateDer<'static>>,
    others: Vec<CertificateDer<'static>>,
}

fn read_pkcs12(bytes: &[u8], password: Option<&Secret>) -> Result<Pkcs12Content, String> {
    let store = openssl::pkcs12::Pkcs12::from_der(bytes).map_err(|e| format!("is not a PKCS12 store: {e}"))?;
    let parsed = store
        .parse2(password.map_or("", |p| p.expose()))
        .map_err(|_| "cannot be opened with the configured password (is it the right one?)".to_owned())?;
    let der = |c: &openssl::x509::X509Ref| c.to_der().map(CertificateDer::from).map_err(|e| e.to_string());
    let key = match &parsed.pkey {
        Some(k) => Some(PrivateKeyDer::Pkcs8(k.private_key_to_pkcs8().map_err(|e| e.to_string())?.into())),
        None => None,
    };
    let mut chain = Vec::new();
    if let Some(c) = &parsed.cert {
        chain.push(der(c)?);
    }
    let mut others = Vec::new();
    for c in parsed.ca.iter().flatten() {
        others.push(der(c)?);
    }
    Ok(Pkcs12Content { key, chain, others })
}

/// The server's certificate chain and key.
fn keystore(ssl: &SslValues) -> ConnectResult<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let key_password = ssl.secret("ssl.key.password");
    if let (Some(key), Some(chain)) = (ssl.get("ssl.keystore.key"), ssl.get("ssl.keystore.certificate.chain")) {
        let (key, _) = parse_key(key.as_bytes().to_vec(), key_password.as_ref(), &ssl.name("ssl.key.password"))
            .map_err(|e| ssl.error("ssl.keystore.key", e))?;
        let (chain, _) = parse_chain(chain.as_bytes().to_vec()).map_err(|e| ssl.error("ssl.keystore.certificate.chain", e))?;
        return Ok((chain, key));
    }
    let Some(location) = ssl.get("ssl.keystore.location") else {
        return Err(ssl.error("ssl.keystore.location", "an https listener needs the server's certificate and key: set this key"));
    };
    store_type(ssl, "ssl.keystore.type", None)?;
    let bytes = std::fs::read(location).map_err(|e| ssl.error("ssl.keystore.location", format!("cannot read {location}: {e}")))?;
    match store_type(ssl, "ssl.keystore.type", Some(&bytes))? {
        StoreType::Pem => {
            let (chain, _) = parse_chain(bytes.clone()).map_err(|e| ssl.error("ssl.keystore.location", format!("{location} {e}")))?;
            let (key, _) = parse_key(bytes, key_password.as_ref(), &ssl.name("ssl.key.password"))
                .map_err(|e| ssl.error("ssl.keystore.location", format!("{location} {e}")))?;
            Ok((chain, key))
        }
        StoreType::Pkcs12 => {
            let content = read_pkcs12(&bytes, ssl.secret("ssl.keystore.password").as_ref())
                .map_err(|e| ssl.error("ssl.keystore.location", format!("{location} {e}")))?;
            let Some(key) = content.key else {
                return Err(ssl.error("ssl.keystore.location", format!("{location} holds no private key")));
            };
            let mut chain = content.chain;
            chain.extend(content.others);
            Ok((chain, key))
        }
    }
}

/// The truststore's certificates, `None` when none is configured.
fn truststore(ssl: &SslValues) -> ConnectResult<Option<Vec<CertificateDer<'static>>>> {
    if let Some(inline) = ssl.get("ssl.truststore.certificates") {
        let (certs, _) = parse_chain(inline.as_bytes().to_vec()).map_err(|e| ssl.error("ssl.truststore.certificates", e))?;
        return Ok(Some(certs));
    }
    let Some(location) = ssl.get("ssl.truststore.location") else { return Ok(None) };
    store_type(ssl, "ssl.truststore.type", None)?;
    let bytes = std::fs::read(location).map_err(|e| ssl.error("ssl.truststore.location", format!("cannot read {location}: {e}")))?;
    let certs = match store_type(ssl, "ssl.truststore.type", Some(&bytes))? {
        StoreType::Pem => parse_chain(bytes).map_err(|e| ssl.error("ssl.truststore.location", format!("{location} {e}")))?.0,
        StoreType::Pkcs12 => {
            let content = read_pkcs12(&bytes, ssl.secret("ssl.truststore.password").as_ref())
                .map_err(|e| ssl.error("ssl.truststore.location", format!("{location} {e}")))?;
            content.chain.into_iter().chain(content.others).collect()
        }
    };
    if certs.is_empty() {
        return Err(ssl.error("ssl.truststore.location", format!("{location} holds no certificate")));
    }
    Ok(Some(certs))
}

fn roots(ssl: &SslValues, certs: &[CertificateDer<'static>], key: &str) -> ConnectResult<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots.add(c.clone()).map_err(|e| ssl.error(key, format!("a certificate cannot be used as a trust anchor: {e}")))?;
    }
    Ok(Arc::new(roots))
}

fn protocols(ssl: &SslValues) -> ConnectResult<Vec<&'static SupportedProtocolVersion>> {
    let Some(list) = ssl.get("ssl.enabled.protocols") else {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    };
    let mut out = Vec::new();
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p {
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            "TLSv1" | "TLSv1.1" | "SSLv3" | "SSLv2Hello" => {
                return Err(ssl.error("ssl.enabled.protocols", format!("{p} is too weak and is not offered; use TLSv1.2 and TLSv1.3")))
            }
            other => return Err(ssl.error("ssl.enabled.protocols", format!("'{other}' is not a TLS version (TLSv1.2, TLSv1.3)"))),
        }
    }
    if out.is_empty() {
        return Err(ssl.error("ssl.enabled.protocols", "names no protocol"));
    }
    Ok(out)
}

/// The crypto provider with only the cipher suites `ssl.cipher.suites` names (all of its
/// suites when unset).
fn suites(ssl: &SslValues) -> ConnectResult<Arc<CryptoProvider>> {
    let mut provider = (*provider()).clone();
    if let Some(list) = ssl.get("ssl.cipher.suites") {
        let mut chosen = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match provider.cipher_suites.iter().find(|s| iana_name(s) == name) {
                Some(s) => chosen.push(*s),
                None => {
                    let offered: Vec<String> = provider.cipher_suites.iter().map(iana_name).collect();
                    return Err(ssl.error(
                        "ssl.cipher.suites",
                        format!("{name} is not offered (weak suites never are); choose from {}", offered.join(", ")),
                    ));
                }
            }
        }
        if chosen.is_empty() {
            return Err(ssl.error("ssl.cipher.suites", "names no cipher suite"));
        }
        provider.cipher_suites = chosen;
    }
    Ok(Arc::new(provider))
}

/// A suite's IANA name, as Java names it (rustls writes TLS 1.3 suites as `TLS13_…`).
fn iana_name(suite: &rustls::SupportedCipherSuite) -> String {
    let name = format!("{:?}", suite.suite());
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

/// The TLS settings of the worker's `https://` listeners: `prefix` is [`PREFIX`] for the
/// `listeners`, [`ADMIN_PREFIX`] for the `admin.listeners`.
pub fn server_config(props: &Props, prefix: &'static str) -> ConnectResult<Arc<ServerConfig>> {
    let ssl = SslValues::from_worker(props, prefix);
    let provider = suites(&ssl)?;
    let versions = protocols(&ssl)?;
    let (chain, key) = keystore(&ssl)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| ssl.error("ssl.enabled.protocols", format!("cannot be used with the chosen cipher suites: {e}")))?;
    let client_auth = ssl.get("ssl.client.auth").unwrap_or("none").to_ascii_lowercase();
    let builder = match client_auth.as_str() {
        "none" => builder.with_no_client_auth(),
        "requested" | "required" => {
            let Some(certs) = truststore(&ssl)? else {
                return Err(ssl.error(
                    "ssl.client.auth",
                    format!(
                        "{client_auth} client certificates need the CAs they must lead to: set {}",
                        ssl.name("ssl.truststore.location")
                    ),
                ));
            };
            let verifier = WebPkiClientVerifier::builder_with_provider(roots(&ssl, &certs, "ssl.truststore.location")?, provider.clone());
            let verifier = if client_auth == "requested" { verifier.allow_unauthenticated() } else { verifier };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| ssl.error("ssl.truststore.location", e))?)
        }
        other => return Err(ssl.error("ssl.client.auth", format!("'{other}' is not none, requested or required"))),
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        ssl.error(
            if ssl.get("ssl.keystore.key").is_some() { "ssl.keystore.key" } else { "ssl.keystore.location" },
            format!("the key and certificate cannot be used together: {e}"),
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client TLS setting that trusts no certificate: an `https://` URL without configured
/// trust fails with a certificate error instead of ureq's panic on its default roots (which
/// this build does not carry).
pub fn no_roots() -> ureq::tls::TlsConfig {
    client_tls().root_certs(ureq::tls::RootCerts::new_with_certs(&[])).build()
}

/// ureq's TLS settings on rustls with the provider every TLS end uses.
fn client_tls() -> ureq::tls::TlsConfigBuilder {
    ureq::tls::TlsConfig::builder().provider(ureq::tls::TlsProvider::Rustls).unversioned_rustls_crypto_provider(provider())
}

/// How a follower reaches an `https://` leader: the truststore for the leader's
/// certificate, the keystore as its own (for a leader that asks for one). `None` when no
/// SSL key is set.
pub fn forwarding_tls(props: &Props) -> ConnectResult<Option<ureq::tls::TlsConfig>> {
    let ssl = SslValues::from_worker(props, PREFIX);
    if ssl.values.is_empty() {
        return Ok(None);
    }
    let mut builder = client_tls();
    let trusted = match truststore(&ssl)? {
        Some(certs) => certs,
        None => {
            tracing::warn!(
                "no {} is set: a follower cannot check an https leader's certificate, so forwarding to it fails",
                ssl.name("ssl.truststore.location")
            );
            Vec::new()
        }
    };
    let trusted: Vec<ureq::tls::Certificate<'static>> =
        trusted.iter().map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned()).collect();
    builder = builder.root_certs(ureq::tls::RootCerts::new_with_certs(&trusted));
    if ssl.get("ssl.keystore.location").is_some() || ssl.get("ssl.keystore.key").is_some() {
        let (chain, key) = keystore(&ssl)?;
        let chain: Vec<ureq::tls::Certificate<'static>> =
            chain.iter().map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned()).collect();
        let pem = encode_key(&key).map_err(|e| ssl.error("ssl.keystore.location", e))?;
        let key = ureq::tls::PrivateKey::from_pem(pem.as_bytes())
            .map_err(|e| ssl.error("ssl.keystore.location", format!("the key cannot be used as a client key: {e}")))?;
        builder = builder.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
    }
    if ssl.values.get("ssl.endpoint.identification.algorithm").is_some_and(|v| v.trim().is_empty()) {
        return Err(ssl.error(
            "ssl.endpoint.identification.algorithm",
            "sluice always checks the leader's name when forwarding over https; give each worker's certificate its \
             advertised host name (or address) as a subject alternative name and leave this key unset",
        ));
    }
    Ok(Some(builder.build()))
}

/// Accepts TCP connections and completes their TLS handshakes off the accept loop (a slow
/// or silent client holds only its own task, for at most 10 s), for `axum::serve`.
pub struct TlsListener {
    local: std::net::SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, std::net::SocketAddr)>,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, ready) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = ready.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake refused"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake not completed within 10 s"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(Self { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept task ends only when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn listener_keys_are_all_or_nothing() {
        let ssl = SslValues::from_worker(&props(&[("ssl.keystore.location", "/a"), ("ssl.client.auth", "required")]), PREFIX);
        assert_eq!((ssl.get("ssl.keystore.location"), ssl.get("ssl.client.auth")), (Some("/a"), Some("required")));
        assert_eq!(ssl.name("ssl.keystore.location"), "ssl.keystore.location");
        // One prefixed key: the top-level ones are not read at all.
        let ssl = SslValues::from_worker(
            &props(&[("ssl.keystore.location", "/a"), ("ssl.client.auth", "required"), ("listeners.https.ssl.keystore.location", "/b")]),
            PREFIX,
        );
        assert_eq!((ssl.get("ssl.keystore.location"), ssl.get("ssl.client.auth")), (Some("/b"), None));
        assert_eq!(ssl.name("ssl.keystore.location"), "listeners.https.ssl.keystore.location");
        // The admin listeners have their own prefix.
        let both = props(&[("listeners.https.ssl.keystore.location", "/b"), ("admin.listeners.https.ssl.keystore.location", "/c")]);
        assert_eq!(SslValues::from_worker(&both, ADMIN_PREFIX).get("ssl.keystore.location"), Some("/c"));
        assert_eq!(SslValues::from_worker(&both, PREFIX).get("ssl.keystore.location"), Some("/b"));
    }

    #[test]
    fn weak_or_unknown_settings_are_refused_by_name() {
        let err = |pairs: &[(&str, &str)]| server_config(&props(pairs), PREFIX).unwrap_err().to_string();
        let e = err(&[("ssl.enabled.protocols", "TLSv1.2,TLSv1.1")]);
        assert!(e.contains("ssl.enabled.protocols") && e.contains("TLSv1.1") && e.contains("weak"), "{e}");
        let e = err(&[("listeners.https.ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_SHA")]);
        assert!(e.contains("listeners.https.ssl.cipher.suites") && e.contains("TLS_RSA_WITH_RC4_128_SHA"), "{e}");
        let e = err(&[("ssl.keystore.type", "JKS"), ("ssl.keystore.location", "/x.jks")]);
        assert!(e.contains("ssl.keystore.type") && e.contains("keytool -importkeystore"), "{e}");
        let e = err(&[]);
        assert!(e.contains("ssl.keystore.location"), "{e}");
        let e = err(&[("ssl.keystore.location", "/nonexistent/ks.p12")]);
        assert!(e.contains("ssl.keystore.location") && e.contains("/nonexistent/ks.p12"), "{e}");
        let chosen = suites(&SslValues::from_worker(
            &props(&[("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384")]),
            PREFIX,
        ));
        assert_eq!(chosen.unwrap().cipher_suites.len(), 2);
    }
}
