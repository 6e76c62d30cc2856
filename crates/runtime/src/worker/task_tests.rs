//! The worker's supervision of tasks, with a test connector whose task fails, retries or
//! blocks on command, and a listener that records every state it went through.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::AtomicU32;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use sluice_api::{ConfigDef, Connector, ConnectorContext, ConnectorKind, ConnectResult, SourceRecord, SourceTask};

use super::*;
use crate::log::embedded::{EmbeddedLog, EmbeddedOptions};
use crate::worker::restart::FailureClass;

/// What the test task does at its next `poll` (or `start`, for `StartFails`).
#[derive(Debug, Clone, Copy)]
enum Step {
    Fatal,
    Permanent,
    Retriable,
    StartFails,
}

#[derive(Default)]
struct Control {
    script: Mutex<VecDeque<Step>>,
    starts: AtomicU32,
    polls: AtomicU32,
}

/// The controls of every test connector, by connector name.
static CONTROLS: Mutex<BTreeMap<String, Arc<Control>>> = Mutex::new(BTreeMap::new());

fn control(name: &str, script: &[Step]) -> Arc<Control> {
    let c = Arc::new(Control { script: Mutex::new(script.iter().copied().collect()), ..Default::default() });
    CONTROLS.lock().unwrap().insert(name.to_owned(), c.clone());
    c
}

struct Scripted;

#[async_trait]
impl Connector for Scripted {
    fn config_def(&self) -> ConfigDef {
        ConfigDef::new()
    }
    async fn start(&mut self, _props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        Ok(())
    }
    async fn task_configs(&mut self, _max: usize) -> ConnectResult<Vec<Props>> {
        Ok(vec![Props::new()])
    }
    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }
    fn create_task(&self) -> Task {
        Task::Source(Box::new(ScriptedTask { control: None }))
    }
}

struct ScriptedTask {
    control: Option<Arc<Control>>,
}

impl ScriptedTask {
    fn next(&self) -> Option<Step> {
        self.control.as_ref().and_then(|c| c.script.lock().unwrap().pop_front())
    }
}

#[async_trait]
impl SourceTask for ScriptedTask {
    async fn start(&mut self, ctx: SourceTaskContext) -> ConnectResult<()> {
        let c = CONTROLS.lock().unwrap().get(&ctx.connector).cloned().expect("a control per test connector");
        c.starts.fetch_add(1, Ordering::SeqCst);
        self.control = Some(c.clone());
        let front = c.script.lock().unwrap().front().copied();
        if let Some(Step::StartFails) = front {
            c.script.lock().unwrap().pop_front();
            return Err(ConnectError::fatal("the task could not start"));
        }
        Ok(())
    }
    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>> {
        self.control.as_ref().expect("started").polls.fetch_add(1, Ordering::SeqCst);
        match self.next() {
            Some(Step::Fatal) => Err(ConnectError::fatal("a record the task cannot handle")),
            Some(Step::Permanent) => Err(ConnectError::permanent("the replication slot is gone")),
            Some(Step::Retriable) => Err(ConnectError::retriable("the database is away")),
            Some(Step::StartFails) | None => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(Vec::new())
            }
        }
    }
}

const PLUGIN: ConnectorPlugin = ConnectorPlugin {
    class: "test.Scripted",
    aliases: &[],
    kind: ConnectorKind::Source,
    version: "0",
    task_class: "test.ScriptedTask",
    create: || Box::new(Scripted),
};

/// Every state each task went through, in order.
#[derive(Default)]
struct Recorded {
    states: Mutex<Vec<(State, Option<String>)>>,
}

impl TaskListener for Recorded {
    fn on_state(&self, _id: &ConnectorTaskId, state: State, trace: Option<String>) {
        self.states.lock().unwrap().push((state, trace));
    }
}

impl Recorded {
    fn states(&self) -> Vec<State> {
        self.states.lock().unwrap().iter().map(|(s, _)| *s).collect()
    }
}

struct Fixture {
    worker: Arc<Worker>,
    recorded: Arc<Recorded>,
    _target: watch::Sender<TargetState>,
    target: watch::Receiver<TargetState>,
    _dir: tempfile::TempDir,
}

async fn fixture(worker_props: &[(&str, &str)]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut props: Props = worker_props.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    props.insert("data.dir".into(), dir.path().display().to_string());
    let config = WorkerConfig::from_sources(props, Vec::new()).unwrap();
    let log: Arc<dyn Log> = Arc::new(EmbeddedLog::open(dir.path(), EmbeddedOptions::default()).unwrap());
    let offsets = Arc::new(OffsetStore::open(log.clone(), "offsets", 1, -1).await.unwrap());
    let status = Arc::new(StatusStore::open(log.clone(), "status", 1, -1).await.unwrap());
    let recorded = Arc::new(Recorded::default());
    let mut worker = Worker::new(config, log, offsets, status);
    worker.listener = recorded.clone();
    let (tx, rx) = watch::channel(TargetState::Started);
    Fixture { worker: Arc::new(worker), recorded, _target: tx, target: rx, _dir: dir }
}

impl Fixture {
    fn start(&self, name: &str, config: &[(&str, &str)]) -> TaskHandle {
        let mut c: Props = config.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        c.insert("connector.class".into(), PLUGIN.class.into());
        c.insert("name".into(), name.into());
        c.insert("key.converter".into(), "org.apache.kafka.connect.storage.StringConverter".into());
        c.insert("value.converter".into(), "org.apache.kafka.connect.storage.StringConverter".into());
        self.worker.start_task(TaskSpec {
            id: ConnectorTaskId { connector: name.into(), task: 0 },
            plugin: PLUGIN,
            config: c,
            task_props: Props::new(),
            task_count: 1,
            target: self.target.clone(),
        })
    }

    fn record(&self, name: &str) -> crate::worker::restart::RestartRecord {
        self.worker.restarts.of(name).1.remove(&0).expect("a restart record of task 0")
    }
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

const FAST: &[(&str, &str)] = &[("sluice.restart.min.backoff.ms", "40"), ("sluice.restart.max.backoff.ms", "80")];

#[tokio::test]
async fn a_failed_task_is_restarted_as_a_new_instance_after_the_backoff() {
    let f = fixture(&[]).await;
    let c = control("restarts", &[Step::Fatal, Step::Fatal]);
    let handle = f.start("restarts", FAST);
    until("two restarts and a third start", || c.starts.load(Ordering::SeqCst) == 3 && c.polls.load(Ordering::SeqCst) > 3).await;
    assert_eq!(
        f.recorded.states(),
        [State::Running, State::Failed, State::Restarting, State::Running, State::Failed, State::Restarting, State::Running]
    );
    // RESTARTING keeps the failure's trace, so the status says why.
    let restarting = f.recorded.states.lock().unwrap()[2].1.clone().unwrap();
    assert!(restarting.contains("a record the task cannot handle"), "{restarting}");
    let r = f.record("restarts");
    assert_eq!((r.count, r.total, r.state), (2, 2, "running"));
    assert_eq!(r.last_error_class, Some(FailureClass::Error));
    assert!(r.last_restart.is_some() && r.next_attempt.is_none());
    handle.shutdown.cancel();
    handle.join.await.unwrap();
}

#[tokio::test]
async fn a_permanent_failure_stays_failed_with_no_restart() {
    let f = fixture(&[]).await;
    let c = control("permanent", &[Step::Permanent]);
    let handle = f.start("permanent", FAST);
    tokio::time::timeout(Duration::from_secs(10), handle.join).await.expect("supervision ends").unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(c.starts.load(Ordering::SeqCst), 1);
    assert_eq!(f.recorded.states(), [State::Running, State::Failed]);
    let r = f.record("permanent");
    assert_eq!((r.state, r.last_error_class, r.total), ("failed", Some(FailureClass::Fatal), 0));
    assert!(r.reason.unwrap().contains("permanent"));
}

#[tokio::test]
async fn restart_policy_never_on_the_worker_leaves_failures_to_the_user() {
    let f = fixture(&[("restart.policy", "never")]).await;
    let c = control("never", &[Step::Fatal]);
    let handle = f.start("never", FAST);
    tokio::time::timeout(Duration::from_secs(10), handle.join).await.expect("supervision ends").unwrap();
    assert_eq!(c.starts.load(Ordering::SeqCst), 1);
    assert_eq!(f.recorded.states(), [State::Running, State::Failed]);
    assert_eq!(f.record("never").reason, Some("restart.policy is never"));

    // The connector's own key overrides the worker's.
    let c = control("override", &[Step::Fatal]);
    let mut config = FAST.to_vec();
    config.push(("sluice.restart.policy", "on-failure"));
    let handle = f.start("override", &config);
    until("a restart", || c.starts.load(Ordering::SeqCst) == 2).await;
    handle.shutdown.cancel();
    handle.join.await.unwrap();
}

#[tokio::test]
async fn restarts_stop_after_max_retries() {
    let f = fixture(&[]).await;
    let c = control("limited", &[Step::StartFails, Step::StartFails, Step::StartFails, Step::StartFails]);
    let mut config = FAST.to_vec();
    config.push(("sluice.restart.max.retries", "2"));
    let handle = f.start("limited", &config);
    tokio::time::timeout(Duration::from_secs(10), handle.join).await.expect("supervision ends").unwrap();
    assert_eq!(c.starts.load(Ordering::SeqCst), 3, "the first start and two restarts");
    let r = f.record("limited");
    assert_eq!((r.count, r.total, r.state), (2, 2, "failed"));
    assert!(r.last_error.unwrap().contains("could not start"));
}

#[tokio::test]
async fn errors_max_retries_turns_a_long_outage_into_a_restart() {
    let f = fixture(&[]).await;
    // Three retriable failures in a row: with errors.max.retries=2 the task gives up at the
    // third, the worker restarts it, and it runs.
    let c = control("outage", &[Step::Retriable, Step::Retriable, Step::Retriable]);
    let mut config = FAST.to_vec();
    config.push(("errors.max.retries", "2"));
    let handle = f.start("outage", &config);
    until("a restart", || c.starts.load(Ordering::SeqCst) == 2).await;
    let r = f.record("outage");
    assert_eq!(r.last_error_class, Some(FailureClass::Retriable));
    assert!(r.last_error.unwrap().contains("errors.max.retries=2"));
    handle.shutdown.cancel();
    handle.join.await.unwrap();

    // Unset, retriable failures are waited out by the task itself: no failure, no restart.
    let c = control("patient", &[Step::Retriable, Step::Retriable, Step::Retriable]);
    let handle = f.start("patient", FAST);
    until("polls past the outage", || c.polls.load(Ordering::SeqCst) > 4).await;
    assert_eq!(c.starts.load(Ordering::SeqCst), 1);
    assert!(f.worker.restarts.of("patient").1.is_empty());
    handle.shutdown.cancel();
    handle.join.await.unwrap();
}

#[tokio::test]
async fn stopping_a_task_that_waits_to_restart_ends_it_at_once() {
    let f = fixture(&[]).await;
    let c = control("waiting", &[Step::Fatal]);
    let handle = f.start("waiting", &[("sluice.restart.min.backoff.ms", "60000")]);
    until("RESTARTING", || f.recorded.states().contains(&State::Restarting)).await;
    assert_eq!(f.record("waiting").state, "waiting");
    assert!(f.record("waiting").next_attempt.is_some());
    handle.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(2), handle.join).await.expect("stops without waiting out the backoff").unwrap();
    assert_eq!(c.starts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_new_start_begins_a_new_count() {
    let f = fixture(&[]).await;
    let c = control("count", &[Step::Fatal]);
    let handle = f.start("count", FAST);
    until("a restart", || c.starts.load(Ordering::SeqCst) == 2).await;
    assert_eq!(f.record("count").count, 1);
    handle.shutdown.cancel();
    handle.join.await.unwrap();
    // As a restart through REST does.
    let handle = f.start("count", FAST);
    assert_eq!(f.record("count").count, 0);
    handle.shutdown.cancel();
    handle.join.await.unwrap();
}
