//! Worker properties → librdkafka client settings.
//!
//! As in Kafka Connect, `bootstrap.servers` and the security keys (`security.protocol`,
//! `sasl.*`, `ssl.*`) at the top level of the worker properties apply to every client;
//! `producer.*`, `consumer.*` and `admin.*` apply to one kind and override them. Key names
//! are Java client names; most mean the same in librdkafka and pass through as they are.
//! The rest are translated ([`translate`]) or, when they only make sense in the JVM,
//! ignored with a log line. librdkafka rejects anything it does not know, and the error
//! names the worker property.

use std::collections::BTreeMap;

use sluice_api::Props;

use crate::log::{ClientOverrides, LogError, LogResult};

/// Which client a setting is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClientKind {
    Producer,
    Consumer,
    Admin,
}

impl ClientKind {
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Producer => "producer.",
            Self::Consumer => "consumer.",
            Self::Admin => "admin.",
        }
    }
}

/// One librdkafka setting and the worker property it came from (for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub value: String,
    pub origin: String,
}

/// Settings per client kind, already translated to librdkafka names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSettings {
    pub producer: BTreeMap<String, Setting>,
    pub consumer: BTreeMap<String, Setting>,
    pub admin: BTreeMap<String, Setting>,
}

/// Java client keys with no meaning here: the value is ignored (logged once).
const IGNORED: &[(&str, &str)] = &[
    ("key.serializer", "records are bytes already"),
    ("value.serializer", "records are bytes already"),
    ("key.deserializer", "records are read as bytes"),
    ("value.deserializer", "records are read as bytes"),
    ("partitioner.class", "the runtime picks partitions"),
    ("max.block.ms", "appends wait for librdkafka's queue instead"),
    ("max.poll.records", "reads are bounded by bytes"),
    ("default.api.timeout.ms", "requests use the log's request timeout"),
    ("auto.offset.reset", "sink tasks apply it where a partition has no committed offset"),
    ("enable.auto.commit", "the runtime commits sink offsets itself"),
    ("group.id", "sink groups are named connect-<connector>"),
    ("client.dns.lookup", "librdkafka resolves every address"),
    ("interceptor.classes", "Java interceptors cannot run here"),
    ("metric.reporters", "Java metric reporters cannot run here"),
    ("ssl.protocol", "OpenSSL negotiates the protocol"),
    ("ssl.enabled.protocols", "OpenSSL negotiates the protocol"),
    ("ssl.provider", "OpenSSL is the provider"),
    ("ssl.keymanager.algorithm", "JVM only"),
    ("ssl.trustmanager.algorithm", "JVM only"),
    ("ssl.secure.random.implementation", "JVM only"),
    ("ssl.truststore.type", "read with ssl.truststore.location"),
    ("ssl.keystore.type", "read with ssl.keystore.location"),
    ("ssl.client.auth", "a server setting (the REST API's https listeners read it)"),
    ("sasl.login.class", "JVM only"),
    ("sasl.client.callback.handler.class", "JVM only"),
    ("sasl.login.callback.handler.class", "JVM only"),
    ("retries", "librdkafka retries until delivery.timeout.ms"),
];

/// `base` with a connector's client overrides laid over each kind (KIP-458): the keys are
/// translated as the worker's are. `auto.offset.reset` is left out: the sink task applies it.
pub fn with_overrides(base: &ClientSettings, overrides: &ClientOverrides) -> LogResult<ClientSettings> {
    let mut out = base.clone();
    for (kind, given, target) in [
        (ClientKind::Producer, &overrides.producer, &mut out.producer),
        (ClientKind::Consumer, &overrides.consumer, &mut out.consumer),
        (ClientKind::Admin, &overrides.admin, &mut out.admin),
    ] {
        let prefix = format!("{}override.", kind.prefix());
        let prefixed: Props = given.iter().map(|(k, v)| (format!("{prefix}{k}"), v.clone())).collect();
        let mut translated = BTreeMap::new();
        for (key, value) in given {
            if key != crate::worker::overrides::OFFSET_RESET_KEY {
                translate(&prefixed, &prefix, key, value, &mut translated)?;
            }
        }
        target.extend(translated);
    }
    Ok(out)
}

/// Builds the settings of every client kind from the worker properties.
pub fn from_worker_props(props: &Props) -> LogResult<ClientSettings> {
    let mut common = BTreeMap::new();
    let mut per_kind: BTreeMap<ClientKind, BTreeMap<String, Setting>> = BTreeMap::new();
    for (key, value) in props {
        if key == "bootstrap.servers" || is_security_key(key) {
            translate(props, "", key, value, &mut common)?;
            continue;
        }
        // The REST API's admin listeners, not the admin client's.
        if key == "admin.listeners" || key.starts_with("admin.listeners.") {
            continue;
        }
        for kind in [ClientKind::Producer, ClientKind::Consumer, ClientKind::Admin] {
            if let Some(rest) = key.strip_prefix(kind.prefix()) {
                translate(props, kind.prefix(), rest, value, per_kind.entry(kind).or_default())?;
            }
        }
    }
    let merged = |kind| {
        let mut m = common.clone();
        m.extend(per_kind.get(&kind).cloned().unwrap_or_default());
        m
    };
    Ok(ClientSettings { producer: merged(ClientKind::Producer), consumer: merged(ClientKind::Consumer), admin: merged(ClientKind::Admin) })
}

fn is_security_key(key: &str) -> bool {
    key == "security.protocol" || key.starts_with("sasl.") || key.starts_with("ssl.")
}

/// Adds the librdkafka form of one Java client key (`key` without its prefix) to `out`.
fn translate(props: &Props, prefix: &str, key: &str, value: &str, out: &mut BTreeMap<String, Setting>) -> LogResult<()> {
    let origin = format!("{prefix}{key}");
    let mut put = |k: &str, v: String| {
        out.insert(k.to_owned(), Setting { value: v, origin: origin.clone() });
    };
    if let Some((_, why)) = IGNORED.iter().find(|(k, _)| *k == key) {
        tracing::info!(property = %origin, reason = why, "client property ignored by the Kafka log");
        return Ok(());
    }
    // The store type decides how a store location is read; it may be given with or
    // without the client prefix.
    let store_type = |which: &str| {
        props
            .get(&format!("{prefix}ssl.{which}.type"))
            .or_else(|| props.get(&format!("ssl.{which}.type")))
            .map(|t| t.trim().to_ascii_uppercase())
            .unwrap_or_else(|| "JKS".to_owned())
    };
    match key {
        "delivery.timeout.ms" => put("message.timeout.ms", value.to_owned()),
        "max.request.size" => put("message.max.bytes", value.to_owned()),
        "fetch.max.wait.ms" => put("fetch.wait.max.ms", value.to_owned()),
        "send.buffer.bytes" => put("socket.send.buffer.bytes", value.to_owned()),
        "receive.buffer.bytes" => put("socket.receive.buffer.bytes", value.to_owned()),
        "buffer.memory" => {
            let bytes: u64 = value.trim().parse().map_err(|_| invalid(&origin, value, "a number of bytes"))?;
            put("queue.buffering.max.kbytes", (bytes / 1024).max(1).to_string());
        }
        "ssl.endpoint.identification.algorithm" => {
            put(key, if value.trim().is_empty() { "none".to_owned() } else { value.to_owned() });
        }
        "ssl.truststore.location" => match store_type("truststore").as_str() {
            "PEM" => put("ssl.ca.location", value.to_owned()),
            t => {
                return Err(unsupported(
                    &origin,
                    &format!(
                    "a {t} truststore cannot be read by librdkafka; convert it to PEM and set ssl.ca.location (or ssl.truststore.type=PEM)"
                ),
                ))
            }
        },
        "ssl.truststore.password" => {
            if store_type("truststore") != "PEM" {
                return Err(unsupported(&origin, "JKS truststores cannot be read by librdkafka; convert to PEM and set ssl.ca.location"));
            }
        }
        "ssl.truststore.certificates" => put("ssl.ca.pem", value.to_owned()),
        "ssl.keystore.location" => match store_type("keystore").as_str() {
            "PKCS12" => put("ssl.keystore.location", value.to_owned()),
            "PEM" => {
                put("ssl.certificate.location", value.to_owned());
                put("ssl.key.location", value.to_owned());
            }
            t => {
                return Err(unsupported(
                    &origin,
                    &format!("a {t} keystore cannot be read by librdkafka; use PKCS12 (ssl.keystore.type=PKCS12) or PEM"),
                ))
            }
        },
        "ssl.keystore.key" => put("ssl.key.pem", value.to_owned()),
        "ssl.keystore.certificate.chain" => put("ssl.certificate.pem", value.to_owned()),
        "sasl.jaas.config" => {
            for (k, v) in jaas(&origin, value)? {
                put(k, v);
            }
        }
        _ => put(key, value.to_owned()),
    }
    Ok(())
}

/// The librdkafka settings a JAAS login module line stands for (PLAIN, SCRAM, Kerberos).
fn jaas(origin: &str, value: &str) -> LogResult<Vec<(&'static str, String)>> {
    let value = value.trim().trim_end_matches(';').trim();
    let (module, rest) = value.split_once(char::is_whitespace).unwrap_or((value, ""));
    let options = jaas_options(rest);
    let opt = |k: &str| options.iter().find(|(name, _)| name == k).map(|(_, v)| v.clone());
    let module = module.rsplit('.').next().unwrap_or(module);
    match module {
        "PlainLoginModule" | "ScramLoginModule" => {
            let (Some(user), Some(password)) = (opt("username"), opt("password")) else {
                return Err(unsupported(origin, "the login module needs username=\"…\" and password=\"…\""));
            };
            Ok(vec![("sasl.username", user), ("sasl.password", password)])
        }
        "Krb5LoginModule" => {
            let mut out = Vec::new();
            if let Some(p) = opt("principal") {
                out.push(("sasl.kerberos.principal", p));
            }
            if let Some(k) = opt("keyTab") {
                out.push(("sasl.kerberos.keytab", k));
            }
            Ok(out)
        }
        other => Err(unsupported(origin, &format!("login module {other} is not supported; use PlainLoginModule, ScramLoginModule or Krb5LoginModule, or set librdkafka's sasl.* keys directly"))),
    }
}

/// `required username="a" password="b\"c"` → `[("username", "a"), ("password", "b\"c")]`.
fn jaas_options(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let name: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        if name.is_empty() {
            return out;
        }
        if chars.next_if_eq(&'=').is_none() {
            continue; // a flag such as `required`
        }
        let mut value = String::new();
        if chars.next_if_eq(&'"').is_some() {
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| !c.is_whitespace())).collect();
        }
        out.push((name, value));
    }
}

/// `worker property producer.linger.ms` or `connector property producer.override.linger.ms`.
pub fn origin_label(origin: &str) -> String {
    let whose = if crate::worker::overrides::PREFIXES.iter().any(|p| origin.starts_with(p)) { "connector" } else { "worker" };
    format!("{whose} property {origin}")
}

fn invalid(origin: &str, value: &str, expected: &str) -> LogError {
    LogError::Invalid(format!("{}={value:?} is invalid: expected {expected}", origin_label(origin)))
}

fn unsupported(origin: &str, why: &str) -> LogError {
    LogError::Invalid(format!("{}: {why}", origin_label(origin)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn values(m: &BTreeMap<String, Setting>) -> BTreeMap<&str, &str> {
        m.iter().map(|(k, s)| (k.as_str(), s.value.as_str())).collect()
    }

    #[test]
    fn common_keys_reach_every_client_and_prefixes_override() {
        let s = from_worker_props(&props(&[
            ("bootstrap.servers", "a:9092"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p\"w";"#),
            ("producer.linger.ms", "20"),
            ("producer.delivery.timeout.ms", "30000"),
            ("producer.buffer.memory", "33554432"),
            ("consumer.fetch.max.wait.ms", "100"),
            ("consumer.security.protocol", "SSL"),
            ("admin.request.timeout.ms", "1000"),
            ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ]))
        .unwrap();
        let p = values(&s.producer);
        assert_eq!(p["bootstrap.servers"], "a:9092");
        assert_eq!(p["sasl.username"], "u");
        assert_eq!(p["sasl.password"], "p\"w");
        assert_eq!(p["linger.ms"], "20");
        assert_eq!(p["message.timeout.ms"], "30000");
        assert_eq!(p["queue.buffering.max.kbytes"], "32768");
        assert!(!p.contains_key("key.converter"));
        let c = values(&s.consumer);
        assert_eq!(c["fetch.wait.max.ms"], "100");
        assert_eq!(c["security.protocol"], "SSL");
        assert!(!c.contains_key("linger.ms"));
        assert_eq!(values(&s.admin)["request.timeout.ms"], "1000");
        assert_eq!(s.producer["message.timeout.ms"].origin, "producer.delivery.timeout.ms");
    }

    #[test]
    fn stores_are_mapped_or_rejected_by_type() {
        let pem = from_worker_props(&props(&[("ssl.truststore.type", "PEM"), ("ssl.truststore.location", "/ca.pem")])).unwrap();
        assert_eq!(values(&pem.admin)["ssl.ca.location"], "/ca.pem");
        let err = from_worker_props(&props(&[("ssl.truststore.location", "/ts.jks")])).unwrap_err().to_string();
        assert!(err.contains("ssl.truststore.location") && err.contains("PEM"), "{err}");
        let p12 =
            from_worker_props(&props(&[("producer.ssl.keystore.type", "PKCS12"), ("producer.ssl.keystore.location", "/k.p12")])).unwrap();
        assert_eq!(values(&p12.producer)["ssl.keystore.location"], "/k.p12");
        let err = from_worker_props(&props(&[("sasl.jaas.config", "com.example.Custom required;")])).unwrap_err().to_string();
        assert!(err.contains("sasl.jaas.config") && err.contains("Custom"), "{err}");
    }

    #[test]
    fn connector_overrides_lie_over_the_worker_settings() {
        let base = from_worker_props(&props(&[
            ("bootstrap.servers", "a:9092"),
            ("producer.linger.ms", "20"),
            ("consumer.fetch.max.wait.ms", "100"),
        ]))
        .unwrap();
        let overrides = ClientOverrides::from_connector_config(&props(&[
            ("producer.override.compression.type", "gzip"),
            ("producer.override.linger.ms", "1"),
            ("consumer.override.auto.offset.reset", "latest"),
            (
                "consumer.override.sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="c" password="s";"#,
            ),
            ("admin.override.delivery.timeout.ms", "9"),
        ]));
        let s = with_overrides(&base, &overrides).unwrap();
        let p = values(&s.producer);
        assert_eq!((p["linger.ms"], p["compression.type"], p["bootstrap.servers"]), ("1", "gzip", "a:9092"));
        assert_eq!(s.producer["linger.ms"].origin, "producer.override.linger.ms");
        let c = values(&s.consumer);
        assert_eq!((c["fetch.wait.max.ms"], c["sasl.username"], c["sasl.password"]), ("100", "c", "s"));
        assert!(!c.contains_key("auto.offset.reset"), "the sink task applies auto.offset.reset");
        assert!(!c.contains_key("compression.type"));
        assert_eq!(values(&s.admin)["message.timeout.ms"], "9");
        assert_eq!(with_overrides(&base, &ClientOverrides::default()).unwrap(), base);
        let err = with_overrides(
            &base,
            &ClientOverrides::from_connector_config(&props(&[("producer.override.ssl.truststore.location", "/t.jks")])),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("connector property producer.override.ssl.truststore.location"), "{err}");
    }

    #[test]
    fn java_only_keys_are_dropped() {
        let s =
            from_worker_props(&props(&[("producer.key.serializer", "x"), ("consumer.max.poll.records", "5"), ("producer.retries", "3")]))
                .unwrap();
        assert!(s.producer.is_empty() && s.consumer.is_empty());
    }
}
