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
//! The records of the previous `put` are kept too: a sink may still be writing them when the
//! next `put` comes (the JDBC sink writes a put's last batch in the background) and report
//! one of them then.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sluice_api::{ConnectError, ConnectResult, ErrantRecordReporter, SinkRecord, TopicPartition};

use super::errors::{ErrorPolicy, FailedRecord};
use super::Stage;
use crate::herder::ConnectorTaskId;
use crate::log::{Log, StoredRecord};

/// The records of the `put` under way, as read from the log.
pub type Fetched = Arc<Vec<(TopicPartition, StoredRecord)>>;

pub struct SinkErrantReporter {
    id: ConnectorTaskId,
    /// The task's class, as `__connect.errors.class.name`.
    class: String,
    errors: ErrorPolicy,
    log: Arc<dyn Log>,
    /// The records of the `put` under way, and of the one before.
    fetched: Mutex<(Fetched, Fetched)>,
}

impl SinkErrantReporter {
    pub fn new(id: ConnectorTaskId, class: String, errors: ErrorPolicy, log: Arc<dyn Log>) -> Self {
        Self { id, class, errors, log, fetched: Mutex::new((Arc::default(), Arc::default())) }
    }

    /// The records about to be put: reports name their original bytes.
    /// The current records become the previous ones, unless these are the same batch.
    pub fn set_current(&self, fetched: Fetched) {
        let mut both = self.fetched.lock().expect("reporter lock");
        if !Arc::ptr_eq(&both.0, &fetched) {
            both.1 = std::mem::replace(&mut both.0, fetched);
        }
    }

    /// The stored record `record` was converted from, in the current records, else in the
    /// previous ones: same topic, partition and offset; or, when a transform renamed the
    /// topic, the only one with that partition and offset.
    fn original(&self, record: &SinkRecord) -> Option<(TopicPartition, StoredRecord)> {
        let (current, previous) = self.fetched.lock().expect("reporter lock").clone();
        let batches = [current, previous];
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
