//! Source offsets in the offsets topic, keyed `["NAME",{partition}]` as Connect keys them
//! and spread over the topic's partitions by Kafka's key hash.
//!
//! [`OffsetStore::write`] returns only once the records are durable; only then does the
//! in-memory view (what tasks read on start) change. That is the one place where a source
//! offset moves forward.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use serde_json::{json, Value as Json};
use sluice_api::{SourceOffset, SourcePartition, TopicPartition};

use crate::log::{Log, LogResult, TopicConfig};
use crate::partitioner::partition_for_key;

type Entries = HashMap<String, BTreeMap<String, (SourcePartition, SourceOffset)>>;

pub struct OffsetStore {
    log: Arc<dyn Log>,
    topic: String,
    partitions: i32,
    /// connector → canonical partition → (partition, offset)
    data: RwLock<Entries>,
}

async fn read_entries(log: &dyn Log, topic: &str, count: i32) -> LogResult<Entries> {
    let mut data: Entries = HashMap::new();
    for p in 0..count {
        for r in super::read_all(log, &TopicPartition::new(topic, p)).await? {
            let Some(key) = r.record.key.as_deref().and_then(|k| serde_json::from_slice::<Json>(k).ok()) else { continue };
            let Some((name, partition)) = parse_key(&key) else { continue };
            let entry = data.entry(name).or_default();
            match r.record.value.as_deref().and_then(|v| serde_json::from_slice::<Json>(v).ok()) {
                Some(Json::Object(offset)) => {
                    entry.insert(canonical(&partition), (partition, offset));
                }
                _ => {
                    entry.remove(&canonical(&partition));
                }
            }
        }
    }
    Ok(data)
}

/// A partition's identity regardless of key order (Connect compares them as maps).
pub fn canonical(partition: &SourcePartition) -> String {
    fn sort(v: &Json) -> Json {
        match v {
            Json::Object(m) => {
                let sorted: BTreeMap<_, _> = m.iter().map(|(k, v)| (k.clone(), sort(v))).collect();
                Json::Object(sorted.into_iter().collect())
            }
            Json::Array(a) => Json::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(&Json::Object(partition.clone())).to_string()
}

impl OffsetStore {
    pub async fn open(log: Arc<dyn Log>, topic: &str, partitions: i32, replication: i32) -> LogResult<Self> {
        log.ensure_topic(topic, TopicConfig::compacted(partitions).replicated(replication)).await?;
        let count = log.partition_count(topic).await?;
        let data = read_entries(log.as_ref(), topic, count).await?;
        Ok(Self { log, topic: topic.to_owned(), partitions: count, data: RwLock::new(data) })
    }

    /// Reads the whole topic again, taking in what other workers of a group committed.
    /// Call only while no task of this worker writes offsets (between a revoke and the
    /// start of the next assignment).
    pub async fn reload(&self) -> LogResult<()> {
        let data = read_entries(self.log.as_ref(), &self.topic, self.partitions).await?;
        *self.data.write().expect("offsets lock") = data;
        Ok(())
    }

    pub fn get(&self, connector: &str, partition: &SourcePartition) -> Option<SourceOffset> {
        let data = self.data.read().expect("offsets lock");
        data.get(connector)?.get(&canonical(partition)).map(|(_, o)| o.clone())
    }

    pub fn list(&self, connector: &str) -> Vec<(SourcePartition, SourceOffset)> {
        let data = self.data.read().expect("offsets lock");
        data.get(connector).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// Durably writes offsets (`None` removes one), then makes them visible.
    pub async fn write(&self, connector: &str, entries: &[(SourcePartition, Option<SourceOffset>)]) -> LogResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.log.append(self.records(connector, entries)).await?;
        self.apply(connector, entries);
        Ok(())
    }

    /// The offsets-topic records of `entries`, for a writer that commits them with other
    /// records in one transaction; once that commits, [`OffsetStore::apply`] them.
    pub fn records(&self, connector: &str, entries: &[(SourcePartition, Option<SourceOffset>)]) -> Vec<crate::log::Produce> {
        entries
            .iter()
            .map(|(partition, offset)| {
                let key = json!([connector, partition]).to_string();
                let p = partition_for_key(key.as_bytes(), self.partitions);
                let value = offset.as_ref().map(|o| Json::Object(o.clone()));
                super::produce(&self.topic, p, &key, value.as_ref())
            })
            .collect()
    }

    /// Makes offsets that are durable in the topic visible.
    pub fn apply(&self, connector: &str, entries: &[(SourcePartition, Option<SourceOffset>)]) {
        let mut data = self.data.write().expect("offsets lock");
        let entry = data.entry(connector.to_owned()).or_default();
        for (partition, offset) in entries {
            match offset {
                Some(o) => entry.insert(canonical(partition), (partition.clone(), o.clone())),
                None => entry.remove(&canonical(partition)),
            };
        }
    }

    /// Reads the topic to its end again and takes in what it holds for one connector (an
    /// exactly-once task does so after fencing older instances of itself, whose last
    /// commits may be newer than what this worker has read).
    pub async fn reload_connector(&self, connector: &str) -> LogResult<()> {
        let mut fresh = read_entries(self.log.as_ref(), &self.topic, self.partitions).await?;
        let mine = fresh.remove(connector).unwrap_or_default();
        self.data.write().expect("offsets lock").insert(connector.to_owned(), mine);
        Ok(())
    }
}

fn parse_key(key: &Json) -> Option<(String, SourcePartition)> {
    let arr = key.as_array()?;
    if arr.len() != 2 {
        return None;
    }
    Some((arr[0].as_str()?.to_owned(), arr[1].as_object()?.clone()))
}

/// Reads a connector's committed offsets for its tasks.
pub struct ConnectorOffsets {
    pub store: Arc<OffsetStore>,
    pub connector: String,
}

impl sluice_api::OffsetReader for ConnectorOffsets {
    fn offset(&self, partition: &SourcePartition) -> Option<SourceOffset> {
        self.store.get(&self.connector, partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_connect_shaped_and_order_insensitive() {
        let mut a = SourcePartition::new();
        a.insert("server".into(), json!("db"));
        a.insert("db".into(), json!(1));
        let mut b = SourcePartition::new();
        b.insert("db".into(), json!(1));
        b.insert("server".into(), json!("db"));
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(json!(["c", a]).to_string(), r#"["c",{"server":"db","db":1}]"#);
        assert_eq!(parse_key(&json!(["c", {"x": 1}])).unwrap().0, "c");
        assert!(parse_key(&json!(["c"])).is_none());
    }
}
