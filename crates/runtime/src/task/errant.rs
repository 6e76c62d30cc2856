//! The errant-record reporter handed to sink tasks (Connect's `ErrantRecordReporter`).
//!
//! ```text
//! SinkRunner: fetched batch ─▶ reporter.current ─▶ SinkTask::put(records)
//!                                                    │ a record cannot be written
//!                                                    ▼
//!             reporter.report(record, error) ─▶ ErrorPolicy::handle
//!                 not tolerated ─▶ Err (put returns it; the task fails with the position)
//!                 tolerated     ─▶ logged; dead letter appended to the log (durable) ─▶ Ok
//! ```
//! `report` returns only once the dead-letter record is durable, so a sink that skips the
//! record and then commits its offset (in its destination or through `pre_commit`) never
//! moves past a record that is neither written nor dead-lettered.
//!
//! The records of the last [`RECENT_PUTS`] `put`s are kept: a sink may still be writing them
//! when later `put`s come and report one of them then. The JDBC sink writes up to two puts
//! in the background; when one of those writes fails, it writes their records again in the
//! next call, so a report may name a record from three puts back. A record older than that
//! is dead-lettered without its original key and value (with a warning).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sluice_api::{ConnectError, ConnectResult, ErrantRecordReporter, SinkRecord, TopicPartition};

use super::errors::{ErrorPolicy, FailedRecord};
use super::Stage;
use crate::herder::ConnectorTaskId;
use crate::log::{Log, StoredRecord};

/// The records of the `put` under way, as read from the log.
pub type Fetched = Arc<Vec<(TopicPartition, StoredRecord)>>;

/// How many `put`s' records (the one under way included) a report can name.
pub const RECENT_PUTS: usize = 4;

pub struct SinkErrantReporter {
    id: ConnectorTaskId,
    /// The task's class, as `__connect.errors.class.name`.
    class: String,
    errors: ErrorPolicy,
    log: Arc<dyn Log>,
    /// The records of the `put` under way, then of those before it.
    fetched: Mutex<VecDeque<Fetched>>,
}

impl SinkErrantReporter {
    pub fn new(id: ConnectorTaskId, class: String, errors: ErrorPolicy, log: Arc<dyn Log>) -> Self {
        Self { id, class, errors, log, fetched: Mutex::new(VecDeque::new()) }
    }

    /// The records about to be put: reports name their original bytes. They go first, and
    /// the oldest beyond [`RECENT_PUTS`] are forgotten, unless these are the same batch.
    pub fn set_current(&self, fetched: Fetched) {
        let mut recent = self.fetched.lock().expect("reporter lock");
        if !recent.front().is_some_and(|current| Arc::ptr_eq(current, &fetched)) {
            recent.push_front(fetched);
            recent.truncate(RECENT_PUTS);
        }
    }

    /// The stored record `record` was converted from, in the current records, else in
    /// earlier ones, newest first: same topic, partition and offset; or, when a transform
    /// renamed the topic, the only one with that partition and offset.
    fn original(&self, record: &SinkRecord) -> Option<(TopicPartition, StoredRecord)> {
        let batches: Vec<Fetched> = self.fetched.lock().expect("reporter lock").iter().cloned().collect();
        let exact = batches.iter().find_map(|batch| {
            batch.iter().find(|(tp, r)| r.offset == record.offset && tp.partition == record.partition && tp.topic == record.topic)
        });
        if let Some(found) = exact {
            return Some(found.clone());
        }
        batches.iter().find_map(|batch| {
            let mut same_place = batch.iter().filter(|(tp, r)| r.offset == record.offset && tp.partition == record.partition);
            match (same_place.next(), same_place.next()) {
                (Some(only), None) => Some(only.clone()),
                _ => None,
            }
        })
    }
}

#[async_trait]
impl ErrantRecordReporter for SinkErrantReporter {
    async fn report(&self, record: &SinkRecord, error: ConnectError) -> ConnectResult<()> {
        let original = self.original(record);
        if original.is_none() {
            tracing::warn!(task = ?self.id, topic = %record.topic, partition = record.partition, offset = record.offset,
                "the reported record is not among the last puts' records: its dead letter carries no original key and value");
        }
        let (topic, partition, offset) = match &original {
            Some((tp, r)) => (tp.topic.clone(), tp.partition, r.offset),
            None => (record.topic.clone(), record.partition, record.offset),
        };
        let stored = original.map(|(_, r)| r.record);
        let failed = FailedRecord {
            connector: self.id.connector.clone(),
            task: self.id.task,
            stage: Stage::Task,
            class: self.class.clone(),
            position: format!("topic {topic} partition {partition} offset {offset}"),
            original: Some((topic, partition, offset)),
            key: stored.as_ref().and_then(|r| r.key.clone()),
            value: stored.as_ref().and_then(|r| r.value.clone()),
            headers: stored.as_ref().map(|r| r.headers.clone()).unwrap_or_default(),
            describe: format!("key {:?} value {:?}", record.key, record.value),
        };
        if let Some(dead) = self.errors.handle(failed, error)? {
            self.log.append(vec![dead]).await.map_err(|e| Stage::Producer.fail("a dead-letter record".to_owned(), e.into()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
    use crate::log::LogRecord;

    /// A put of the one record at `offset`, its value `v<offset>`.
    fn put(offset: i64) -> Fetched {
        let record = LogRecord { value: Some(format!("v{offset}").into_bytes()), ..LogRecord::default() };
        Arc::new(vec![(TopicPartition::new("t", 0), StoredRecord { offset, record })])
    }

    #[tokio::test]
    async fn reports_name_the_records_of_the_last_puts() {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedLog::open(dir.path(), EmbeddedOptions::default()).unwrap();
        let id = ConnectorTaskId { connector: "c".into(), task: 0 };
        let reporter = SinkErrantReporter::new(id, "x".into(), ErrorPolicy::default(), Arc::new(log));
        for offset in 0..6 {
            reporter.set_current(put(offset));
        }
        // The same put again (a redelivery) pushes no other out.
        let current = reporter.fetched.lock().unwrap().front().cloned().unwrap();
        reporter.set_current(current);
        let value = |offset| {
            let record = SinkRecord { topic: "t".into(), partition: 0, offset, ..SinkRecord::default() };
            reporter.original(&record).and_then(|(_, stored)| stored.record.value)
        };
        for offset in 6 - RECENT_PUTS as i64..6 {
            assert_eq!(value(offset), Some(format!("v{offset}").into_bytes()), "offset {offset}");
        }
        assert_eq!(value(5 - RECENT_PUTS as i64), None, "older than the last puts");
    }
}
