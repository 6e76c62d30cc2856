//! Consumer group offsets, stored in the compacted topic `__consumer_offsets` of the same
//! log and replayed into memory at open.
//!
//! Key: `{"group":"g","topic":"t","partition":0}`, value: `{"offset":42}` (the next
//! offset to read), a null value forgets the entry. Commits are serialised so that the
//! in-memory map follows the log order, and the map changes only once the records are
//! durable.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sluice_api::TopicPartition;

use super::super::{LogError, LogRecord, LogResult, Produce, StoredRecord};
use super::lock;
use super::partition::Partition;

pub(super) const GROUPS_TOPIC: &str = "__consumer_offsets";

#[derive(Serialize, Deserialize)]
struct GroupKey {
    group: String,
    topic: String,
    partition: i32,
}

#[derive(Serialize, Deserialize)]
struct GroupValue {
    offset: i64,
}

type GroupMap = BTreeMap<String, BTreeMap<TopicPartition, i64>>;

#[derive(Default)]
pub(super) struct Groups {
    /// Held across append + apply so the map follows the log order.
    pub commit: tokio::sync::Mutex<()>,
    offsets: Mutex<GroupMap>,
}

fn encode_err(e: serde_json::Error) -> LogError {
    LogError::Invalid(format!("cannot encode a group offset: {e}"))
}

impl Groups {
    /// Records that store `offsets` for `group` (`None`: forget the partition).
    pub(super) fn records(group: &str, offsets: &BTreeMap<TopicPartition, Option<i64>>, timestamp: i64) -> LogResult<Vec<Produce>> {
        offsets
            .iter()
            .map(|(tp, offset)| {
                let key = GroupKey { group: group.to_owned(), topic: tp.topic.clone(), partition: tp.partition };
                let value = offset.map(|offset| serde_json::to_vec(&GroupValue { offset })).transpose().map_err(encode_err)?;
                Ok(Produce {
                    topic: GROUPS_TOPIC.to_owned(),
                    partition: 0,
                    record: LogRecord { key: Some(serde_json::to_vec(&key).map_err(encode_err)?), value, timestamp, headers: Vec::new() },
                })
            })
            .collect()
    }

    /// Applies durable changes of one group.
    pub(super) fn apply(&self, group: &str, offsets: &BTreeMap<TopicPartition, Option<i64>>) {
        let mut map = lock(&self.offsets);
        let entry = map.entry(group.to_owned()).or_default();
        for (tp, offset) in offsets {
            match offset {
                Some(o) => entry.insert(tp.clone(), *o),
                None => entry.remove(tp),
            };
        }
        if entry.is_empty() {
            map.remove(group);
        }
    }

    pub(super) fn get(&self, group: &str) -> BTreeMap<TopicPartition, i64> {
        lock(&self.offsets).get(group).cloned().unwrap_or_default()
    }

    /// Replays the whole topic.
    pub(super) fn replay(&self, partition: &Partition) -> LogResult<()> {
        let mut map = GroupMap::new();
        let mut offset = partition.start();
        let end = partition.end();
        while offset < end {
            let records = partition.read(offset, 1 << 20)?;
            let Some(last) = records.last() else { break };
            offset = last.offset + 1;
            for StoredRecord { offset, record } in records {
                let Some(key) = record.key.as_deref().and_then(|k| serde_json::from_slice::<GroupKey>(k).ok()) else {
                    tracing::warn!(offset, "ignoring a record without a valid group key in {GROUPS_TOPIC}");
                    continue;
                };
                let tp = TopicPartition::new(key.topic, key.partition);
                match record.value.as_deref().map(serde_json::from_slice::<GroupValue>) {
                    None => {
                        if let Some(g) = map.get_mut(&key.group) {
                            g.remove(&tp);
                            if g.is_empty() {
                                map.remove(&key.group);
                            }
                        }
                    }
                    Some(Ok(v)) => {
                        map.entry(key.group).or_default().insert(tp, v.offset);
                    }
                    Some(Err(e)) => tracing::warn!(offset, error = %e, "ignoring an invalid group offset in {GROUPS_TOPIC}"),
                }
            }
        }
        *lock(&self.offsets) = map;
        Ok(())
    }
}
