//! `provide.transaction.metadata`: BEGIN and END records of each streamed transaction on
//! `<topic.prefix>.<topic.transaction>` (default `<prefix>.transaction`), and the
//! `transaction` block (`event.block`: `id`, `total_order`, `data_collection_order`) of
//! every change event in it, in Debezium's schemas.
//!
//! Ids are Debezium's for Postgres, `<txId>:<lsn>` with the LSN of the record at hand: a
//! change's own LSN, the commit's end LSN for END. BEGIN is written just before the first
//! change of the transaction and carries that change's LSN (Debezium uses the position of
//! the BEGIN message, the transaction's first WAL record: the same LSN unless the
//! transaction wrote WAL before its first captured change). Every transaction Postgres
//! sends gets BEGIN and END, also one whose changes are all filtered out, as in Debezium.
//!
//! Offsets and restarts (see `offset.rs`): BEGIN has the offset of a change with
//! `txn_seq = 0` (a restart resends the transaction without a second BEGIN); END has an
//! offset whose resume position is the commit's end (a restart does not resend the
//! transaction). Inside a resent transaction the changes already durable are skipped but
//! still counted, so `total_order`, `data_collection_order` and END's counts are those of
//! the whole transaction.

use pgwire_replication::Lsn;
use sluice_api::{Schema, SchemaRef, SourceOffset, SourcePartition, SourceRecord, Struct, Value};

pub const KEY_SCHEMA_NAME: &str = "io.debezium.connector.common.TransactionMetadataKey";
pub const VALUE_SCHEMA_NAME: &str = "io.debezium.connector.common.TransactionMetadataValue";
pub const BLOCK_SCHEMA_NAME: &str = "event.block";
const COLLECTION_SCHEMA_NAME: &str = "event.collection";

/// The `transaction` field of every envelope (null unless metadata is provided).
pub fn block_schema() -> SchemaRef {
    Schema::struct_of([
        ("id", Schema::string().into_ref()),
        ("total_order", Schema::int64().into_ref()),
        ("data_collection_order", Schema::int64().into_ref()),
    ])
    .named(BLOCK_SCHEMA_NAME)
    .with_version(1)
    .optional()
    .into_ref()
}

/// Where BEGIN/END records go and their schemas.
#[derive(Debug, Clone)]
pub struct TransactionTopic {
    pub topic: String,
    key_schema: SchemaRef,
    value_schema: SchemaRef,
    collection_schema: SchemaRef,
    block_schema: SchemaRef,
}

impl TransactionTopic {
    /// `topic`: the transaction topic's full name.
    pub fn new(topic: String) -> Self {
        let collection_schema =
            Schema::struct_of([("data_collection", Schema::string().into_ref()), ("event_count", Schema::int64().into_ref())])
                .named(COLLECTION_SCHEMA_NAME)
                .with_version(1)
                .into_ref();
        Self {
            topic,
            key_schema: Schema::struct_of([("id", Schema::string().into_ref())]).named(KEY_SCHEMA_NAME).with_version(1).into_ref(),
            value_schema: Schema::struct_of([
                ("status", Schema::string().into_ref()),
                ("id", Schema::string().into_ref()),
                ("event_count", Schema::int64().optional().into_ref()),
                ("data_collections", Schema::array(collection_schema.clone()).optional().into_ref()),
                ("ts_ms", Schema::int64().into_ref()),
            ])
            .named(VALUE_SCHEMA_NAME)
            .with_version(1)
            .into_ref(),
            collection_schema,
            block_schema: block_schema(),
        }
    }

    fn record(&self, partition: &SourcePartition, offset: SourceOffset, id: String, value: Vec<Value>) -> SourceRecord {
        SourceRecord {
            source_partition: partition.clone(),
            source_offset: offset,
            topic: self.topic.clone(),
            key: Value::Struct(Struct::from_values(self.key_schema.clone(), vec![Value::String(id)])),
            key_schema: Some(self.key_schema.clone()),
            value: Value::Struct(Struct::from_values(self.value_schema.clone(), value)),
            value_schema: Some(self.value_schema.clone()),
            ..SourceRecord::default()
        }
    }

    pub fn begin(&self, tx: &TxCounts, lsn: Lsn, partition: &SourcePartition, offset: SourceOffset) -> SourceRecord {
        let id = tx.id(lsn);
        let value = vec![Value::String("BEGIN".into()), Value::String(id.clone()), Value::Null, Value::Null, Value::Int64(tx.ts_ms)];
        self.record(partition, offset, id, value)
    }

    pub fn end(&self, tx: &TxCounts, end_lsn: Lsn, partition: &SourcePartition, offset: SourceOffset) -> SourceRecord {
        let id = tx.id(end_lsn);
        let collections = tx
            .per_collection
            .iter()
            .map(|(name, n)| {
                Value::Struct(Struct::from_values(
                    self.collection_schema.clone(),
                    vec![Value::String(name.clone()), Value::Int64(*n as i64)],
                ))
            })
            .collect();
        let value = vec![
            Value::String("END".into()),
            Value::String(id.clone()),
            Value::Int64(tx.total as i64),
            Value::Array(collections),
            Value::Int64(tx.ts_ms),
        ];
        self.record(partition, offset, id, value)
    }

    /// Counts `event` (a change envelope of `collection`, `schema.table`, at `lsn`) and
    /// sets its `transaction` block.
    pub fn event(&self, tx: &mut TxCounts, collection: &str, lsn: Lsn, event: &mut SourceRecord) {
        tx.total += 1;
        let order = match tx.per_collection.iter_mut().find(|(name, _)| name == collection) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                tx.per_collection.push((collection.to_owned(), 1));
                1
            }
        };
        let block = Struct::from_values(
            self.block_schema.clone(),
            vec![Value::String(tx.id(lsn)), Value::Int64(tx.total as i64), Value::Int64(order as i64)],
        );
        if let Value::Struct(envelope) = &mut event.value {
            envelope.put("transaction", Value::Struct(block));
        }
    }
}

/// What one transaction has produced so far.
#[derive(Debug, Clone, Default)]
pub struct TxCounts {
    pub xid: u32,
    /// Commit time.
    pub ts_ms: i64,
    /// Whether BEGIN is still to be written (false once written, or when it was durable
    /// before a restart).
    pub begin_pending: bool,
    pub total: u64,
    /// Events per `schema.table`, in order of first appearance.
    pub per_collection: Vec<(String, u64)>,
}

impl TxCounts {
    pub fn new(xid: u32, ts_ms: i64, begin_pending: bool) -> Self {
        Self { xid, ts_ms, begin_pending, ..Self::default() }
    }

    fn id(&self, lsn: Lsn) -> String {
        format!("{}:{}", self.xid, lsn.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope() -> SourceRecord {
        let schema = Schema::struct_of([("op", Schema::string().into_ref()), ("transaction", block_schema())]).into_ref();
        SourceRecord {
            value: Value::Struct(Struct::from_values(schema, vec![Value::String("c".into()), Value::Null])),
            ..SourceRecord::default()
        }
    }

    #[test]
    fn begin_events_and_end_follow_debeziums_schemas() {
        let t = TransactionTopic::new("srv.transaction".to_owned());
        assert_eq!(t.topic, "srv.transaction");
        let p = SourcePartition::new();
        let mut tx = TxCounts::new(571, 1_486_500_577_125, true);
        let begin = t.begin(&tx, Lsn(53_195_829), &p, SourceOffset::new());
        assert_eq!(begin.key_schema.as_ref().unwrap().name.as_deref(), Some(KEY_SCHEMA_NAME));
        let v = begin.value.as_struct().unwrap();
        assert_eq!(v.schema().name.as_deref(), Some(VALUE_SCHEMA_NAME));
        assert_eq!(v.get("status"), Some(&Value::String("BEGIN".into())));
        assert_eq!(v.get("id"), Some(&Value::String("571:53195829".into())));
        assert_eq!((v.get("event_count"), v.get("data_collections")), (Some(&Value::Null), Some(&Value::Null)));
        assert_eq!(begin.key.as_struct().unwrap().get("id"), Some(&Value::String("571:53195829".into())));

        let mut events: Vec<SourceRecord> = (0..3).map(|_| envelope()).collect();
        t.event(&mut tx, "s1.a", Lsn(100), &mut events[0]);
        t.event(&mut tx, "s2.a", Lsn(101), &mut events[1]);
        t.event(&mut tx, "s1.a", Lsn(102), &mut events[2]);
        let block = |r: &SourceRecord| r.value.as_struct().unwrap().get("transaction").unwrap().as_struct().unwrap().clone();
        let b = block(&events[2]);
        assert_eq!(b.schema().name.as_deref(), Some(BLOCK_SCHEMA_NAME));
        assert_eq!(b.get("id"), Some(&Value::String("571:102".into())));
        assert_eq!((b.get("total_order"), b.get("data_collection_order")), (Some(&Value::Int64(3)), Some(&Value::Int64(2))));
        assert_eq!(block(&events[1]).get("data_collection_order"), Some(&Value::Int64(1)));

        let end = t.end(&tx, Lsn(53_195_832), &p, SourceOffset::new());
        let v = end.value.as_struct().unwrap();
        assert_eq!(v.get("status"), Some(&Value::String("END".into())));
        assert_eq!(v.get("id"), Some(&Value::String("571:53195832".into())));
        assert_eq!(v.get("event_count"), Some(&Value::Int64(3)));
        assert_eq!(v.get("ts_ms"), Some(&Value::Int64(1_486_500_577_125)));
        let Some(Value::Array(cols)) = v.get("data_collections") else { panic!("no data_collections") };
        let cols: Vec<_> = cols
            .iter()
            .map(|c| (c.as_struct().unwrap().get("data_collection").cloned(), c.as_struct().unwrap().get("event_count").cloned()))
            .collect();
        assert_eq!(cols, [(Some("s1.a".into()), Some(Value::Int64(2))), (Some("s2.a".into()), Some(Value::Int64(1)))]);
    }
}
