//! Logical decoding messages (`pg_logical_emit_message`) as Debezium emits them: one record
//! per message on `<topic.prefix>.message`, key `{prefix}`
//! (`io.debezium.connector.postgresql.MessageKey`), value `{op: "m", ts_ms, source,
//! transaction, message: {prefix, content}}` (`…MessageValue`), the content as
//! `binary.handling.mode` says. `message.prefix.include.list` / `exclude.list` choose the
//! prefixes (regular expressions matched against the whole prefix, case-insensitively).
//!
//! Progress (see `replication.rs`): a transactional message is a change of its transaction
//! (counted in `txn_seq`, so a restart inside the transaction skips it like any change); a
//! non-transactional one is delivered on its own, between transactions, and its offset
//! resumes just after it.

use regex::Regex;
use sluice_api::{ConnectResult, Schema, SchemaRef, SourceOffset, SourcePartition, SourceRecord, Struct, Value};

use super::column::whole_name_regex;
use super::config::BinaryMode;
use super::envelope::{now_ms, source_block, SourceInfo};

pub const MESSAGE_PREFIX_INCLUDE_LIST: &str = "message.prefix.include.list";
pub const MESSAGE_PREFIX_EXCLUDE_LIST: &str = "message.prefix.exclude.list";
/// The `data_collection` name Debezium counts messages under in transaction metadata.
pub const COLLECTION: &str = "LOGICAL_DECODING_MESSAGE";

/// Which message prefixes are emitted (at most one of the two lists set).
#[derive(Debug, Clone, Default)]
pub struct PrefixFilter {
    include: Vec<Regex>,
    exclude: Vec<Regex>,
}

impl PrefixFilter {
    pub fn new(include: &[String], exclude: &[String]) -> ConnectResult<Self> {
        if !include.is_empty() && !exclude.is_empty() {
            return Err(sluice_api::ConnectError::config(
                MESSAGE_PREFIX_EXCLUDE_LIST,
                "message.prefix.include.list and message.prefix.exclude.list cannot both be set",
            ));
        }
        let compile = |key, list: &[String]| list.iter().map(|p| whole_name_regex(key, p)).collect::<ConnectResult<Vec<_>>>();
        Ok(Self { include: compile(MESSAGE_PREFIX_INCLUDE_LIST, include)?, exclude: compile(MESSAGE_PREFIX_EXCLUDE_LIST, exclude)? })
    }

    pub fn includes(&self, prefix: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|r| r.is_match(prefix))) && !self.exclude.iter().any(|r| r.is_match(prefix))
    }
}

/// The message topic of one connector: its name and schemas.
#[derive(Debug, Clone)]
pub struct MessageTopic {
    topic: String,
    server: String,
    db: String,
    binary: BinaryMode,
    key_schema: SchemaRef,
    block_schema: SchemaRef,
    value_schema: SchemaRef,
}

impl MessageTopic {
    pub fn new(topic_prefix: &str, db: &str, binary: BinaryMode, source_schema: &SchemaRef) -> Self {
        let key_schema = Schema::struct_of([("prefix", Schema::string().optional().into_ref())])
            .named("io.debezium.connector.postgresql.MessageKey")
            .with_version(1)
            .into_ref();
        let content = match binary {
            BinaryMode::Bytes => Schema::bytes(),
            _ => Schema::string(),
        };
        let block_schema = Schema::struct_of([("prefix", Schema::string().optional().into_ref()), ("content", content.optional().into_ref())])
            .named("io.debezium.connector.postgresql.Message")
            .with_version(1)
            .into_ref();
        let value_schema = Schema::struct_of([
            ("op", Schema::string().into_ref()),
            ("ts_ms", Schema::int64().optional().into_ref()),
            ("source", source_schema.clone()),
            ("transaction", super::transaction::block_schema()),
            ("message", block_schema.clone()),
        ])
        .named("io.debezium.connector.postgresql.MessageValue")
        .with_version(1)
        .into_ref();
        Self {
            topic: format!("{topic_prefix}.message"),
            server: topic_prefix.to_owned(),
            db: db.to_owned(),
            binary,
            key_schema,
            block_schema,
            value_schema,
        }
    }

    /// The record of one message (its `transaction` block is set later, when counted).
    pub fn record(
        &self,
        prefix: &str,
        content: &[u8],
        info: &SourceInfo,
        source_schema: &SchemaRef,
        partition: &SourcePartition,
        offset: SourceOffset,
    ) -> SourceRecord {
        let content = match self.binary {
            BinaryMode::Bytes => Value::Bytes(content.to_vec()),
            mode => super::mapping::binary_text(content, mode),
        };
        let block = Struct::from_values(self.block_schema.clone(), vec![Value::String(prefix.to_owned()), content]);
        let source = source_block(info, source_schema, &self.server, &self.db, "", "");
        let value = Struct::from_values(
            self.value_schema.clone(),
            vec![Value::String("m".into()), Value::Int64(now_ms()), source, Value::Null, Value::Struct(block)],
        );
        SourceRecord {
            source_partition: partition.clone(),
            source_offset: offset,
            topic: self.topic.clone(),
            key: Value::Struct(Struct::from_values(self.key_schema.clone(), vec![Value::String(prefix.to_owned())])),
            key_schema: Some(self.key_schema.clone()),
            value: Value::Struct(value),
            value_schema: Some(self.value_schema.clone()),
            ..SourceRecord::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_chosen_by_whole_case_insensitive_patterns() {
        let all = PrefixFilter::new(&[], &[]).unwrap();
        assert!(all.includes("anything"));
        let inc = PrefixFilter::new(&["audit.*".into(), "pfx".into()], &[]).unwrap();
        assert!(inc.includes("audit.login") && inc.includes("PFX") && !inc.includes("pfx2") && !inc.includes("xaudit"));
        let exc = PrefixFilter::new(&[], &["noise".into()]).unwrap();
        assert!(!exc.includes("noise") && exc.includes("noise2"));
        let both = PrefixFilter::new(&["a".into()], &["b".into()]).unwrap_err().to_string();
        assert!(both.contains(MESSAGE_PREFIX_EXCLUDE_LIST), "{both}");
        let bad = PrefixFilter::new(&["(".into()], &[]).unwrap_err().to_string();
        assert!(bad.contains(MESSAGE_PREFIX_INCLUDE_LIST), "{bad}");
    }

    #[test]
    fn a_message_is_debeziums_key_and_value() {
        let source_schema = super::super::envelope::source_schema();
        let topic = MessageTopic::new("golden", "postgres", BinaryMode::Hex, &source_schema);
        let info = SourceInfo { ts_ms: 5, snapshot: "false", tx_id: None, lsn: Some(9), sequence: Some(r#"["9","9"]"#.into()) };
        let r = topic.record("pfx", b"hello", &info, &source_schema, &SourcePartition::new(), SourceOffset::new());
        assert_eq!(r.topic, "golden.message");
        let key = r.key.as_struct().unwrap();
        assert_eq!(key.get("prefix"), Some(&Value::String("pfx".into())));
        let value = r.value.as_struct().unwrap();
        assert_eq!(value.get("op"), Some(&Value::String("m".into())));
        let message = value.get("message").and_then(Value::as_struct).unwrap();
        assert_eq!(message.get("content"), Some(&Value::String("68656c6c6f".into())));
        let source = value.get("source").and_then(Value::as_struct).unwrap();
        assert_eq!(source.get("table"), Some(&Value::String(String::new())));
        assert_eq!(source.get("txId"), Some(&Value::Null));
        assert_eq!(source.get("lsn"), Some(&Value::Int64(9)));
    }
}
