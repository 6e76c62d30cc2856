//! Connector configs, task configs and target states in the config topic (one partition,
//! compacted). Writes are durable before they return; [`ConfigStore::open`] replays the
//! topic into a [`ConfigSnapshot`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value as Json};
use sluice_api::{Props, TopicPartition};

use crate::herder::session::{SessionKey, SESSION_KEY_RECORD};
use crate::herder::TargetState;
use crate::log::{Log, LogResult, TopicConfig};

#[derive(Debug, Clone, PartialEq)]
pub struct ConnectorConfigState {
    pub config: Props,
    pub target: TargetState,
    /// The committed task configurations.
    pub tasks: Vec<Props>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigSnapshot {
    pub connectors: BTreeMap<String, ConnectorConfigState>,
    /// Cluster-wide log levels (`logger-cluster-<namespace>` records, KIP-976) read since the
    /// reader last took them, in order. Those written before this worker started are not
    /// applied, as in Connect.
    pub logger_levels: Vec<(String, String)>,
    /// The newest session key (`session-key` record) signed inter-worker requests use.
    pub session_key: Option<SessionKey>,
}

/// Key prefix of Connect's cluster-wide logger level records.
pub const LOGGER_CLUSTER_PREFIX: &str = "logger-cluster-";

/// Task configs read but not yet committed, per connector.
type Pending = BTreeMap<String, BTreeMap<u32, Props>>;

pub struct ConfigStore {
    log: Arc<dyn Log>,
    topic: String,
    /// Where [`ConfigStore::catch_up`] reads next, and task configs awaiting their commit.
    tail: std::sync::Mutex<(i64, Pending)>,
    /// Whether any record was read (Connect's config offset stays -1 until one is).
    read_any: std::sync::atomic::AtomicBool,
}

impl ConfigStore {
    pub async fn open(log: Arc<dyn Log>, topic: &str, replication: i32) -> LogResult<(Self, ConfigSnapshot)> {
        log.ensure_topic(topic, TopicConfig::compacted(1).replicated(replication)).await?;
        let records = super::read_all(log.as_ref(), &TopicPartition::new(topic, 0)).await?;
        let mut snapshot = ConfigSnapshot::default();
        let mut pending: BTreeMap<String, BTreeMap<u32, Props>> = BTreeMap::new();
        let mut next = log.offsets(&TopicPartition::new(topic, 0)).await?.0;
        let read_any = !records.is_empty();
        for r in records {
            next = r.offset + 1;
            let Some(key) = r.record.key.as_deref().and_then(|k| std::str::from_utf8(k).ok()) else { continue };
            let value: Option<Json> = r.record.value.as_deref().and_then(|v| serde_json::from_slice(v).ok());
            apply(&mut snapshot, &mut pending, key, value);
        }
        for (namespace, level) in snapshot.logger_levels.drain(..) {
            tracing::trace!(namespace, level, "not applying a cluster log level written before this worker started");
        }
        let store = Self { log, topic: topic.to_owned(), tail: std::sync::Mutex::new((next, pending)), read_any: read_any.into() };
        Ok((store, snapshot))
    }

    /// The offset after the last config record read (-1 before any was read): the
    /// `config_offset` a worker joins its group with, as Connect's config store counts it
    /// (a Java worker that has read the same records reports the same number).
    pub fn position(&self) -> i64 {
        if !self.read_any.load(std::sync::atomic::Ordering::Acquire) {
            return -1;
        }
        self.tail.lock().expect("config tail lock").0
    }

    /// Applies what other writers (and this one) appended since the last read to
    /// `snapshot`. Returns whether any record was read. Calls must not overlap.
    pub async fn catch_up(&self, snapshot: &mut ConfigSnapshot) -> LogResult<bool> {
        let tp = TopicPartition::new(&self.topic, 0);
        let (mut next, mut pending) = {
            let t = self.tail.lock().expect("config tail lock");
            (t.0, t.1.clone())
        };
        let end = self.log.offsets(&tp).await?.1;
        let start = next;
        while next < end {
            let batch = self.log.read(&tp, next, 1 << 20, std::time::Duration::ZERO).await?;
            let Some(last) = batch.last() else { break };
            next = last.offset + 1;
            self.read_any.store(true, std::sync::atomic::Ordering::Release);
            for r in batch {
                let Some(key) = r.record.key.as_deref().and_then(|k| std::str::from_utf8(k).ok()) else { continue };
                let value: Option<Json> = r.record.value.as_deref().and_then(|v| serde_json::from_slice(v).ok());
                apply(snapshot, &mut pending, key, value);
            }
        }
        *self.tail.lock().expect("config tail lock") = (next, pending);
        Ok(next > start)
    }

    async fn write(&self, records: Vec<(String, Option<Json>)>) -> LogResult<()> {
        let batch = records.iter().map(|(k, v)| super::produce(&self.topic, 0, k, v.as_ref())).collect();
        self.log.append(batch).await.map(|_| ())
    }

    pub async fn put_connector(&self, name: &str, config: &Props) -> LogResult<()> {
        self.write(vec![(format!("connector-{name}"), Some(json!({ "properties": config })))]).await
    }

    pub async fn put_target_state(&self, name: &str, state: TargetState) -> LogResult<()> {
        self.write(vec![(format!("target-state-{name}"), Some(target_state_json(state)))]).await
    }

    /// Writes every task config, then the commit record that makes them take effect.
    pub async fn put_task_configs(&self, name: &str, tasks: &[Props]) -> LogResult<()> {
        let mut records: Vec<_> =
            tasks.iter().enumerate().map(|(i, t)| (format!("task-{name}-{i}"), Some(json!({ "properties": t })))).collect();
        records.push((format!("commit-{name}"), Some(json!({ "tasks": tasks.len() }))));
        self.write(records).await
    }

    /// A cluster-wide log level: every worker that reads it sets `namespace` to `level`.
    pub async fn put_logger_level(&self, namespace: &str, level: &str) -> LogResult<()> {
        self.write(vec![(format!("{LOGGER_CLUSTER_PREFIX}{namespace}"), Some(json!({ "level": level })))]).await
    }

    /// Leader of a sessioned group: the key every worker signs internal requests with.
    pub async fn put_session_key(&self, key: &SessionKey) -> LogResult<()> {
        self.write(vec![(SESSION_KEY_RECORD.to_owned(), Some(key.to_json()))]).await
    }

    /// Connect's `task-count-record-<name>`: the task count fenced for (exactly-once source).
    pub async fn put_task_count(&self, name: &str, count: u32) -> LogResult<()> {
        self.write(vec![(format!("task-count-record-{name}"), Some(json!({ "task-count": count })))]).await
    }

    /// Tombstones for the connector's config and target state.
    pub async fn remove_connector(&self, name: &str) -> LogResult<()> {
        self.write(vec![(format!("connector-{name}"), None), (format!("target-state-{name}"), None)]).await
    }
}

fn target_state_json(state: TargetState) -> Json {
    match state {
        TargetState::Started => json!({ "state": "STARTED" }),
        TargetState::Paused => json!({ "state": "PAUSED" }),
        // Older readers see PAUSED; newer ones read state.v2, as Connect writes it.
        TargetState::Stopped => json!({ "state": "PAUSED", "state.v2": "STOPPED" }),
    }
}

fn parse_target_state(v: &Json) -> Option<TargetState> {
    let s = v.get("state.v2").and_then(Json::as_str).or_else(|| v.get("state").and_then(Json::as_str))?;
    match s {
        "STARTED" => Some(TargetState::Started),
        "PAUSED" => Some(TargetState::Paused),
        "STOPPED" => Some(TargetState::Stopped),
        _ => None,
    }
}

fn properties(v: &Json) -> Option<Props> {
    let map = v.get("properties")?.as_object()?;
    Some(map.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned()))).collect())
}

fn apply(snapshot: &mut ConfigSnapshot, pending: &mut BTreeMap<String, BTreeMap<u32, Props>>, key: &str, value: Option<Json>) {
    if key == SESSION_KEY_RECORD {
        match value.as_ref().and_then(SessionKey::from_json) {
            Some(k) => snapshot.session_key = Some(k),
            None => tracing::error!("ignoring a session key record without a base64 'key', an 'algorithm' and a 'creation-timestamp'"),
        }
    } else if let Some(name) = key.strip_prefix("connector-") {
        match value.as_ref().and_then(properties) {
            Some(config) => {
                snapshot.connectors.entry(name.to_owned()).and_modify(|c| c.config = config.clone()).or_insert(ConnectorConfigState {
                    config,
                    target: TargetState::Started,
                    tasks: Vec::new(),
                });
            }
            None => {
                snapshot.connectors.remove(name);
                pending.remove(name);
            }
        }
    } else if let Some(name) = key.strip_prefix("target-state-") {
        if let (Some(state), Some(c)) = (value.as_ref().and_then(parse_target_state), snapshot.connectors.get_mut(name)) {
            c.target = state;
        }
    } else if let Some(rest) = key.strip_prefix("task-") {
        if let Some((name, idx)) = rest.rsplit_once('-') {
            if let (Ok(i), Some(props)) = (idx.parse::<u32>(), value.as_ref().and_then(properties)) {
                pending.entry(name.to_owned()).or_default().insert(i, props);
            }
        }
    } else if let Some(namespace) = key.strip_prefix(LOGGER_CLUSTER_PREFIX) {
        match value.as_ref().and_then(|v| v.get("level")).and_then(Json::as_str) {
            Some(level) => snapshot.logger_levels.push((namespace.to_owned(), level.to_owned())),
            None => tracing::error!(namespace, "ignoring a cluster log level record without a string 'level'"),
        }
    } else if let Some(name) = key.strip_prefix("commit-") {
        let n = value.as_ref().and_then(|v| v.get("tasks")).and_then(Json::as_u64).unwrap_or(0) as u32;
        let staged = pending.remove(name).unwrap_or_default();
        if (0..n).all(|i| staged.contains_key(&i)) {
            if let Some(c) = snapshot.connectors.get_mut(name) {
                c.tasks = (0..n).map(|i| staged[&i].clone()).collect();
            }
        } else {
            tracing::warn!(connector = name, tasks = n, "ignoring a task config commit whose task configs are incomplete");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_applies_commits_target_states_and_tombstones() {
        let mut snap = ConfigSnapshot::default();
        let mut pending = BTreeMap::new();
        let props = |v: &str| json!({ "properties": { "k": v } });
        apply(&mut snap, &mut pending, "connector-a", Some(props("1")));
        apply(&mut snap, &mut pending, "task-a-0", Some(props("t0")));
        apply(&mut snap, &mut pending, "task-a-1", Some(props("t1")));
        apply(&mut snap, &mut pending, "commit-a", Some(json!({ "tasks": 2 })));
        apply(&mut snap, &mut pending, "target-state-a", Some(target_state_json(TargetState::Stopped)));
        apply(&mut snap, &mut pending, "connector-b", Some(props("2")));
        apply(&mut snap, &mut pending, "task-b-0", Some(props("x")));
        apply(&mut snap, &mut pending, "commit-b", Some(json!({ "tasks": 2 })));
        let a = &snap.connectors["a"];
        assert_eq!(a.config["k"], "1");
        assert_eq!(a.tasks.len(), 2);
        assert_eq!(a.tasks[1]["k"], "t1");
        assert_eq!(a.target, TargetState::Stopped);
        assert!(snap.connectors["b"].tasks.is_empty(), "an incomplete commit is ignored");
        apply(&mut snap, &mut pending, "connector-a", None);
        assert!(!snap.connectors.contains_key("a"));
    }

    #[test]
    fn logger_level_records() {
        let mut snap = ConfigSnapshot::default();
        let mut pending = BTreeMap::new();
        apply(&mut snap, &mut pending, "logger-cluster-org.apache.kafka.connect", Some(json!({"level": "DEBUG"})));
        apply(&mut snap, &mut pending, "logger-cluster-x", Some(json!({"level": 3})));
        assert_eq!(snap.logger_levels, vec![("org.apache.kafka.connect".to_owned(), "DEBUG".to_owned())]);
        assert!(snap.connectors.is_empty());
    }

    /// The session key as Kafka Connect 4.3 writes it (recorded), read; written back with
    /// the same fields and values.
    #[test]
    fn session_key_records_match_connect() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/connect/request-signatures.json");
        let cases: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let stored = &cases[0]["session_key"];
        let mut snap = ConfigSnapshot::default();
        apply(&mut snap, &mut BTreeMap::new(), "session-key", Some(stored.clone()));
        let key = snap.session_key.clone().expect("read");
        assert_eq!((key.algorithm.as_str(), key.created_ms, key.key.len()), ("HmacSHA256", 1764800000000, 32));
        assert_eq!(key.to_json().to_string(), stored.to_string());
        apply(&mut snap, &mut BTreeMap::new(), "session-key", Some(json!({"key": 1})));
        assert_eq!(snap.session_key, Some(key), "a malformed record is ignored");
    }

    #[test]
    fn target_state_records_match_connect() {
        assert_eq!(target_state_json(TargetState::Stopped).to_string(), r#"{"state":"PAUSED","state.v2":"STOPPED"}"#);
        assert_eq!(parse_target_state(&json!({"state":"PAUSED"})), Some(TargetState::Paused));
        assert_eq!(parse_target_state(&json!({"state":"PAUSED","state.v2":"STOPPED"})), Some(TargetState::Stopped));
    }
}
