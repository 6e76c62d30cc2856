//! A log made of two: the worker's own topics (configs, offsets, statuses) on one backend,
//! every other topic and the consumer groups on another. Standalone mode on Kafka uses it
//! as `connect-standalone` does: data topics and sink groups in Kafka, the worker's state
//! local (Connect keeps it in a file; we keep it in the embedded log).
//!
//! ```text
//!               ┌── topic ∈ internal ──▶ internal log (embedded)
//!  SplitLog ────┤
//!               └── otherwise, groups ─▶ data log (Kafka)
//! ```
//!
//! An append whose records go to both backends is split in two and acknowledged once both
//! halves are; acknowledgements keep call order across backends (see `ack_chain`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sluice_api::TopicPartition;

use super::{AckChain, AppendFuture, ClientOverrides, Log, LogResult, LogStat, NewTopic, Produce, StoredRecord, TopicConfig, TopicDescription};

pub struct SplitLog {
    internal_topics: BTreeSet<String>,
    internal: Arc<dyn Log>,
    data: Arc<dyn Log>,
    acks: AckChain,
}

impl SplitLog {
    /// `internal_topics` (exact names) live in `internal`; every other topic and every
    /// consumer group in `data`.
    pub fn new(internal_topics: impl IntoIterator<Item = String>, internal: Arc<dyn Log>, data: Arc<dyn Log>) -> Self {
        Self { internal_topics: internal_topics.into_iter().collect(), internal, data, acks: AckChain::default() }
    }

    fn route(&self, topic: &str) -> &Arc<dyn Log> {
        if self.internal_topics.contains(topic) {
            &self.internal
        } else {
            &self.data
        }
    }
}

#[async_trait]
impl Log for SplitLog {
    fn stats(&self) -> Vec<LogStat> {
        self.internal.stats()
    }

    async fn ensure_topic(&self, name: &str, config: TopicConfig) -> LogResult<()> {
        self.route(name).ensure_topic(name, config).await
    }

    async fn create_topic(&self, topic: &NewTopic) -> LogResult<bool> {
        self.route(&topic.name).create_topic(topic).await
    }

    /// The data log with the overrides; the worker's own topics stay where they are.
    fn with_client_overrides(&self, overrides: &ClientOverrides) -> LogResult<Option<Arc<dyn Log>>> {
        Ok(self
            .data
            .with_client_overrides(overrides)?
            .map(|data| Arc::new(SplitLog::new(self.internal_topics.iter().cloned(), self.internal.clone(), data)) as Arc<dyn Log>))
    }

    /// The data log's topics (the internal ones are the worker's own business, as they
    /// are not in a Kafka cluster listing of `connect-standalone` either).
    async fn list_topics(&self) -> LogResult<Vec<String>> {
        self.data.list_topics().await
    }

    async fn describe_topic(&self, name: &str) -> LogResult<Option<TopicDescription>> {
        self.route(name).describe_topic(name).await
    }

    async fn partition_count(&self, topic: &str) -> LogResult<i32> {
        self.route(topic).partition_count(topic).await
    }

    fn append(&self, records: Vec<Produce>) -> AppendFuture {
        type Indexed = Vec<(usize, Produce)>;
        let (internal, data): (Indexed, Indexed) =
            records.into_iter().enumerate().partition(|(_, p)| self.internal_topics.contains(&p.topic));
        let total = internal.len() + data.len();
        let split = |part: Vec<(usize, Produce)>| -> (Vec<usize>, Vec<Produce>) { part.into_iter().unzip() };
        let (internal_at, internal) = split(internal);
        let (data_at, data) = split(data);
        let internal_ack = (!internal.is_empty()).then(|| self.internal.append(internal));
        let data_ack = (!data.is_empty()).then(|| self.data.append(data));
        self.acks.chain(async move {
            let mut offsets = vec![0; total];
            for (at, ack) in [(internal_at, internal_ack), (data_at, data_ack)] {
                if let Some(ack) = ack {
                    for (i, o) in at.into_iter().zip(ack.await?) {
                        offsets[i] = o;
                    }
                }
            }
            Ok(offsets)
        })
    }

    async fn read(&self, tp: &TopicPartition, offset: i64, max_bytes: usize, max_wait: Duration) -> LogResult<Vec<StoredRecord>> {
        self.route(&tp.topic).read(tp, offset, max_bytes, max_wait).await
    }

    async fn offsets(&self, tp: &TopicPartition) -> LogResult<(i64, i64)> {
        self.route(&tp.topic).offsets(tp).await
    }

    async fn commit_group(&self, group: &str, offsets: &BTreeMap<TopicPartition, i64>) -> LogResult<()> {
        self.data.commit_group(group, offsets).await
    }

    async fn group_offsets(&self, group: &str) -> LogResult<BTreeMap<TopicPartition, i64>> {
        self.data.group_offsets(group).await
    }

    async fn delete_group(&self, group: &str) -> LogResult<()> {
        self.data.delete_group(group).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
    use crate::log::LogRecord;

    fn produce(topic: &str, value: &str) -> Produce {
        Produce { topic: topic.into(), partition: 0, record: LogRecord { value: Some(value.as_bytes().to_vec()), ..LogRecord::default() } }
    }

    #[tokio::test]
    async fn routes_internal_topics_and_keeps_offsets_in_input_order() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let internal: Arc<dyn Log> = Arc::new(EmbeddedLog::open(a.path(), EmbeddedOptions::default()).unwrap());
        let data: Arc<dyn Log> = Arc::new(EmbeddedLog::open(b.path(), EmbeddedOptions::default()).unwrap());
        let log = SplitLog::new(["connect-offsets".to_owned()], internal.clone(), data.clone());
        log.ensure_topic("connect-offsets", TopicConfig::compacted(1)).await.unwrap();
        log.ensure_topic("orders", TopicConfig::new(1)).await.unwrap();
        let offsets = log
            .append(vec![
                produce("orders", "o0"),
                produce("connect-offsets", "c0"),
                produce("orders", "o1"),
                produce("connect-offsets", "c1"),
            ])
            .await
            .unwrap();
        assert_eq!(offsets, vec![0, 0, 1, 1]);
        assert!(internal.describe_topic("orders").await.unwrap().is_none());
        assert!(data.describe_topic("connect-offsets").await.unwrap().is_none());
        assert_eq!(log.list_topics().await.unwrap().iter().filter(|t| *t == "orders").count(), 1);
        let tp = TopicPartition::new("connect-offsets", 0);
        let read = log.read(&tp, 0, 1 << 20, Duration::ZERO).await.unwrap();
        assert_eq!(read.iter().map(|r| r.record.value.clone().unwrap()).collect::<Vec<_>>(), vec![b"c0".to_vec(), b"c1".to_vec()]);
        let group = BTreeMap::from([(TopicPartition::new("orders", 0), 2)]);
        log.commit_group("connect-sink", &group).await.unwrap();
        assert_eq!(data.group_offsets("connect-sink").await.unwrap(), group);
        assert!(internal.group_offsets("connect-sink").await.unwrap().is_empty());
    }
}
