//! The exactly-once loop against a recording [`Transactional`], with no broker: what is
//! sent in which transaction, and that offsets move only when a commit succeeds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::json;
use sluice_api::{Headers, Props, Value};

use super::*;
use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
use crate::log::LogResult;
use crate::task::{ConverterSpec, StateReporter};

#[derive(Default)]
struct Recording {
    events: Mutex<Vec<String>>,
    fail_commit: AtomicBool,
}

struct Recorder(Arc<Recording>);

impl Recorder {
    fn push(&self, e: String) {
        self.0.events.lock().unwrap().push(e);
    }
}

#[async_trait]
impl Transactional for Recorder {
    async fn init(&self) -> LogResult<()> {
        self.push("init".into());
        Ok(())
    }
    fn begin(&self) -> LogResult<()> {
        self.push("begin".into());
        Ok(())
    }
    fn send(&self, records: &[Produce]) -> LogResult<()> {
        let topics: Vec<&str> = records.iter().map(|r| r.topic.as_str()).collect();
        self.push(format!("send {}", topics.join(",")));
        Ok(())
    }
    async fn commit(&self) -> LogResult<()> {
        if self.0.fail_commit.load(Ordering::SeqCst) {
            self.push("commit failed".into());
            return Err(crate::log::LogError::Invalid("fenced".into()));
        }
        self.push("commit".into());
        Ok(())
    }
    async fn abort(&self) -> LogResult<()> {
        self.push("abort".into());
        Ok(())
    }
}

/// Returns its batches, then stops the runner.
struct Batches {
    batches: VecDeque<Vec<i64>>,
    done: CancellationToken,
    /// Each value is `i`, then `:` and this many `x` if not zero.
    value_len: usize,
}

#[async_trait]
impl SourceTask for Batches {
    async fn start(&mut self, _ctx: SourceTaskContext) -> ConnectResult<()> {
        Ok(())
    }
    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>> {
        let Some(batch) = self.batches.pop_front() else {
            self.done.cancel();
            tokio::time::sleep(Duration::from_millis(5)).await;
            return Ok(Vec::new());
        };
        Ok(batch
            .into_iter()
            // A negative `i` is a record without a position of its own; from 1000 on, `i`
            // is an offset-only record.
            .map(|i| if i >= 1000 {
                SourceRecord::offset_only([("p".to_owned(), json!(0))].into_iter().collect(), [("i".to_owned(), json!(i))].into_iter().collect())
            } else { SourceRecord {
                source_partition: if i < 0 { SourcePartition::new() } else { [("p".to_owned(), json!(0))].into_iter().collect() },
                source_offset: if i < 0 { SourceOffset::new() } else { [("i".to_owned(), json!(i))].into_iter().collect() },
                topic: "rows".into(),
                partition: Some(0),
                key_schema: None,
                key: Value::Null,
                value_schema: None,
                value: Value::String(if self.value_len == 0 { i.to_string() } else { format!("{i}:{}", "x".repeat(self.value_len)) }),
                timestamp: Some(1),
                headers: Headers::default(),
            }})
            .collect())
    }
}

/// A runner whose target state stays STARTED while the returned sender lives.
async fn runner(
    dir: &std::path::Path,
    batches: Vec<Vec<i64>>,
    boundary: Boundary,
    rec: Arc<Recording>,
) -> (SourceRunner, CancellationToken, watch::Sender<TargetState>) {
    let log: Arc<dyn Log> = Arc::new(EmbeddedLog::open(dir, EmbeddedOptions::default()).unwrap());
    let offsets = Arc::new(OffsetStore::open(log.clone(), "offsets", 1, -1).await.unwrap());
    let status = Arc::new(StatusStore::open(log.clone(), "status", 1, -1).await.unwrap());
    let done = CancellationToken::new();
    let none = Props::new();
    let spec = |k: &str, class: &str| ConverterSpec::resolve(&none, k, (class.to_owned(), Props::new()));
    let converters = RecordConverters::build(
        &spec("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
        &spec("value.converter", "org.apache.kafka.connect.storage.StringConverter"),
        &spec("header.converter", "org.apache.kafka.connect.storage.SimpleHeaderConverter"),
    )
    .unwrap();
    let (target_tx, target) = watch::channel(TargetState::Started);
    let r = SourceRunner {
        max_retries: None,
        metrics: crate::metrics::TaskMetrics::disabled(),
        rate: None,
        id: ConnectorTaskId { connector: "c".into(), task: 0 },
        task: Box::new(Batches { batches: batches.into(), done: done.clone(), value_len: 0 }),
        ctx: SourceTaskContext {
            connector: "c".into(),
            task_id: 0,
            props: Props::new(),
            offsets: Arc::new(crate::store::offset::ConnectorOffsets { store: offsets.clone(), connector: "c".into() }),
            shutdown: CancellationToken::new(),
            gauges: Default::default(),
        },
        log,
        transforms: TransformChain::from_connector_config(&none).unwrap(),
        converters,
        errors: ErrorPolicy::from_config(&none).unwrap(),
        topic_creation: None,
        offsets,
        status,
        flush_interval: Duration::from_secs(60),
        flush_timeout: Duration::from_secs(5),
        target,
        state: StateReporter::new(|_| {}),
        exactly_once: Some(ExactlyOnce { writer: Box::new(Recorder(rec)), boundary }),
    };
    (r, done, target_tx)
}

#[tokio::test]
async fn poll_boundary_commits_each_batch_with_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recording::default());
    let (r, done, _target) = runner(dir.path(), vec![vec![1, 2], vec![3]], Boundary::Poll, rec.clone()).await;
    let offsets = r.offsets.clone();
    r.run(done).await.unwrap();
    let events = rec.events.lock().unwrap().clone();
    assert_eq!(
        events,
        ["init", "begin", "send rows,rows", "send offsets", "commit", "begin", "send rows", "send offsets", "commit"],
        "records and their offsets in one transaction per batch"
    );
    let p: SourcePartition = [("p".to_owned(), json!(0))].into_iter().collect();
    assert_eq!(offsets.get("c", &p).unwrap()["i"], json!(3));
}

#[tokio::test]
async fn interval_boundary_spans_batches() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recording::default());
    let (r, done, _target) =
        runner(dir.path(), vec![vec![1], vec![2], vec![3]], Boundary::Interval(Duration::from_secs(3600)), rec.clone()).await;
    r.run(done).await.unwrap();
    let events = rec.events.lock().unwrap().clone();
    // One transaction, committed when the task stops.
    assert_eq!(events, ["init", "begin", "send rows", "send rows", "send rows", "send offsets", "commit"]);
}

#[tokio::test]
async fn a_failed_commit_aborts_and_moves_no_offset() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recording::default());
    rec.fail_commit.store(true, Ordering::SeqCst);
    let (r, done, _target) = runner(dir.path(), vec![vec![1, 2]], Boundary::Poll, rec.clone()).await;
    let offsets = r.offsets.clone();
    let err = r.run(done).await.unwrap_err();
    assert!(err.to_string().contains("cannot commit the transaction"), "{err}");
    let events = rec.events.lock().unwrap().clone();
    assert_eq!(events, ["init", "begin", "send rows,rows", "send offsets", "commit failed", "abort"]);
    let p: SourcePartition = [("p".to_owned(), json!(0))].into_iter().collect();
    assert_eq!(offsets.get("c", &p), None, "the offsets of an uncommitted transaction are not visible");
}

/// Without exactly-once, a poll larger than MAX_APPEND_BYTES is appended in several chunks:
/// every record lands in order and the committed offset is the poll's last.
#[tokio::test]
async fn a_large_poll_is_appended_in_chunks_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, done, _target) = runner(dir.path(), Vec::new(), Boundary::Poll, Arc::new(Recording::default())).await;
    r.exactly_once = None;
    let value_len = 100_000;
    let n = (3 * MAX_APPEND_BYTES / value_len) as i64;
    r.task = Box::new(Batches { batches: vec![(0..n).collect(), vec![n]].into(), done: done.clone(), value_len });
    let (log, offsets) = (r.log.clone(), r.offsets.clone());
    r.run(done).await.unwrap();
    let tp = sluice_api::TopicPartition::new("rows", 0);
    let mut read = Vec::new();
    while (read.len() as i64) <= n {
        let batch = log.read(&tp, read.len() as i64, 1 << 20, Duration::ZERO).await.unwrap();
        assert!(!batch.is_empty(), "records missing after {}", read.len());
        read.extend(batch.into_iter().map(|s| String::from_utf8(s.record.value.unwrap()).unwrap()));
    }
    assert_eq!(read, (0..=n).map(|i| format!("{i}:{}", "x".repeat(value_len))).collect::<Vec<_>>());
    let p: SourcePartition = [("p".to_owned(), json!(0))].into_iter().collect();
    assert_eq!(offsets.get("c", &p).unwrap()["i"], json!(n));
}

/// Records without a source partition are appended like any other, but never become the
/// committed offset: the newest positioned record before them stays the position.
#[tokio::test]
async fn records_without_a_position_are_written_but_never_committed_as_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, done, _target) = runner(dir.path(), Vec::new(), Boundary::Poll, Arc::new(Recording::default())).await;
    r.exactly_once = None;
    r.task = Box::new(Batches { batches: vec![vec![-1, 2, -3], vec![-4]].into(), done: done.clone(), value_len: 0 });
    let (log, offsets) = (r.log.clone(), r.offsets.clone());
    r.run(done).await.unwrap();
    let tp = sluice_api::TopicPartition::new("rows", 0);
    let read: Vec<String> = log
        .read(&tp, 0, 1 << 20, Duration::ZERO)
        .await
        .unwrap()
        .into_iter()
        .map(|s| String::from_utf8(s.record.value.unwrap()).unwrap())
        .collect();
    assert_eq!(read, ["-1", "2", "-3", "-4"]);
    let p: SourcePartition = [("p".to_owned(), json!(0))].into_iter().collect();
    assert_eq!(offsets.get("c", &p).unwrap()["i"], json!(2));
    assert_eq!(offsets.get("c", &SourcePartition::new()), None, "no offset is stored under an empty partition");
}

/// An offset-only record writes nothing and moves its partition's offset, after the records
/// before it, with and without exactly-once.
#[tokio::test]
async fn an_offset_only_record_writes_nothing_and_moves_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, done, _target) = runner(dir.path(), Vec::new(), Boundary::Poll, Arc::new(Recording::default())).await;
    r.exactly_once = None;
    r.task = Box::new(Batches { batches: vec![vec![1, 1002], vec![1003], vec![4]].into(), done: done.clone(), value_len: 0 });
    let (log, offsets) = (r.log.clone(), r.offsets.clone());
    r.run(done).await.unwrap();
    let tp = sluice_api::TopicPartition::new("rows", 0);
    let read: Vec<String> =
        log.read(&tp, 0, 1 << 20, Duration::ZERO).await.unwrap().into_iter().map(|s| String::from_utf8(s.record.value.unwrap()).unwrap()).collect();
    assert_eq!(read, ["1", "4"]);
    let p: SourcePartition = [("p".to_owned(), json!(0))].into_iter().collect();
    assert_eq!(offsets.get("c", &p).unwrap()["i"], json!(4));

    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recording::default());
    let (r, done, _target) = runner(dir.path(), vec![vec![1, 1002], vec![1003]], Boundary::Poll, rec.clone()).await;
    let offsets = r.offsets.clone();
    r.run(done).await.unwrap();
    let events = rec.events.lock().unwrap().clone();
    assert_eq!(
        events,
        ["init", "begin", "send rows", "send offsets", "commit", "begin", "send ", "send offsets", "commit"],
        "the offset-only record's offset is committed in its transaction, nothing is sent for it"
    );
    assert_eq!(offsets.get("c", &p).unwrap()["i"], json!(1003));
}

/// Fails `start` with `failures` (retriable or not, in order), then behaves as `inner`.
struct StartsAfter {
    failures: VecDeque<ConnectError>,
    starts: Arc<Mutex<usize>>,
    inner: Batches,
}

#[async_trait]
impl SourceTask for StartsAfter {
    async fn start(&mut self, ctx: SourceTaskContext) -> ConnectResult<()> {
        *self.starts.lock().unwrap() += 1;
        match self.failures.pop_front() {
            Some(e) => Err(e),
            None => self.inner.start(ctx).await,
        }
    }
    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>> {
        self.inner.poll().await
    }
}

/// A start that fails for a retriable reason (a database not reachable yet) is tried again
/// with backoff while the task shows RUNNING with the failure as its trace, and the task then
/// runs; a fatal start failure fails the task at once, with no second attempt.
#[tokio::test]
async fn a_retriable_start_failure_is_retried_and_a_fatal_one_is_not() {
    for exactly_once in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, done, _target) = runner(dir.path(), Vec::new(), Boundary::Poll, Arc::new(Recording::default())).await;
        if !exactly_once {
            r.exactly_once = None;
        }
        let starts = Arc::new(Mutex::new(0));
        let failures = [ConnectError::retriable("could not connect to db:5432"), ConnectError::retriable("could not connect to db:5432")];
        r.task = Box::new(StartsAfter {
            failures: failures.into(),
            starts: starts.clone(),
            inner: Batches { batches: vec![vec![1]].into(), done: done.clone(), value_len: 0 },
        });
        let states = Arc::new(Mutex::new(Vec::new()));
        let seen = states.clone();
        r.state = StateReporter::new(move |s| seen.lock().unwrap().push(s)).holding(Duration::ZERO);
        r.run(done).await.unwrap();
        assert_eq!(*starts.lock().unwrap(), 3, "two failed starts and one that succeeded (exactly once: {exactly_once})");
        let states = states.lock().unwrap().clone();
        assert!(
            matches!(states.first(), Some(TaskState::Retrying(trace)) if trace.contains("could not connect to db:5432")),
            "{states:?}"
        );
        assert_eq!(states.last(), Some(&TaskState::Running), "{states:?}");

        let dir = tempfile::tempdir().unwrap();
        let (mut r, done, _target) = runner(dir.path(), Vec::new(), Boundary::Poll, Arc::new(Recording::default())).await;
        if !exactly_once {
            r.exactly_once = None;
        }
        let starts = Arc::new(Mutex::new(0));
        r.task = Box::new(StartsAfter {
            failures: [ConnectError::fatal("password authentication failed")].into(),
            starts: starts.clone(),
            inner: Batches { batches: VecDeque::new(), done: done.clone(), value_len: 0 },
        });
        let err = r.run(done).await.unwrap_err();
        assert!(err.to_string().contains("password authentication failed"), "{err}");
        assert_eq!(*starts.lock().unwrap(), 1, "a fatal failure is not retried");
    }
}
