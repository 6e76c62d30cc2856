//! Connector, task and topic statuses. The in-memory board answers REST; every change is
//! also appended to the status topic in Connect's format (without waiting for it: a status
//! is a report, not progress).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};
use sluice_api::TopicPartition;

use crate::herder::{ConnectorTaskId, StateInfo};
use crate::log::{Log, LogResult, TopicConfig};
use crate::partitioner::partition_for_key;

#[derive(Default)]
struct Board {
    connectors: BTreeMap<String, StateInfo>,
    tasks: BTreeMap<ConnectorTaskId, StateInfo>,
    /// connector → topics it has used
    topics: BTreeMap<String, BTreeSet<String>>,
}

pub struct StatusStore {
    log: Arc<dyn Log>,
    topic: String,
    partitions: i32,
    board: Mutex<Board>,
    /// The group generation written with each status (0 outside a group).
    generation: std::sync::atomic::AtomicI32,
    /// Each connector's plugin version, written into its status records as Connect 4 does
    /// (a Java worker of the same group shows it).
    versions: Mutex<std::collections::HashMap<String, String>>,
}

impl StatusStore {
    pub async fn open(log: Arc<dyn Log>, topic: &str, partitions: i32, replication: i32) -> LogResult<Self> {
        log.ensure_topic(topic, TopicConfig::compacted(partitions).replicated(replication)).await?;
        let count = log.partition_count(topic).await?;
        let mut board = Board::default();
        for p in 0..count {
            for r in super::read_all(log.as_ref(), &TopicPartition::new(topic, p)).await? {
                let Some(key) = r.record.key.as_deref().and_then(|k| std::str::from_utf8(k).ok()) else { continue };
                let Some((topic_name, connector)) = key.strip_prefix("status-topic-").and_then(|k| k.split_once(":connector-")) else {
                    continue;
                };
                let set = board.topics.entry(connector.to_owned()).or_default();
                if r.record.value.is_some() {
                    set.insert(topic_name.to_owned());
                } else {
                    set.remove(topic_name);
                }
            }
        }
        Ok(Self {
            log,
            topic: topic.to_owned(),
            partitions: count,
            board: Mutex::new(board),
            generation: Default::default(),
            versions: Default::default(),
        })
    }

    fn persist(&self, records: Vec<(String, Option<Json>)>) {
        let batch = records
            .iter()
            .map(|(k, v)| super::produce(&self.topic, partition_for_key(k.as_bytes(), self.partitions), k, v.as_ref()))
            .collect();
        let ack = self.log.append(batch);
        tokio::spawn(async move {
            if let Err(e) = ack.await {
                tracing::warn!(error = %e, "could not write a status record");
            }
        });
    }

    fn status_json(s: &StateInfo, generation: i32, version: Option<&str>) -> Json {
        let mut v = json!({ "state": s.state.name(), "trace": s.trace, "worker_id": s.worker_id, "generation": generation });
        if let Some(version) = version {
            v["version"] = json!(version);
        }
        v
    }

    /// The plugin version of `connector`'s status records from now on.
    pub fn set_plugin_version(&self, connector: &str, version: &str) {
        self.versions.lock().expect("versions lock").insert(connector.to_owned(), version.to_owned());
    }

    /// The group generation statuses are written with from now on.
    pub fn set_generation(&self, generation: i32) {
        self.generation.store(generation, std::sync::atomic::Ordering::SeqCst);
    }

    fn record(&self, connector: &str, s: &StateInfo) -> Json {
        let version = self.versions.lock().expect("versions lock").get(connector).cloned();
        Self::status_json(s, self.generation.load(std::sync::atomic::Ordering::SeqCst), version.as_deref())
    }

    /// Follows the status topic from its current end, so this worker shows the statuses
    /// other workers of its group write. Every partition is read from the start first.
    pub async fn follow(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        let mut next = vec![0i64; self.partitions as usize];
        while !shutdown.is_cancelled() {
            for (p, pos) in next.iter_mut().enumerate() {
                let tp = TopicPartition::new(&self.topic, p as i32);
                let batch = match self.log.read(&tp, *pos, 1 << 20, std::time::Duration::ZERO).await {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::debug!(error = %e, "could not read the status topic");
                        continue;
                    }
                };
                let mut board = self.board.lock().expect("status lock");
                for r in batch {
                    *pos = r.offset + 1;
                    let Some(key) = r.record.key.as_deref().and_then(|k| std::str::from_utf8(k).ok()) else { continue };
                    let value: Option<Json> = r.record.value.as_deref().and_then(|v| serde_json::from_slice(v).ok());
                    apply_status(&mut board, key, value.as_ref());
                }
            }
            tokio::select! { _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}, _ = shutdown.cancelled() => {} }
        }
    }

    pub fn put_connector(&self, name: &str, mut status: StateInfo) {
        status.trace = status.trace.map(|t| sluice_api::secret::redact_urls(&t));
        let record = self.record(name, &status);
        self.board.lock().expect("status lock").connectors.insert(name.to_owned(), status);
        self.persist(vec![(format!("status-connector-{name}"), Some(record))]);
    }

    pub fn put_task(&self, id: &ConnectorTaskId, mut status: StateInfo) {
        status.trace = status.trace.map(|t| sluice_api::secret::redact_urls(&t));
        let record = self.record(&id.connector, &status);
        self.board.lock().expect("status lock").tasks.insert(id.clone(), status);
        self.persist(vec![(format!("status-task-{}-{}", id.connector, id.task), Some(record))]);
    }

    pub fn connector(&self, name: &str) -> Option<StateInfo> {
        self.board.lock().expect("status lock").connectors.get(name).cloned()
    }

    pub fn task(&self, id: &ConnectorTaskId) -> Option<StateInfo> {
        self.board.lock().expect("status lock").tasks.get(id).cloned()
    }

    /// Forgets a task's status (it no longer exists).
    pub fn remove_task(&self, id: &ConnectorTaskId) {
        self.board.lock().expect("status lock").tasks.remove(id);
        self.persist(vec![(format!("status-task-{}-{}", id.connector, id.task), None)]);
    }

    /// Forgets everything about a deleted connector.
    pub fn remove_connector(&self, name: &str) {
        let mut records = vec![(format!("status-connector-{name}"), None)];
        {
            let mut board = self.board.lock().expect("status lock");
            board.connectors.remove(name);
            let ids: Vec<_> = board.tasks.keys().filter(|id| id.connector == name).cloned().collect();
            for id in ids {
                board.tasks.remove(&id);
                records.push((format!("status-task-{}-{}", id.connector, id.task), None));
            }
            for t in board.topics.remove(name).unwrap_or_default() {
                records.push((format!("status-topic-{t}:connector-{name}"), None));
            }
        }
        self.persist(records);
    }

    /// Records that a task of `connector` used `topic`; writes only when the topic is not
    /// already recorded (the first use, or the first since a reset). Cheap when it is: tasks
    /// call this for every batch, as Connect's tasks do for every record, so that a topic
    /// comes back after `PUT /connectors/{name}/topics/reset` once records flow again.
    pub fn topic_used(&self, connector: &str, topic: &str, task: u32) {
        let fresh = {
            let mut board = self.board.lock().expect("status lock");
            if board.topics.get(connector).is_some_and(|t| t.contains(topic)) {
                return;
            }
            board.topics.entry(connector.to_owned()).or_default().insert(topic.to_owned())
        };
        if fresh {
            let value = json!({ "topic": { "name": topic, "connector": connector, "task": task, "discoverTimestamp": super::now_ms() } });
            self.persist(vec![(format!("status-topic-{topic}:connector-{connector}"), Some(value))]);
        }
    }

    pub fn topics(&self, connector: &str) -> Vec<String> {
        self.board.lock().expect("status lock").topics.get(connector).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    pub fn reset_topics(&self, connector: &str) {
        let removed = self.board.lock().expect("status lock").topics.remove(connector).unwrap_or_default();
        self.persist(removed.into_iter().map(|t| (format!("status-topic-{t}:connector-{connector}"), None)).collect());
    }
}

/// One status record from the topic onto the board (connector and task statuses only).
fn apply_status(board: &mut Board, key: &str, value: Option<&Json>) {
    let parse = |v: &Json| -> Option<StateInfo> {
        let state = serde_json::from_value(v.get("state")?.clone()).ok()?;
        Some(StateInfo {
            state,
            trace: v.get("trace").and_then(Json::as_str).map(str::to_owned),
            worker_id: v.get("worker_id").and_then(Json::as_str).unwrap_or_default().to_owned(),
            version: None,
        })
    };
    if let Some(name) = key.strip_prefix("status-connector-") {
        match value.and_then(parse) {
            Some(s) => board.connectors.insert(name.to_owned(), s),
            None => board.connectors.remove(name),
        };
    } else if let Some(rest) = key.strip_prefix("status-task-") {
        let Some((name, task)) = rest.rsplit_once('-') else { return };
        let Ok(task) = task.parse::<u32>() else { return };
        let id = ConnectorTaskId { connector: name.to_owned(), task };
        match value.and_then(parse) {
            Some(s) => board.tasks.insert(id, s),
            None => board.tasks.remove(&id),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::herder::State;

    #[test]
    fn status_record_matches_connect() {
        let s = StateInfo { state: State::Failed, trace: Some("boom".into()), worker_id: "h:1".into(), version: None };
        assert_eq!(
            StatusStore::status_json(&s, 3, None).to_string(),
            r#"{"state":"FAILED","trace":"boom","worker_id":"h:1","generation":3}"#
        );
        // As Kafka Connect 4.3 writes it, with the plugin's version last.
        assert_eq!(
            StatusStore::status_json(&s, 6, Some("4.3.0")).to_string(),
            r#"{"state":"FAILED","trace":"boom","worker_id":"h:1","generation":6,"version":"4.3.0"}"#
        );
        let mut board = Board::default();
        apply_status(&mut board, "status-task-my-conn-2", Some(&StatusStore::status_json(&s, 3, Some("1.0"))));
        assert_eq!(board.tasks[&ConnectorTaskId { connector: "my-conn".into(), task: 2 }], s);
        apply_status(&mut board, "status-task-my-conn-2", None);
        assert!(board.tasks.is_empty());
    }
}
