//! The record every transform and predicate sees, for both the source and the sink path.
//!
//! Connect's transforms are generic over `ConnectRecord`; here one concrete type carries the
//! fields a transform may read or replace (topic, partition, key, value, timestamp, headers)
//! and keeps what it may not touch (the source partition and offset, or the sink record's
//! Kafka offset) in [`RecordOrigin`], so a record converts back without loss.

use sluice_api::{Headers, SchemaRef, SinkRecord, SourceOffset, SourcePartition, SourceRecord, TimestampType, Value};

/// Where a record came from; transforms never change it.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordOrigin {
    /// Produced by a source task: the position the runtime commits once the record is acked.
    Source { partition: SourcePartition, offset: SourceOffset },
    /// Read from the log for a sink task.
    Sink { partition: i32, offset: i64, timestamp_type: TimestampType },
}

/// A record on its way through a transformation chain.
#[derive(Debug, Clone, PartialEq)]
pub struct TransformRecord {
    pub topic: String,
    /// Target partition; `None` lets the runtime choose.
    pub partition: Option<i32>,
    pub key_schema: Option<SchemaRef>,
    pub key: Value,
    pub value_schema: Option<SchemaRef>,
    /// `Value::Null` is a tombstone.
    pub value: Value,
    /// Milliseconds since the Unix epoch.
    pub timestamp: Option<i64>,
    pub headers: Headers,
    pub origin: RecordOrigin,
}

impl TransformRecord {
    /// The Kafka offset of a record read for a sink task (`None` on the source path).
    pub fn kafka_offset(&self) -> Option<i64> {
        match self.origin {
            RecordOrigin::Sink { offset, .. } => Some(offset),
            RecordOrigin::Source { .. } => None,
        }
    }

    pub fn is_tombstone(&self) -> bool {
        self.value.is_null()
    }

    /// Back to a source record. A record that came from the sink path gets an empty source
    /// partition and offset.
    pub fn into_source_record(self) -> SourceRecord {
        let (source_partition, source_offset) = match self.origin {
            RecordOrigin::Source { partition, offset } => (partition, offset),
            RecordOrigin::Sink { .. } => (SourcePartition::new(), SourceOffset::new()),
        };
        SourceRecord {
            source_partition,
            source_offset,
            topic: self.topic,
            partition: self.partition,
            key_schema: self.key_schema,
            key: self.key,
            value_schema: self.value_schema,
            value: self.value,
            timestamp: self.timestamp,
            headers: self.headers,
        }
    }

    /// Back to a sink record. The partition is the one a transform set, else the original.
    pub fn into_sink_record(self) -> SinkRecord {
        let (orig_partition, offset, timestamp_type) = match self.origin {
            RecordOrigin::Sink { partition, offset, timestamp_type } => (partition, offset, timestamp_type),
            RecordOrigin::Source { .. } => (0, -1, TimestampType::NoTimestampType),
        };
        SinkRecord {
            topic: self.topic,
            partition: self.partition.unwrap_or(orig_partition),
            offset,
            key_schema: self.key_schema,
            key: self.key,
            value_schema: self.value_schema,
            value: self.value,
            timestamp: self.timestamp,
            timestamp_type,
            headers: self.headers,
        }
    }
}

impl From<SourceRecord> for TransformRecord {
    fn from(r: SourceRecord) -> Self {
        Self {
            topic: r.topic,
            partition: r.partition,
            key_schema: r.key_schema,
            key: r.key,
            value_schema: r.value_schema,
            value: r.value,
            timestamp: r.timestamp,
            headers: r.headers,
            origin: RecordOrigin::Source { partition: r.source_partition, offset: r.source_offset },
        }
    }
}

impl From<SinkRecord> for TransformRecord {
    fn from(r: SinkRecord) -> Self {
        Self {
            topic: r.topic,
            partition: Some(r.partition),
            key_schema: r.key_schema,
            key: r.key,
            value_schema: r.value_schema,
            value: r.value,
            timestamp: r.timestamp,
            headers: r.headers,
            origin: RecordOrigin::Sink { partition: r.partition, offset: r.offset, timestamp_type: r.timestamp_type },
        }
    }
}

/// Which half of a record a `$Key` or `$Value` transform works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Key,
    Value,
}

impl Side {
    pub fn schema(self, r: &TransformRecord) -> Option<&SchemaRef> {
        match self {
            Side::Key => r.key_schema.as_ref(),
            Side::Value => r.value_schema.as_ref(),
        }
    }

    pub fn value(self, r: &TransformRecord) -> &Value {
        match self {
            Side::Key => &r.key,
            Side::Value => &r.value,
        }
    }

    /// Takes the schema and value out, leaving `None` and `Null` behind.
    pub fn take(self, r: &mut TransformRecord) -> (Option<SchemaRef>, Value) {
        match self {
            Side::Key => (r.key_schema.take(), std::mem::take(&mut r.key)),
            Side::Value => (r.value_schema.take(), std::mem::take(&mut r.value)),
        }
    }

    pub fn set(self, r: &mut TransformRecord, schema: Option<SchemaRef>, value: Value) {
        match self {
            Side::Key => {
                r.key_schema = schema;
                r.key = value;
            }
            Side::Value => {
                r.value_schema = schema;
                r.value = value;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_and_sink_records_round_trip() {
        let mut partition = SourcePartition::new();
        partition.insert("file".into(), "a".into());
        let src = SourceRecord { source_partition: partition, topic: "t".into(), value: Value::Int32(1), ..Default::default() };
        let back = TransformRecord::from(src.clone()).into_source_record();
        assert_eq!(back, src);

        let sink =
            SinkRecord { topic: "t".into(), partition: 3, offset: 42, timestamp_type: TimestampType::CreateTime, ..Default::default() };
        let rec = TransformRecord::from(sink.clone());
        assert_eq!(rec.kafka_offset(), Some(42));
        assert_eq!(rec.into_sink_record(), sink);
    }
}
