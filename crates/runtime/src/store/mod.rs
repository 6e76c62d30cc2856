//! The worker's state in three internal topics, in Kafka Connect's own record formats, so
//! the same state can live in Kafka unchanged:
//!
//! | topic (default) | key | value (JsonConverter, schemas off) |
//! |---|---|---|
//! | `connect-configs` | `connector-NAME` | `{"properties":{…}}` |
//! | | `task-NAME-N` | `{"properties":{…}}` |
//! | | `commit-NAME` | `{"tasks":N}` |
//! | | `target-state-NAME` | `{"state":"STARTED"}`, `{"state":"PAUSED"}`, `{"state":"PAUSED","state.v2":"STOPPED"}` |
//! | `connect-offsets` | `["NAME",{source partition}]` | `{source offset}`; null removes it |
//! | `connect-status` | `status-connector-NAME`, `status-task-NAME-N` | `{"state":…,"trace":…,"worker_id":…,"generation":N,"version":…}` |
//! | | `status-topic-TOPIC:connector-NAME` | `{"topic":{"name":…,"connector":…,"task":N,"discoverTimestamp":ms}}` |

pub mod config;
pub mod offset;
pub mod status;

use std::time::{SystemTime, UNIX_EPOCH};

use crate::log::{LogRecord, Produce};

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

pub(crate) fn produce(topic: &str, partition: i32, key: &str, value: Option<&serde_json::Value>) -> Produce {
    Produce {
        topic: topic.to_owned(),
        partition,
        record: LogRecord {
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| serde_json::to_vec(v).expect("json values serialise")),
            timestamp: now_ms(),
            headers: Vec::new(),
        },
    }
}

/// Reads a whole partition from its start to its current end.
pub(crate) async fn read_all(
    log: &dyn crate::log::Log,
    tp: &sluice_api::TopicPartition,
) -> crate::log::LogResult<Vec<crate::log::StoredRecord>> {
    let (mut next, end) = log.offsets(tp).await?;
    let mut out = Vec::new();
    while next < end {
        let batch = log.read(tp, next, 1 << 20, std::time::Duration::ZERO).await?;
        let Some(last) = batch.last() else { break };
        next = last.offset + 1;
        out.extend(batch);
    }
    Ok(out)
}
