//! The client certificate and key a connector presents to PostgreSQL (`sslcert`, `sslkey`,
//! `sslpassword`), read as libpq and pgJDBC read them (`sluice_api::pem` has the formats;
//! DER PKCS#8 is pgJDBC's `.pk8`, and an encrypted key is decrypted with `sslpassword`).
//!
//! Every error names the configuration key and the file. The key is checked against the
//! certificate before any connection is tried.

use std::io::Write;
use std::path::PathBuf;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::{Error as TlsError, InconsistentKeys};
use sluice_api::pem::{encode, encode_key, read_chain, read_key};
use sluice_api::Secret;

use super::KeyNames;

/// `sslcert`, `sslkey` and `sslpassword` as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub password: Option<Secret>,
}

/// A certificate chain and its private key, read and checked.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// Whether both files are PEM that any reader takes as they are (an unencrypted key).
    pub plain_pem: bool,
}

impl ClientCert {
    /// Reads both files and checks that the key belongs to the certificate.
    pub fn load(&self, names: &KeyNames, provider: &rustls::crypto::CryptoProvider) -> Result<Identity, String> {
        let (chain, cert_pem) = read_chain(&self.cert).map_err(|e| format!("{} {}: {e}", names.cert, self.cert.display()))?;
        let (key, key_pem) =
            read_key(&self.key, self.password.as_ref(), names.password).map_err(|e| format!("{} {}: {e}", names.key, self.key.display()))?;
        match CertifiedKey::from_der(chain.clone(), key.clone_key(), provider) {
            Ok(_) => {}
            Err(TlsError::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
                return Err(format!(
                    "{} {} is not the private key of the certificate in {} {}; name the key that belongs to it",
                    names.key,
                    self.key.display(),
                    names.cert,
                    self.cert.display()
                ))
            }
            Err(TlsError::InvalidCertificate(e)) => {
                return Err(format!("{} {} is not a valid certificate: {e:?}", names.cert, self.cert.display()))
            }
            Err(e) => return Err(format!("{} {} is not a usable private key: {e}", names.key, self.key.display())),
        }
        Ok(Identity { chain, key, plain_pem: cert_pem && key_pem })
    }
}

impl Identity {
    /// The identity as one PEM file (the chain, then the key) that has no name in the file
    /// system: for a reader that takes only a path to unencrypted PEM. The path
    /// (`/proc/self/fd/N`) stays valid while the returned file is open.
    pub fn unnamed_pem_file(&self) -> std::io::Result<(std::fs::File, PathBuf)> {
        let mut pem = String::new();
        for cert in &self.chain {
            pem.push_str(&encode("CERTIFICATE", cert.as_ref()).map_err(std::io::Error::other)?);
        }
        pem.push_str(&encode_key(&self.key).map_err(std::io::Error::other)?);
        // Created with mode 0600 and without a name (O_TMPFILE, or unlinked at once).
        let mut file = tempfile::tempfile()?;
        file.write_all(pem.as_bytes())?;
        file.flush()?;
        use std::os::fd::AsRawFd;
        let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        Ok((file, path))
    }
}

/// What the replication library is told: the user's files when it reads them as they are,
/// else an unnamed PEM copy (kept open by the returned guard).
pub fn for_replication(identity: &Identity, cert: &ClientCert) -> std::io::Result<(PathBuf, PathBuf, Option<std::fs::File>)> {
    if identity.plain_pem {
        return Ok((cert.cert.clone(), cert.key.clone(), None));
    }
    let (file, path) = identity.unnamed_pem_file()?;
    Ok((path.clone(), path, Some(file)))
}

#[cfg(test)]
mod tests {
    use super::super::SOURCE_KEYS;
    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn provider() -> rustls::crypto::CryptoProvider {
        rustls::crypto::aws_lc_rs::default_provider()
    }

    fn openssl(dir: &Path, args: &[&str]) {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("the openssl tool");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A self-signed certificate for `key` (made with `genpkey_args`), in `dir`.
    fn cert_and_key(dir: &Path, name: &str, genpkey_args: &[&str]) -> (PathBuf, PathBuf) {
        let key = format!("{name}.key");
        let mut args = vec!["genpkey", "-out", &key];
        args.extend_from_slice(genpkey_args);
        openssl(dir, &args);
        let crt = format!("{name}.crt");
        openssl(dir, &["req", "-x509", "-new", "-key", &key, "-out", &crt, "-days", "1", "-subj", "/CN=postgres"]);
        (dir.join(crt), dir.join(key))
    }

    fn load(cert: &Path, key: &Path, password: Option<&str>) -> Result<Identity, String> {
        ClientCert { cert: cert.to_owned(), key: key.to_owned(), password: password.map(Secret::new) }.load(&SOURCE_KEYS, &provider())
    }

    #[test]
    fn plain_pem_keys_load_in_every_layout() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (crt, key) = cert_and_key(d, "rsa", &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]);
        let id = load(&crt, &key, None).unwrap();
        assert!(id.plain_pem && matches!(id.key, PrivateKeyDer::Pkcs8(_)));
        // PKCS#1 ("RSA PRIVATE KEY").
        openssl(d, &["rsa", "-in", "rsa.key", "-out", "rsa1.key", "-traditional"]);
        let id = load(&crt, &d.join("rsa1.key"), None).unwrap();
        assert!(id.plain_pem && matches!(id.key, PrivateKeyDer::Pkcs1(_)));
        // EC, as PKCS#8 and as SEC1 ("EC PRIVATE KEY").
        let (ec_crt, ec_key) = cert_and_key(d, "ec", &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]);
        assert!(matches!(load(&ec_crt, &ec_key, None).unwrap().key, PrivateKeyDer::Pkcs8(_)));
        openssl(d, &["ec", "-in", "ec.key", "-out", "ec1.key"]);
        assert!(matches!(load(&ec_crt, &d.join("ec1.key"), None).unwrap().key, PrivateKeyDer::Sec1(_)));
        // A password given for a key that needs none is not an error (as libpq).
        assert!(load(&crt, &key, Some("unused")).is_ok());
    }

    #[test]
    fn der_and_encrypted_pkcs8_keys_load() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (crt, _) = cert_and_key(d, "c", &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]);
        // pgJDBC's default: DER PKCS#8, unencrypted.
        openssl(d, &["pkcs8", "-topk8", "-nocrypt", "-in", "c.key", "-outform", "DER", "-out", "c.pk8"]);
        let id = load(&crt, &d.join("c.pk8"), None).unwrap();
        assert!(!id.plain_pem && matches!(id.key, PrivateKeyDer::Pkcs8(_)));
        // Encrypted PKCS#8 (PBES2), PEM and DER; a DER certificate.
        openssl(d, &["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", "pass:s3cret", "-in", "c.key", "-out", "enc.pem"]);
        openssl(
            d,
            &["pkcs8", "-topk8", "-v2", "aes-128-cbc", "-passout", "pass:s3cret", "-in", "c.key", "-outform", "DER", "-out", "enc.pk8"],
        );
        openssl(d, &["x509", "-in", "c.crt", "-outform", "DER", "-out", "c.der"]);
        for key in ["enc.pem", "enc.pk8"] {
            let id = load(&d.join("c.der"), &d.join(key), Some("s3cret")).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert!(!id.plain_pem);
            // The unnamed copy the replication session reads holds the chain and the key.
            let (_file, path) = id.unnamed_pem_file().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains("BEGIN CERTIFICATE") && text.contains("BEGIN PRIVATE KEY"), "{text}");
            assert!(path.starts_with("/proc/self/fd"), "{path:?}");
        }
        let err = load(&crt, &d.join("enc.pem"), None).err().unwrap();
        assert!(err.contains("database.sslkey") && err.contains("enc.pem") && err.contains("database.sslpassword"), "{err}");
        let err = load(&crt, &d.join("enc.pk8"), Some("wrong")).err().unwrap();
        assert!(err.contains("database.sslkey") && err.contains("right one"), "{err}");
        assert!(!err.contains("wrong"), "the password is never shown: {err}");
    }

    #[test]
    fn unsupported_encryptions_say_how_to_convert() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (crt, _) = cert_and_key(d, "c", &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]);
        openssl(d, &["rsa", "-in", "c.key", "-aes256", "-passout", "pass:pw", "-traditional", "-out", "trad.key"]);
        let err = load(&crt, &d.join("trad.key"), Some("pw")).err().unwrap();
        assert!(err.contains("traditional") && err.contains("openssl pkcs8 -topk8"), "{err}");
        let pbes1 = Command::new("openssl")
            .args(["pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-passout", "pass:pw", "-in", "c.key", "-outform", "DER", "-out", "v1.pk8"])
            .current_dir(d)
            .output()
            .unwrap();
        if pbes1.status.success() {
            let err = load(&crt, &d.join("v1.pk8"), Some("pw")).err().unwrap();
            assert!(err.contains("database.sslkey") && err.contains("re-encrypt"), "{err}");
        }
    }

    #[test]
    fn errors_name_the_key_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (crt, key) = cert_and_key(d, "a", &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]);
        let (_, other_key) = cert_and_key(d, "b", &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]);
        let err = load(&d.join("missing.crt"), &key, None).err().unwrap();
        assert!(err.starts_with("database.sslcert ") && err.contains("missing.crt") && err.contains("cannot read"), "{err}");
        let err = load(&crt, &d.join("missing.key"), None).err().unwrap();
        assert!(err.starts_with("database.sslkey ") && err.contains("missing.key"), "{err}");
        let err = load(&crt, &other_key, None).err().unwrap();
        assert!(
            err.contains("database.sslkey") && err.contains("b.key") && err.contains("not the private key of the certificate"),
            "{err}"
        );
        // A certificate given as the key.
        let err = load(&crt, &crt, None).err().unwrap();
        assert!(err.contains("database.sslkey") && err.contains("holds no private key"), "{err}");
        std::fs::write(d.join("empty.crt"), "-----BEGIN NOTHING-----\n-----END NOTHING-----\n").unwrap();
        let err = load(&d.join("empty.crt"), &key, None).err().unwrap();
        assert!(err.contains("database.sslcert") && err.contains("no certificate"), "{err}");
    }
}
