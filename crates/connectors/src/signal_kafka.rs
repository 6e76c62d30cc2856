//! Debezium's Kafka signal channel, for every CDC source: with `kafka` in
//! `signal.enabled.channels`, signals are records of `signal.kafka.topic` (default
//! `<topic.prefix>-signal`), partition 0, whose key is the connector's `topic.prefix` and
//! whose value is `{"id": …, "type": …, "data": {…}}`. They are read by a consumer of group
//! `signal.kafka.groupId` (default `kafka-signal`) from `signal.kafka.bootstrap.servers`,
//! with every `signal.consumer.*` key passed to it, from the group's committed offset (the
//! earliest record without one), committing as it goes, as Debezium's channel does. A record
//! with another key, or a value that is not such a JSON object, is logged and skipped.
//!
//! ```text
//!  producer ──▶ <prefix>-signal [0]  key "<topic.prefix>", value {"id","type","data"}
//!                       │
//!  source task, between batches: KafkaSignals::read ──▶ the same actions as a signal row
//! ```

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value as Json;
use sluice_api::{ConfigKey, ConfigType, ConnectError, ConnectResult, Importance};

pub const TOPIC: &str = "signal.kafka.topic";
pub const BOOTSTRAP_SERVERS: &str = "signal.kafka.bootstrap.servers";
pub const GROUP_ID: &str = "signal.kafka.groupId";
pub const POLL_TIMEOUT_MS: &str = "signal.kafka.poll.timeout.ms";
pub const CONSUMER_PREFIX: &str = "signal.consumer.";
pub const DEFAULT_GROUP_ID: &str = "kafka-signal";

/// The channel's keys, for a connector's config definition.
pub fn keys() -> Vec<ConfigKey> {
    vec![
        ConfigKey::new(
            TOPIC,
            ConfigType::String,
            Importance::High,
            "The topic of signals to the connector (Kafka signal channel); empty: <topic.prefix>-signal.",
        )
        .default_value(""),
        ConfigKey::new(
            BOOTSTRAP_SERVERS,
            ConfigType::String,
            Importance::High,
            "The Kafka brokers the signal topic is read from (required with the kafka channel).",
        )
        .default_value(""),
        ConfigKey::new(GROUP_ID, ConfigType::String, Importance::Low, "The consumer group of the signal topic's reader.")
            .default_value(DEFAULT_GROUP_ID),
        ConfigKey::new(
            POLL_TIMEOUT_MS,
            ConfigType::Int,
            Importance::Low,
            "Accepted for Debezium's configs; signals are read between batches without waiting.",
        )
        .default_value("0"),
    ]
}

/// Where the channel reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSignalConfig {
    pub topic: String,
    pub bootstrap_servers: String,
    pub group_id: String,
    /// `signal.consumer.*`, without the prefix.
    pub consumer: Vec<(String, String)>,
}

/// Java-client keys that have no librdkafka counterpart, or that the channel sets itself.
const NOT_PASSED: &[&str] = &["key.deserializer", "value.deserializer", "client.id"];

impl KafkaSignalConfig {
    /// The channel's settings from a connector's keys (`get` reads one), for a connector
    /// whose `topic.prefix` is `prefix`.
    pub fn parse<'a>(
        get: impl Fn(&str) -> Option<String>,
        all: impl Iterator<Item = (&'a String, &'a String)>,
        prefix: &str,
    ) -> ConnectResult<Self> {
        let bootstrap_servers = get(BOOTSTRAP_SERVERS).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).ok_or_else(|| {
            ConnectError::config(
                BOOTSTRAP_SERVERS,
                "the kafka signal channel needs signal.kafka.bootstrap.servers (the brokers of the signal topic)",
            )
        })?;
        let consumer = all
            .filter_map(|(k, v)| k.strip_prefix(CONSUMER_PREFIX).map(|k| (k.to_owned(), v.clone())))
            .filter(|(k, _)| !NOT_PASSED.contains(&k.as_str()))
            .collect();
        Ok(Self {
            topic: get(TOPIC).filter(|t| !t.trim().is_empty()).unwrap_or_else(|| format!("{prefix}-signal")),
            bootstrap_servers,
            group_id: get(GROUP_ID).filter(|g| !g.trim().is_empty()).unwrap_or_else(|| DEFAULT_GROUP_ID.to_owned()),
            consumer,
        })
    }
}

/// A signal read from the topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSignal {
    pub id: String,
    pub kind: String,
    /// The `data` object as JSON text (`None` when absent).
    pub data: Option<String>,
    /// Its offset in partition 0.
    pub offset: i64,
}

/// Reads a record of the signal topic: `None` (logged) when it is not a signal for `prefix`.
pub fn parse_record(prefix: &str, key: Option<&[u8]>, value: Option<&[u8]>, offset: i64) -> Option<KafkaSignal> {
    let key = key.map(String::from_utf8_lossy);
    if key.as_deref() != Some(prefix) {
        tracing::info!(key = ?key, connector = prefix, offset, "a signal record whose key is not this connector's topic.prefix; skipped");
        return None;
    }
    let text = String::from_utf8_lossy(value.filter(|v| !v.is_empty())?);
    let doc: Json = match serde_json::from_str(&text) {
        Ok(Json::Object(m)) => Json::Object(m),
        Ok(_) | Err(_) => {
            tracing::error!(offset, "a signal record whose value is not a JSON object; skipped");
            return None;
        }
    };
    let text_of = |k: &str| doc.get(k).and_then(Json::as_str).map(str::to_owned);
    let Some(kind) = text_of("type") else {
        tracing::error!(offset, "a signal record without a type; skipped");
        return None;
    };
    Some(KafkaSignal {
        id: text_of("id").unwrap_or_else(|| offset.to_string()),
        kind,
        data: doc.get("data").filter(|d| !d.is_null()).map(Json::to_string),
        offset,
    })
}

/// The channel's consumer: assigned partition 0 of the topic, read without waiting.
pub struct KafkaSignals {
    consumer: BaseConsumer,
    prefix: String,
    topic: String,
}

impl KafkaSignals {
    pub fn open(cfg: &KafkaSignalConfig, prefix: &str) -> ConnectResult<Self> {
        let mut c = ClientConfig::new();
        c.set("enable.auto.commit", "true").set("auto.offset.reset", "earliest");
        for (k, v) in &cfg.consumer {
            c.set(k, v);
        }
        c.set("bootstrap.servers", &cfg.bootstrap_servers).set("group.id", &cfg.group_id).set("enable.partition.eof", "false");
        let consumer: BaseConsumer =
            c.create().map_err(|e| ConnectError::config(CONSUMER_PREFIX, format!("cannot create the signal topic's consumer: {e}")))?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&cfg.topic, 0, Offset::Stored)
            .map_err(|e| ConnectError::config(TOPIC, format!("cannot assign the signal topic: {e}")))?;
        consumer.assign(&tpl).map_err(|e| ConnectError::config(TOPIC, format!("cannot assign the signal topic: {e}")))?;
        tracing::info!(topic = %cfg.topic, group = %cfg.group_id, "reading signals from Kafka");
        Ok(Self { consumer, prefix: prefix.to_owned(), topic: cfg.topic.clone() })
    }

    /// The signals that arrived since the last call (at most `max`), without waiting.
    pub fn read(&self, max: usize) -> Vec<KafkaSignal> {
        let mut out = Vec::new();
        for _ in 0..max {
            match self.consumer.poll(Duration::ZERO) {
                None => break,
                Some(Ok(m)) => out.extend(parse_record(&self.prefix, m.key(), m.payload(), m.offset())),
                // A topic not created yet, a broker away: the consumer retries by itself.
                Some(Err(e)) => {
                    tracing::debug!(topic = %self.topic, error = %e, "reading the signal topic");
                    break;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn config_defaults_and_consumer_keys() {
        let props: BTreeMap<String, String> = [
            ("signal.kafka.bootstrap.servers", "b:9092"),
            ("signal.consumer.security.protocol", "SSL"),
            ("signal.consumer.key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let c = KafkaSignalConfig::parse(|k| props.get(k).cloned(), props.iter(), "shop").unwrap();
        assert_eq!(c.topic, "shop-signal");
        assert_eq!(c.group_id, "kafka-signal");
        assert_eq!(c.consumer, vec![("security.protocol".to_owned(), "SSL".to_owned())]);
        let none: BTreeMap<String, String> = BTreeMap::new();
        let err = KafkaSignalConfig::parse(|k| none.get(k).cloned(), none.iter(), "shop").unwrap_err().to_string();
        assert!(err.contains(BOOTSTRAP_SERVERS), "{err}");
    }

    #[test]
    fn records_are_signals_of_this_connector_only() {
        let v = br#"{"id": "s1", "type": "execute-snapshot", "data": {"data-collections": ["public.t"], "type": "INCREMENTAL"}}"#;
        let s = parse_record("shop", Some(b"shop"), Some(v), 7).unwrap();
        assert_eq!((s.id.as_str(), s.kind.as_str(), s.offset), ("s1", "execute-snapshot", 7));
        let data: Json = serde_json::from_str(s.data.as_deref().unwrap()).unwrap();
        assert_eq!(data["data-collections"][0], "public.t");
        assert_eq!(parse_record("shop", Some(b"other"), Some(v), 8), None);
        assert_eq!(parse_record("shop", None, Some(v), 8), None);
        assert_eq!(parse_record("shop", Some(b"shop"), Some(b"not json"), 9), None);
        assert_eq!(parse_record("shop", Some(b"shop"), Some(br#"{"id": "x"}"#), 9), None);
        // Without an id, the record's offset names it.
        let s = parse_record("shop", Some(b"shop"), Some(br#"{"type": "log", "data": {"message": "hi"}}"#), 10).unwrap();
        assert_eq!(s.id, "10");
    }
}
