//! Source and sink records, headers, and the positions that identify them.

use std::fmt;

use crate::schema::SchemaRef;
use crate::value::Value;

/// Where a source record came from (e.g. `{"filename": "/tmp/in.txt"}`), as Connect's
/// `Map<String, ?>`. Serialised with JsonConverter (schemas off) into the offsets topic.
pub type SourcePartition = serde_json::Map<String, serde_json::Value>;
/// How far a source partition has been read (e.g. `{"position": 1042}`).
pub type SourceOffset = serde_json::Map<String, serde_json::Value>;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self { topic: topic.into(), partition }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub key: String,
    pub schema: Option<SchemaRef>,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Headers(pub Vec<Header>);

impl Headers {
    pub fn add(&mut self, key: impl Into<String>, schema: Option<SchemaRef>, value: Value) {
        self.0.push(Header { key: key.into(), schema, value });
    }

    /// The last header with this key, as Connect's `lastWithName`.
    pub fn last(&self, key: &str) -> Option<&Header> {
        self.0.iter().rev().find(|h| h.key == key)
    }

    pub fn remove(&mut self, key: &str) {
        self.0.retain(|h| h.key != key);
    }

    pub fn iter(&self) -> impl Iterator<Item = &Header> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A record produced by a source task.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SourceRecord {
    /// Where the record came from. An empty partition means the record has no position of
    /// its own (Connect's null `sourcePartition`): it is never committed as an offset, and
    /// the next record with a position covers it, so a task must end every batch with a
    /// positioned record for its progress to move.
    pub source_partition: SourcePartition,
    pub source_offset: SourceOffset,
    pub topic: String,
    /// Target partition; `None` lets the runtime choose (by key hash, else round robin).
    pub partition: Option<i32>,
    pub key_schema: Option<SchemaRef>,
    pub key: Value,
    pub value_schema: Option<SchemaRef>,
    pub value: Value,
    /// Milliseconds since the Unix epoch; `None` takes the append time.
    pub timestamp: Option<i64>,
    pub headers: Headers,
}

impl SourceRecord {
    /// A record that writes nothing and only moves its source partition's offset (as Kafka
    /// Connect's `SourceTask::updateOffsets` does): the runtime stores `offset` once every
    /// record polled before it is durable. Transforms and converters never see it.
    pub fn offset_only(source_partition: SourcePartition, source_offset: SourceOffset) -> Self {
        Self { source_partition, source_offset, ..Self::default() }
    }

    /// Whether this record only moves an offset (an empty topic: no topic has that name).
    pub fn is_offset_only(&self) -> bool {
        self.topic.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    NoTimestampType,
    CreateTime,
    LogAppendTime,
}

/// A record delivered to a sink task.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SinkRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key_schema: Option<SchemaRef>,
    pub key: Value,
    pub value_schema: Option<SchemaRef>,
    pub value: Value,
    pub timestamp: Option<i64>,
    pub timestamp_type: TimestampType,
    pub headers: Headers,
}

impl SinkRecord {
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }
}
