//! Kafka Connect's signed inter-worker requests (KIP-507), used when a group runs the
//! `sessioned` protocol: the leader keeps a session key in the config topic (record
//! `session-key`), and a worker that sends an internal request (task configs for a
//! connector it runs, `POST /connectors/{c}/tasks`; zombie fencing, `PUT …/fence`) signs
//! its body with an HMAC under that key. The receiver checks the signature before it acts.
//!
//! Only the body is signed (not the method, path or query), base64 in the
//! `X-Connect-Authorization` header, the algorithm's JCA name in
//! `X-Connect-Request-Signature-Algorithm`, as Connect's `InternalRequestSignature` does.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use serde_json::{json, Value as Json};
use sluice_api::Props;

use super::HerderError;

pub const SIGNATURE_HEADER: &str = "X-Connect-Authorization";
pub const SIGNATURE_ALGORITHM_HEADER: &str = "X-Connect-Request-Signature-Algorithm";
/// The config-topic record key of the session key.
pub const SESSION_KEY_RECORD: &str = "session-key";

/// The HMAC algorithms, by their JCA names (those every JVM has).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    HmacSha1,
    HmacSha256,
    HmacSha384,
    HmacSha512,
}

impl Algorithm {
    const ALL: [Algorithm; 4] = [Self::HmacSha1, Self::HmacSha256, Self::HmacSha384, Self::HmacSha512];

    pub fn name(self) -> &'static str {
        match self {
            Self::HmacSha1 => "HmacSHA1",
            Self::HmacSha256 => "HmacSHA256",
            Self::HmacSha384 => "HmacSHA384",
            Self::HmacSha512 => "HmacSHA512",
        }
    }

    /// JCA names are matched without regard to case, as `Mac.getInstance` does.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The key size (bits) a JVM's `KeyGenerator` picks for this algorithm by default.
    fn default_key_bits(self) -> u32 {
        match self {
            Self::HmacSha1 | Self::HmacSha512 => 512,
            Self::HmacSha256 => 256,
            Self::HmacSha384 => 384,
        }
    }

    pub fn sign(self, key: &[u8], body: &[u8]) -> Vec<u8> {
        fn mac<M: Mac + KeyInit>(key: &[u8], body: &[u8]) -> Vec<u8> {
            let mut m = <M as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
            m.update(body);
            m.finalize().into_bytes().to_vec()
        }
        match self {
            Self::HmacSha1 => mac::<hmac::Hmac<sha1::Sha1>>(key, body),
            Self::HmacSha256 => mac::<hmac::Hmac<sha2::Sha256>>(key, body),
            Self::HmacSha384 => mac::<hmac::Hmac<sha2::Sha384>>(key, body),
            Self::HmacSha512 => mac::<hmac::Hmac<sha2::Sha512>>(key, body),
        }
    }

    fn supported() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}

/// Connect's `inter.worker.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningSettings {
    pub key_algorithm: Algorithm,
    /// `inter.worker.key.size` in bits; the algorithm's default when unset.
    pub key_bits: Option<u32>,
    pub key_ttl: Duration,
    pub signature_algorithm: Algorithm,
    pub verification_algorithms: Vec<Algorithm>,
}

impl Default for SigningSettings {
    fn default() -> Self {
        Self {
            key_algorithm: Algorithm::HmacSha256,
            key_bits: None,
            key_ttl: Duration::from_secs(3600),
            signature_algorithm: Algorithm::HmacSha256,
            verification_algorithms: vec![Algorithm::HmacSha256],
        }
    }
}

impl SigningSettings {
    /// Reads and checks the keys as Connect's `DistributedConfig` does; the error names the key.
    pub fn from_worker_props(props: &Props) -> Result<Self, String> {
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let algorithm = |key: &str, default: Algorithm| -> Result<Algorithm, String> {
            match get(key) {
                None => Ok(default),
                Some(v) => Algorithm::from_name(v).ok_or_else(|| {
                    format!(
                        "Invalid value {v} for configuration {key}: the algorithm is not supported; the supported algorithms are: {}",
                        Algorithm::supported()
                    )
                }),
            }
        };
        let mut s = Self::default();
        s.key_algorithm = algorithm("inter.worker.key.generation.algorithm", s.key_algorithm)?;
        s.signature_algorithm = algorithm("inter.worker.signature.algorithm", s.signature_algorithm)?;
        if let Some(v) = get("inter.worker.key.size") {
            let bits =
                v.parse::<u32>().ok().filter(|b| *b >= 8 && b % 8 == 0).ok_or_else(|| {
                    format!("Invalid value {v} for configuration inter.worker.key.size: a key size in bits, a multiple of 8")
                })?;
            s.key_bits = Some(bits);
        }
        if let Some(v) = get("inter.worker.key.ttl.ms") {
            let ms = v.parse::<u32>().ok().filter(|ms| *ms <= i32::MAX as u32).ok_or_else(|| {
                format!("Invalid value {v} for configuration inter.worker.key.ttl.ms: Value must be between 0 and {}", i32::MAX)
            })?;
            s.key_ttl = Duration::from_millis(ms.into());
        }
        if let Some(v) = props.get("inter.worker.verification.algorithms") {
            let names: Vec<&str> = v.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
            if names.is_empty() {
                return Err("Invalid value for configuration inter.worker.verification.algorithms: At least one signature verification algorithm must be provided".into());
            }
            s.verification_algorithms = names
                .iter()
                .map(|n| {
                    Algorithm::from_name(n).ok_or_else(|| {
                        format!(
                            "Invalid value {n} for configuration inter.worker.verification.algorithms: the algorithm is not supported; the supported algorithms are: {}",
                            Algorithm::supported()
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        if !s.verification_algorithms.contains(&s.signature_algorithm) {
            return Err(format!(
                "Invalid value {} for configuration inter.worker.signature.algorithm: Signature algorithm must be present in inter.worker.verification.algorithms list",
                s.signature_algorithm.name()
            ));
        }
        Ok(s)
    }

    fn key_bytes(&self) -> usize {
        (self.key_bits.unwrap_or_else(|| self.key_algorithm.default_key_bits()) / 8) as usize
    }

    /// A fresh random key for the leader to distribute.
    pub fn generate(&self, now_ms: i64) -> SessionKey {
        let mut key = vec![0u8; self.key_bytes()];
        getrandom::fill(&mut key).expect("the system's random source");
        SessionKey { key, algorithm: self.key_algorithm.name().to_owned(), created_ms: now_ms }
    }

    /// Leader: whether `current` must be replaced (none yet, expired, or not what this
    /// worker would generate), as Connect's `checkForKeyRotation`.
    pub fn needs_new_key(&self, current: Option<&SessionKey>, now_ms: i64) -> bool {
        match current {
            None => true,
            Some(k) => {
                k.created_ms.saturating_add(self.key_ttl.as_millis() as i64) <= now_ms
                    || !k.algorithm.eq_ignore_ascii_case(self.key_algorithm.name())
                    || k.key.len() != self.key_bytes()
            }
        }
    }

    /// Signs an internal request body: the two headers to send with it.
    pub fn sign(&self, key: &SessionKey, body: &[u8]) -> [(&'static str, String); 2] {
        let signature = self.signature_algorithm.sign(&key.key, body);
        [
            (SIGNATURE_HEADER, base64::engine::general_purpose::STANDARD.encode(signature)),
            (SIGNATURE_ALGORITHM_HEADER, self.signature_algorithm.name().to_owned()),
        ]
    }

    /// Checks an internal request as Connect's `DistributedHerder` does, with its answers:
    /// 400 without a signature or with an algorithm this worker does not accept, 503 before
    /// a session key is known, 403 for a signature that does not match.
    pub fn verify(&self, key: Option<&SessionKey>, signature: Option<&InternalSignature>, body: &[u8]) -> Result<(), HerderError> {
        let Some(signature) = signature else {
            return Err(HerderError::BadRequest("Internal request missing required signature".into()));
        };
        let algorithm = Algorithm::from_name(&signature.algorithm)
            .filter(|a| self.verification_algorithms.contains(a))
            .ok_or_else(|| {
                HerderError::BadRequest(format!(
                    "This worker does not support the '{}' key signing algorithm used by other workers. This worker is currently configured to use: {}. Check that all workers' configuration files permit the same set of signature algorithms, and correct any misconfigured worker and restart it.",
                    signature.algorithm,
                    self.verification_algorithms.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
                ))
            })?;
        let given = base64::engine::general_purpose::STANDARD
            .decode(signature.signature.trim())
            .map_err(|e| HerderError::BadRequest(format!("Illegal base64 in the request signature: {e}")))?;
        let Some(key) = key else {
            return Err(HerderError::Unavailable(
                "This worker is still starting up and has not been able to read a session key from the config topic yet".into(),
            ));
        };
        let expected = algorithm.sign(&key.key, body);
        if !constant_time_eq(&expected, &given) {
            return Err(HerderError::Forbidden("Internal request contained invalid signature.".into()));
        }
        Ok(())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The signature headers of a request, as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalSignature {
    pub algorithm: String,
    /// Base64.
    pub signature: String,
}

impl InternalSignature {
    /// `None` unless both headers are there (Connect's `fromHeaders`).
    pub fn from_headers(signature: Option<&str>, algorithm: Option<&str>) -> Option<Self> {
        Some(Self { signature: signature?.to_owned(), algorithm: algorithm?.to_owned() })
    }
}

/// The session key every worker of a sessioned group signs and checks internal requests with.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKey {
    pub key: Vec<u8>,
    /// The key generator's JCA name.
    pub algorithm: String,
    /// Epoch milliseconds.
    pub created_ms: i64,
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKey")
            .field("key", &"[hidden]")
            .field("algorithm", &self.algorithm)
            .field("created_ms", &self.created_ms)
            .finish()
    }
}

impl SessionKey {
    /// The config-topic value (Connect's `SESSION_KEY_V0` struct through the schemaless
    /// JSON converter): `{"key": base64, "algorithm", "creation-timestamp"}`.
    pub fn to_json(&self) -> Json {
        json!({
            "key": base64::engine::general_purpose::STANDARD.encode(&self.key),
            "algorithm": self.algorithm,
            "creation-timestamp": self.created_ms,
        })
    }

    pub fn from_json(v: &Json) -> Option<Self> {
        let key = base64::engine::general_purpose::STANDARD.decode(v.get("key")?.as_str()?).ok()?;
        Some(Self { key, algorithm: v.get("algorithm")?.as_str()?.to_owned(), created_ms: v.get("creation-timestamp")?.as_i64()? })
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn settings_follow_connect_defaults_and_rules() {
        let s = SigningSettings::from_worker_props(&Props::new()).unwrap();
        assert_eq!(s, SigningSettings::default());
        assert_eq!(s.key_bytes(), 32);
        let s = SigningSettings::from_worker_props(&props(&[
            ("inter.worker.key.generation.algorithm", "HmacSHA512"),
            ("inter.worker.signature.algorithm", "hmacsha384"),
            ("inter.worker.verification.algorithms", "HmacSHA256, HmacSHA384"),
            ("inter.worker.key.ttl.ms", "60000"),
        ]))
        .unwrap();
        assert_eq!((s.key_algorithm, s.signature_algorithm, s.key_bytes()), (Algorithm::HmacSha512, Algorithm::HmacSha384, 64));
        assert_eq!(s.key_ttl, Duration::from_secs(60));
        for (bad, names) in [
            (
                vec![("inter.worker.signature.algorithm", "HmacSHA512")],
                "Signature algorithm must be present in inter.worker.verification.algorithms list",
            ),
            (vec![("inter.worker.key.generation.algorithm", "HmacMD9")], "inter.worker.key.generation.algorithm"),
            (vec![("inter.worker.verification.algorithms", " , ")], "At least one signature verification algorithm"),
            (vec![("inter.worker.key.size", "12")], "inter.worker.key.size"),
            (vec![("inter.worker.key.ttl.ms", "-1")], "inter.worker.key.ttl.ms"),
        ] {
            let e = SigningSettings::from_worker_props(&props(&bad)).unwrap_err();
            assert!(e.contains(names), "{bad:?}: {e}");
        }
    }

    /// Signatures made by Kafka Connect 4.3's own `InternalRequestSignature` (recorded in
    /// tests/golden/connect/request-signatures.json by tests/golden/connect/record_signatures.sh)
    /// are accepted; a changed body or key is refused with Connect's answers.
    #[test]
    fn signatures_match_kafka_connects() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/connect/request-signatures.json");
        let cases: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = cases.as_array().unwrap();
        assert!(cases.len() >= 3);
        for case in cases {
            let key = SessionKey::from_json(&case["session_key"]).unwrap();
            let body = case["body"].as_str().unwrap().as_bytes();
            let signature = InternalSignature {
                algorithm: case["algorithm"].as_str().unwrap().to_owned(),
                signature: case["signature"].as_str().unwrap().to_owned(),
            };
            let settings = SigningSettings {
                signature_algorithm: Algorithm::from_name(&signature.algorithm).unwrap(),
                verification_algorithms: Algorithm::ALL.to_vec(),
                ..SigningSettings::default()
            };
            settings.verify(Some(&key), Some(&signature), body).unwrap_or_else(|e| panic!("{case}: {e}"));
            // Keys of the size a JVM generates for the algorithm.
            let generator = SigningSettings { key_algorithm: Algorithm::from_name(&key.algorithm).unwrap(), ..SigningSettings::default() };
            assert_eq!(generator.generate(0).key.len() as u64 * 8, case["key_bits"].as_u64().unwrap(), "{case}");
            assert_eq!(settings.sign(&key, body)[0].1, signature.signature, "{case}");
            let mut changed = body.to_vec();
            changed.push(b' ');
            assert_eq!(settings.verify(Some(&key), Some(&signature), &changed).unwrap_err().status_code(), 403);
        }
    }

    #[test]
    fn verification_answers_as_connect_does() {
        let s = SigningSettings::default();
        let key = s.generate(1);
        let body = br#"[{"task.class":"x"}]"#;
        let [(_, sig), (_, alg)] = s.sign(&key, body);
        let good = InternalSignature { algorithm: alg.clone(), signature: sig.clone() };
        s.verify(Some(&key), Some(&good), body).unwrap();
        let e = s.verify(Some(&key), None, body).unwrap_err();
        assert_eq!((e.status_code(), e.to_string().as_str()), (400, "Internal request missing required signature"));
        let e = s.verify(None, Some(&good), body).unwrap_err();
        assert_eq!(e.status_code(), 503);
        let other = s.generate(2);
        let e = s.verify(Some(&other), Some(&good), body).unwrap_err();
        assert_eq!((e.status_code(), e.to_string().as_str()), (403, "Internal request contained invalid signature."));
        let sha512 = InternalSignature { algorithm: "HmacSHA512".into(), signature: sig };
        let e = s.verify(Some(&key), Some(&sha512), body).unwrap_err();
        assert!(e.status_code() == 400 && e.to_string().contains("'HmacSHA512' key signing algorithm"), "{e}");
        // Rotation: none yet, expired, or another algorithm.
        assert!(s.needs_new_key(None, 0));
        assert!(!s.needs_new_key(Some(&key), 1 + 3_599_999));
        assert!(s.needs_new_key(Some(&key), 1 + 3_600_000));
        let k512 = SigningSettings { key_algorithm: Algorithm::HmacSha512, ..SigningSettings::default() }.generate(1);
        assert!(s.needs_new_key(Some(&k512), 2));
        // The config-topic value round-trips and never shows the key in Debug.
        assert_eq!(SessionKey::from_json(&key.to_json()), Some(key.clone()));
        assert!(!format!("{key:?}").contains(&base64::engine::general_purpose::STANDARD.encode(&key.key)));
    }
}
