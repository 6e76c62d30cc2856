//! Error handling for records, as Connect's `errors.*` keys configure it:
//!
//! - `errors.retry.timeout` / `errors.retry.delay.max.ms`: a retriable failure of a stage is
//!   retried with exponential backoff (with jitter) until the timeout (0: no retries);
//! - `errors.tolerance`: `none` fails the task on the first bad record, with the stage and
//!   the record's position in the trace; `all` skips the record and goes on;
//! - `errors.log.enable` / `errors.log.include.messages`: log each tolerated failure;
//! - `errors.deadletterqueue.topic.name` (+ `.context.headers.enable`): skipped records go to
//!   a dead-letter topic with Connect's `__connect.errors.*` headers. Sinks as in Connect;
//!   for sources this is our extension (the source offset still advances past the record).
//!
//! A skipped record still counts as handled: offsets move past it. Nothing is acknowledged
//! past a record that was neither handled nor skipped.

use std::time::{Duration, Instant};

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Validator};

use super::Stage;
use crate::log::{LogRecord, Produce};
use crate::store::now_ms;

pub const TOLERANCE: &str = "errors.tolerance";
pub const RETRY_TIMEOUT: &str = "errors.retry.timeout";
pub const RETRY_DELAY_MAX: &str = "errors.retry.delay.max.ms";
pub const LOG_ENABLE: &str = "errors.log.enable";
pub const LOG_INCLUDE_MESSAGES: &str = "errors.log.include.messages";
pub const DLQ_TOPIC: &str = "errors.deadletterqueue.topic.name";
pub const DLQ_REPLICATION_FACTOR: &str = "errors.deadletterqueue.topic.replication.factor";
pub const DLQ_CONTEXT_HEADERS: &str = "errors.deadletterqueue.context.headers.enable";

/// `-1`: the broker's `default.replication.factor`. Connect's default is 3, which a one-
/// or two-broker cluster cannot meet; as for the internal topics, the broker decides here.
pub const DEFAULT_DLQ_REPLICATION_FACTOR: &str = "-1";
/// Partitions of a dead-letter topic created by a task, as in Connect.
pub const DLQ_PARTITIONS: i32 = 1;

const GROUP: &str = "Error Handling";
/// First retry delay, as Connect's `RetryWithToleranceOperator`.
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(300);

/// The `errors.*` keys.
pub fn def() -> ConfigDef {
    let key = |name: &str, ty, doc: &str| ConfigKey::new(name, ty, Importance::Medium, doc);
    ConfigDef::new()
        .define(
            key(
                TOLERANCE,
                ConfigType::String,
                "Behaviour for tolerating errors: 'none' fails the task on the first bad record; 'all' skips bad records.",
            )
            .default_value("none")
            .validator(Validator::one_of(&["none", "all"]))
            .group(GROUP, 1, "Error Tolerance"),
        )
        .define(
            key(
                RETRY_TIMEOUT,
                ConfigType::Long,
                "Maximum duration in milliseconds that a failed operation will be reattempted; 0 for no retries, -1 for no limit.",
            )
            .default_value("0")
            .validator(Validator::AtLeast(-1))
            .group(GROUP, 2, "Retry Timeout for Errors"),
        )
        .define(
            key(RETRY_DELAY_MAX, ConfigType::Long, "Maximum duration in milliseconds between consecutive retry attempts.")
                .default_value("60000")
                .validator(Validator::AtLeast(1))
                .group(GROUP, 3, "Maximum Delay Between Retries for Errors"),
        )
        .define(
            key(LOG_ENABLE, ConfigType::Boolean, "Log each error and the details of the failed operation.").default_value("false").group(
                GROUP,
                4,
                "Log Errors",
            ),
        )
        .define(key(LOG_INCLUDE_MESSAGES, ConfigType::Boolean, "Include the record in the error log.").default_value("false").group(
            GROUP,
            5,
            "Log Error Details",
        ))
        .define(
            key(DLQ_TOPIC, ConfigType::String, "The dead-letter topic for records that could not be processed; empty for none.")
                .default_value("")
                .group(GROUP, 6, "Dead Letter Queue Topic Name"),
        )
        .define(
            key(
                DLQ_REPLICATION_FACTOR,
                ConfigType::Short,
                "Replication factor of the dead-letter topic when it is created; -1 for the broker's default (the embedded log keeps one copy).",
            )
            .default_value(DEFAULT_DLQ_REPLICATION_FACTOR)
            .validator(Validator::Between(-1, i16::MAX as i64))
            .group(GROUP, 7, "Dead Letter Queue Topic Replication Factor"),
        )
        .define(
            key(DLQ_CONTEXT_HEADERS, ConfigType::Boolean, "Add headers with the error context to dead-letter records.")
                .default_value("false")
                .group(GROUP, 8, "Enable Error Context Headers"),
        )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterQueue {
    pub topic: String,
    pub context_headers: bool,
    /// `errors.deadletterqueue.topic.replication.factor`, used when the task creates the
    /// topic (`-1`: the log's default).
    pub replication_factor: i32,
}

impl DeadLetterQueue {
    /// The topic as a task creates it when missing: one partition, the configured factor.
    pub fn new_topic(&self) -> crate::log::NewTopic {
        crate::log::NewTopic::new(self.topic.clone(), DLQ_PARTITIONS, self.replication_factor)
    }
}

/// `errors.deadletterqueue.topic.replication.factor` may not be 0 (the type's range is
/// checked by the definition).
pub fn dlq_replication_error(props: &Props) -> Option<(String, String)> {
    let value = props.get(DLQ_REPLICATION_FACTOR)?;
    (value.trim() == "0").then(|| {
        (
            DLQ_REPLICATION_FACTOR.to_owned(),
            format!("Invalid value {value} for configuration {DLQ_REPLICATION_FACTOR}: Value must be -1 or at least 1"),
        )
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPolicy {
    pub tolerate_all: bool,
    /// `None`: retry without limit.
    pub retry_timeout: Option<Duration>,
    pub retry_delay_max: Duration,
    pub log_enable: bool,
    pub log_include_messages: bool,
    pub dlq: Option<DeadLetterQueue>,
    /// The task's error counters (Connect's `task-error-metrics`).
    pub metrics: crate::metrics::Counters,
}

impl Default for ErrorPolicy {
    fn default() -> Self {
        Self {
            tolerate_all: false,
            retry_timeout: Some(Duration::ZERO),
            retry_delay_max: Duration::from_secs(60),
            log_enable: false,
            log_include_messages: false,
            dlq: None,
            metrics: Default::default(),
        }
    }
}

/// Where a failed record came from, for traces, logs and dead-letter headers.
#[derive(Debug, Clone)]
pub struct FailedRecord {
    pub connector: String,
    pub task: u32,
    pub stage: Stage,
    /// The class that failed (e.g. the converter's), as `__connect.errors.class.name`.
    pub class: String,
    /// `topic partition offset` for sinks, source partition/offset for sources.
    pub position: String,
    /// Sink records: the consumed topic, partition and offset.
    pub original: Option<(String, i32, i64)>,
    /// The record as the dead-letter topic gets it (raw bytes for sinks).
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// A printable form of the record, logged with `errors.log.include.messages`.
    pub describe: String,
}

impl FailedRecord {
    /// A failure known only by its position (the record itself is gone).
    pub fn position_only(id: &crate::herder::ConnectorTaskId, stage: Stage, position: String) -> Self {
        Self {
            connector: id.connector.clone(),
            task: id.task,
            stage,
            class: String::new(),
            position,
            original: None,
            key: None,
            value: None,
            headers: Vec::new(),
            describe: String::new(),
        }
    }
}

impl ErrorPolicy {
    pub fn from_config(props: &Props) -> ConnectResult<Self> {
        let c = def().parse(props)?;
        let timeout = c.int(RETRY_TIMEOUT);
        if let Some((key, message)) = dlq_replication_error(props) {
            return Err(ConnectError::config(key, message));
        }
        let replication_factor = c.int(DLQ_REPLICATION_FACTOR) as i32;
        let dlq =
            c.string(DLQ_TOPIC).map(|topic| DeadLetterQueue { topic, context_headers: c.boolean(DLQ_CONTEXT_HEADERS), replication_factor });
        Ok(Self {
            tolerate_all: c.string(TOLERANCE).is_some_and(|t| t.eq_ignore_ascii_case("all")),
            retry_timeout: if timeout < 0 { None } else { Some(Duration::from_millis(timeout as u64)) },
            retry_delay_max: Duration::from_millis(c.int(RETRY_DELAY_MAX) as u64),
            log_enable: c.boolean(LOG_ENABLE),
            log_include_messages: c.boolean(LOG_INCLUDE_MESSAGES),
            dlq,
            metrics: Default::default(),
        })
    }

    /// Runs `op`, retrying retriable failures within `errors.retry.timeout`. Returns the
    /// last error when retries are exhausted or the failure is not retriable.
    pub async fn with_retries<T>(&self, mut op: impl FnMut() -> ConnectResult<T>) -> ConnectResult<T> {
        let started = Instant::now();
        let mut delay = FIRST_RETRY_DELAY;
        loop {
            match op() {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retriable() => {
                    let elapsed = started.elapsed();
                    let within = self.retry_timeout.is_none_or(|t| elapsed + delay <= t);
                    if !within {
                        return Err(e);
                    }
                    self.metrics.add(&self.metrics.retries, 1);
                    let jitter = Duration::from_millis(fastrand_ms(delay.as_millis() as u64 / 4 + 1));
                    tokio::time::sleep(delay + jitter).await;
                    delay = (delay * 2).min(self.retry_delay_max);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Calls `op`; only a retriable failure pays for the retry machinery.
    pub async fn call<T>(&self, mut op: impl FnMut() -> ConnectResult<T>) -> ConnectResult<T> {
        match op() {
            Err(e) if e.is_retriable() => self.with_retries(op).await,
            other => other,
        }
    }

    /// Decides what a failure means: `Ok(dead_letter)` when tolerated (the record is skipped;
    /// the returned record, if any, goes to the dead-letter topic), else the task-failing
    /// error naming the stage and position.
    pub fn handle(&self, failed: FailedRecord, err: ConnectError) -> ConnectResult<Option<Produce>> {
        self.metrics.record_error(self.tolerate_all, self.tolerate_all && self.log_enable, self.tolerate_all && self.dlq.is_some());
        if !self.tolerate_all {
            return Err(failed.stage.fail(failed.position, err));
        }
        if self.log_enable {
            if self.log_include_messages {
                tracing::error!(connector = %failed.connector, task = failed.task, stage = failed.stage.name(), position = %failed.position, record = %failed.describe, error = %err.trace(), "error encountered in task; skipping the record (errors.tolerance=all)");
            } else {
                tracing::error!(connector = %failed.connector, task = failed.task, stage = failed.stage.name(), position = %failed.position, error = %err.trace(), "error encountered in task; skipping the record (errors.tolerance=all)");
            }
        }
        Ok(self.dlq.as_ref().map(|dlq| dead_letter(dlq, &failed, &err)))
    }
}

fn fastrand_ms(bound: u64) -> u64 {
    // A cheap, good-enough jitter source without a dependency.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos() as u64).unwrap_or(0);
    nanos % bound.max(1)
}

/// The dead-letter record: the original bytes and, when enabled, Connect's context headers.
pub fn dead_letter(dlq: &DeadLetterQueue, failed: &FailedRecord, err: &ConnectError) -> Produce {
    let mut headers = failed.headers.clone();
    if dlq.context_headers {
        let mut add = |k: &str, v: String| headers.push((format!("__connect.errors.{k}"), Some(v.into_bytes())));
        if let Some((topic, partition, offset)) = &failed.original {
            add("topic", topic.clone());
            add("partition", partition.to_string());
            add("offset", offset.to_string());
        }
        add("connector.name", failed.connector.clone());
        add("task.id", failed.task.to_string());
        add("stage", failed.stage.name().to_owned());
        add("class.name", failed.class.clone());
        add("exception.class.name", exception_class(err).to_owned());
        add("exception.message", err.to_string());
        add("exception.stacktrace", err.trace());
    }
    Produce {
        topic: dlq.topic.clone(),
        partition: 0,
        record: LogRecord { key: failed.key.clone(), value: failed.value.clone(), timestamp: now_ms(), headers },
    }
}

fn exception_class(err: &ConnectError) -> &'static str {
    match err {
        ConnectError::Retriable { .. } => "org.apache.kafka.connect.errors.RetriableException",
        ConnectError::Config { .. } => "org.apache.kafka.common.config.ConfigException",
        ConnectError::Fatal { .. } => "org.apache.kafka.connect.errors.DataException",
        ConnectError::Permanent { .. } => "org.apache.kafka.connect.errors.ConnectException",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn failed() -> FailedRecord {
        FailedRecord {
            connector: "c".into(),
            task: 1,
            stage: Stage::ValueConverter,
            class: "org.apache.kafka.connect.json.JsonConverter".into(),
            position: "topic t partition 0 offset 7".into(),
            original: Some(("t".into(), 0, 7)),
            key: Some(b"k".to_vec()),
            value: Some(b"{bad".to_vec()),
            headers: vec![("h".into(), Some(b"v".to_vec()))],
            describe: "{bad".into(),
        }
    }

    #[test]
    fn none_fails_with_the_stage_and_position() {
        let policy = ErrorPolicy::from_config(&props(&[])).unwrap();
        let err = policy.handle(failed(), ConnectError::fatal("bad json")).unwrap_err();
        let trace = err.trace();
        assert!(trace.contains("stage VALUE_CONVERTER"), "{trace}");
        assert!(trace.contains("topic t partition 0 offset 7"), "{trace}");
        assert!(trace.contains("bad json"), "{trace}");
    }

    #[test]
    fn all_with_a_dead_letter_topic_writes_connect_headers() {
        let policy = ErrorPolicy::from_config(&props(&[(TOLERANCE, "all"), (DLQ_TOPIC, "dlq"), (DLQ_CONTEXT_HEADERS, "true")])).unwrap();
        let record = policy.handle(failed(), ConnectError::fatal("bad json")).unwrap().expect("a dead letter");
        assert_eq!(record.topic, "dlq");
        assert_eq!(record.record.value.as_deref(), Some(&b"{bad"[..]));
        let h = |k: &str| {
            record.record.headers.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.clone()).map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(h("h").as_deref(), Some("v"), "original headers are kept");
        assert_eq!(h("__connect.errors.topic").as_deref(), Some("t"));
        assert_eq!(h("__connect.errors.partition").as_deref(), Some("0"));
        assert_eq!(h("__connect.errors.offset").as_deref(), Some("7"));
        assert_eq!(h("__connect.errors.connector.name").as_deref(), Some("c"));
        assert_eq!(h("__connect.errors.task.id").as_deref(), Some("1"));
        assert_eq!(h("__connect.errors.stage").as_deref(), Some("VALUE_CONVERTER"));
        assert_eq!(h("__connect.errors.class.name").as_deref(), Some("org.apache.kafka.connect.json.JsonConverter"));
        assert_eq!(h("__connect.errors.exception.class.name").as_deref(), Some("org.apache.kafka.connect.errors.DataException"));
        assert_eq!(h("__connect.errors.exception.message").as_deref(), Some("bad json"));
        assert!(h("__connect.errors.exception.stacktrace").unwrap().contains("bad json"));
        let without = ErrorPolicy::from_config(&props(&[(TOLERANCE, "all"), (DLQ_TOPIC, "dlq")])).unwrap();
        let plain = without.handle(failed(), ConnectError::fatal("x")).unwrap().unwrap();
        assert_eq!(plain.record.headers.len(), 1, "context headers only when enabled");
        let skip = ErrorPolicy::from_config(&props(&[(TOLERANCE, "all")])).unwrap();
        assert!(skip.handle(failed(), ConnectError::fatal("x")).unwrap().is_none());
    }

    #[tokio::test]
    async fn retriable_failures_are_retried_within_the_timeout() {
        let policy = ErrorPolicy::from_config(&props(&[(RETRY_TIMEOUT, "5000"), (RETRY_DELAY_MAX, "10")])).unwrap();
        let mut calls = 0;
        let v = policy
            .with_retries(|| {
                calls += 1;
                if calls < 3 {
                    Err(ConnectError::retriable("later"))
                } else {
                    Ok(42)
                }
            })
            .await
            .unwrap();
        assert_eq!((v, calls), (42, 3));
        let none = ErrorPolicy::default();
        let mut calls = 0;
        let err = none
            .with_retries(|| -> ConnectResult<()> {
                calls += 1;
                Err(ConnectError::retriable("later"))
            })
            .await
            .unwrap_err();
        assert!(err.is_retriable());
        assert_eq!(calls, 1, "errors.retry.timeout=0 means no retries");
    }
}
