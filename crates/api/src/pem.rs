//! Certificates and private keys from files or inline PEM, for every TLS end the appliance
//! has (the Postgres client's `sslcert`/`sslkey`, the REST API's keystore):
//!
//! | what | formats |
//! |---|---|
//! | certificates | PEM (a chain, leaf first) or one DER certificate |
//! | key, plain | PEM PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`), SEC1 (`EC PRIVATE KEY`); DER PKCS#8, PKCS#1 or SEC1 |
//! | key, encrypted | PKCS#8 `ENCRYPTED PRIVATE KEY`, PEM or DER, with PBES2 (PBKDF2 or scrypt, AES-CBC) |
//!
//! Refused with a message that says how to convert the key: OpenSSL's traditional
//! encrypted PEM (`Proc-Type: 4,ENCRYPTED`) and PKCS#8 with PBES1 (e.g. `PBE-MD5-DES`).
//! Messages never show a password. [`encode`] and [`encode_key`] write PEM back.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::Secret;

/// `der` as PEM under `label` (64-column lines, LF).
pub fn encode(label: &str, der: &[u8]) -> Result<String, String> {
    pkcs8::der::pem::encode_string(label, pkcs8::der::pem::LineEnding::LF, der).map_err(|e| e.to_string())
}

/// A private key as PEM, labelled by its kind (`PRIVATE KEY`, `RSA PRIVATE KEY` or
/// `EC PRIVATE KEY`).
pub fn encode_key(key: &PrivateKeyDer<'_>) -> Result<String, String> {
    let label = match key {
        PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
        PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
        _ => "PRIVATE KEY",
    };
    encode(label, key.secret_der())
}

/// Whether `bytes` hold PEM (else DER).
pub fn is_pem(bytes: &[u8]) -> bool {
    bytes.windows(11).any(|w| w == b"-----BEGIN ")
}

/// The certificates in `path` (PEM, leaf first, or one DER certificate), and whether the
/// file is PEM.
pub fn read_chain(path: &Path) -> Result<(Vec<CertificateDer<'static>>, bool), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the certificate: {e}"))?;
    parse_chain(bytes)
}

/// [`read_chain`] of bytes already read.
pub fn parse_chain(bytes: Vec<u8>) -> Result<(Vec<CertificateDer<'static>>, bool), String> {
    if !is_pem(&bytes) {
        return Ok((vec![CertificateDer::from(bytes)], false));
    }
    let chain =
        CertificateDer::pem_slice_iter(&bytes).collect::<Result<Vec<_>, _>>().map_err(|e| format!("cannot parse the certificate: {e}"))?;
    if chain.is_empty() {
        return Err("holds no certificate (expected PEM with BEGIN CERTIFICATE, or DER)".to_owned());
    }
    Ok((chain, true))
}

/// The private key in `path`, and whether it is unencrypted PEM. `password_key` names the
/// configuration key of the password in messages.
pub fn read_key(path: &Path, password: Option<&Secret>, password_key: &str) -> Result<(PrivateKeyDer<'static>, bool), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the key: {e}"))?;
    parse_key(bytes, password, password_key)
}

/// [`read_key`] of bytes already read.
pub fn parse_key(bytes: Vec<u8>, password: Option<&Secret>, password_key: &str) -> Result<(PrivateKeyDer<'static>, bool), String> {
    if !is_pem(&bytes) {
        if let Ok(info) = pkcs8::EncryptedPrivateKeyInfo::try_from(bytes.as_slice()) {
            return Ok((decrypt(&info, password, password_key)?, false));
        }
        if let Some(oid) = encryption_oid(&bytes) {
            return Err(unsupported_encryption(oid));
        }
        return PrivateKeyDer::try_from(bytes)
            .map(|k| (k, false))
            .map_err(|_| "is neither PEM nor a DER PKCS#8, PKCS#1 or SEC1 private key".to_owned());
    }
    let text = String::from_utf8_lossy(&bytes);
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "is encrypted in OpenSSL's traditional PEM format, which is not supported; convert it to encrypted PKCS#8 \
             (openssl pkcs8 -topk8 -v2 aes-256-cbc -in KEY -out KEY.pk8) and give its password in {password_key}"
        ));
    }
    if let Ok(key) = PrivateKeyDer::from_pem_slice(&bytes) {
        return Ok((key, true));
    }
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let Some(start) = text.find(BEGIN) else {
        return Err("holds no private key (expected PEM PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY or ENCRYPTED PRIVATE KEY)".to_owned());
    };
    let end = text[start..].find(END).map(|e| start + e + END.len()).ok_or("has an unterminated ENCRYPTED PRIVATE KEY section")?;
    let (_, der) = pkcs8::der::pem::decode_vec(text[start..end].as_bytes()).map_err(|e| format!("cannot parse the key: {e}"))?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| match encryption_oid(&der) {
        Some(oid) => unsupported_encryption(oid),
        None => format!("cannot parse the encrypted key: {e}"),
    })?;
    Ok((decrypt(&info, password, password_key)?, false))
}

/// The algorithm of an encrypted PKCS#8 structure whose scheme is not PBES2 (e.g. PKCS#12's
/// `pbeWithSHAAnd3-KeyTripleDES-CBC`), which the parser above does not take.
fn encryption_oid(der: &[u8]) -> Option<pkcs8::ObjectIdentifier> {
    use pkcs8::der::asn1::OctetStringRef;
    use pkcs8::der::{Decode, Reader, SliceReader};
    let mut reader = SliceReader::new(der).ok()?;
    reader
        .sequence(|r| {
            let alg = pkcs8::AlgorithmIdentifierRef::decode(r)?;
            OctetStringRef::decode(r)?;
            Ok(alg.oid)
        })
        .ok()
}

fn unsupported_encryption(oid: pkcs8::ObjectIdentifier) -> String {
    format!(
        "is encrypted with a scheme this version does not support (OID {oid}; PBES2 is supported); re-encrypt it \
         (openssl pkcs8 -topk8 -v2 aes-256-cbc -in KEY -out KEY.pk8)"
    )
}

fn decrypt(
    info: &pkcs8::EncryptedPrivateKeyInfo<'_>,
    password: Option<&Secret>,
    password_key: &str,
) -> Result<PrivateKeyDer<'static>, String> {
    let Some(password) = password else {
        return Err(format!("is encrypted; give its password in {password_key}"));
    };
    match info.decrypt(password.expose().as_bytes()) {
        Ok(doc) => Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(doc.as_bytes().to_vec()))),
        Err(pkcs8::Error::EncryptedPrivateKey(pkcs8::pkcs5::Error::NoPbes1CryptSupport)) => {
            Err("is encrypted with PBES1 (e.g. PBE-MD5-DES), which is not supported; re-encrypt it with PBES2 \
             (openssl pkcs8 -topk8 -v2 aes-256-cbc -in KEY -out KEY.pk8)"
                .to_owned())
        }
        Err(pkcs8::Error::EncryptedPrivateKey(pkcs8::pkcs5::Error::UnsupportedAlgorithm { oid })) => {
            Err(format!("is encrypted with an algorithm this version does not support ({oid}); re-encrypt it with aes-256-cbc"))
        }
        Err(_) => Err(format!("cannot be decrypted with the password in {password_key} (is it the right one?)")),
    }
}
