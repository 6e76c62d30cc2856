//! Group membership: workers with the same `group.id` form one Connect cluster through the
//! broker's group coordinator (protocol type `connect`; eager and incremental cooperative
//! protocols).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_runtime::herder::group::member::{GroupMember, GroupWorker};
use sluice_runtime::herder::group::protocol::{Assignment, WorkerState};
use sluice_runtime::herder::group::GroupSettings;
use sluice_runtime::herder::ConnectorTaskId;
use sluice_tests::{eventually, json, read_lines, Fault, FaultProxy, KafkaBroker, Launch, Worker};
use tokio_util::sync::CancellationToken;

/// A worker that records what it was given; a connector with 4 tasks and one with 1.
struct Recorder {
    url: String,
    /// The current assignment (generation, whole assignment); None before the first.
    held: Mutex<Option<(i32, Assignment)>>,
    /// Connectors and tasks stopped so far.
    revoked: Mutex<Vec<String>>,
    /// Every scheduled-rebalance delay handed to this member.
    delays: Mutex<Vec<i32>>,
}

impl Recorder {
    fn new(i: usize) -> Arc<Self> {
        Arc::new(Recorder {
            url: format!("http://w{i}:8083/"),
            held: Mutex::new(None),
            revoked: Mutex::default(),
            delays: Mutex::default(),
        })
    }

    fn units(&self) -> BTreeSet<String> {
        let held = self.held.lock().unwrap();
        let a = held.as_ref().map(|(_, a)| a.clone()).unwrap_or_default();
        a.connectors.iter().cloned().chain(a.tasks.iter().map(|t| format!("{}-{}", t.connector, t.task))).collect()
    }
}

#[async_trait::async_trait]
impl GroupWorker for Recorder {
    async fn worker_state(&self) -> WorkerState {
        WorkerState { url: self.url.clone(), config_offset: 5, assignment: None }
    }
    async fn revoke(&self, connectors: &[String], tasks: &[ConnectorTaskId]) {
        let mut held = self.held.lock().unwrap();
        if let Some((_, a)) = held.as_mut() {
            a.connectors.retain(|c| !connectors.contains(c));
            a.tasks.retain(|t| !tasks.contains(t));
        }
        let mut revoked = self.revoked.lock().unwrap();
        revoked.extend(connectors.iter().cloned());
        revoked.extend(tasks.iter().map(|t| format!("{}-{}", t.connector, t.task)));
    }
    async fn configured(&self) -> (i64, BTreeMap<String, u32>) {
        (5, [("src".to_owned(), 4), ("sink".to_owned(), 1)].into_iter().collect())
    }
    async fn assigned(&self, generation: i32, _member: &str, assignment: &Assignment) {
        *self.held.lock().unwrap() = Some((generation, assignment.clone()));
        self.delays.lock().unwrap().push(assignment.delay);
    }
}

fn settings(bootstrap: &str, group: &str, protocol: &str) -> GroupSettings {
    let props: BTreeMap<String, String> = [
        ("bootstrap.servers", bootstrap),
        ("group.id", group),
        ("connect.protocol", protocol),
        ("scheduled.rebalance.max.delay.ms", "2000"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
        ("rebalance.timeout.ms", "10000"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    GroupSettings::from_worker_props(&props).unwrap()
}

/// The workers' current assignments when all of them hold one of the same generation.
fn settled(workers: &[Arc<Recorder>]) -> Option<Vec<Assignment>> {
    let held: Vec<Option<(i32, Assignment)>> = workers.iter().map(|w| w.held.lock().unwrap().clone()).collect();
    let gens: Vec<i32> = held.iter().map(|h| h.as_ref().map(|(g, _)| *g)).collect::<Option<Vec<_>>>()?;
    if gens.windows(2).any(|w| w[0] != w[1]) {
        return None;
    }
    Some(held.into_iter().map(|h| h.unwrap().1).collect())
}

async fn wait_settled(workers: &[Arc<Recorder>], timeout: Duration) -> Vec<Assignment> {
    let start = Instant::now();
    loop {
        if let Some(a) = settled(workers) {
            let units: usize = a.iter().map(|a| a.connectors.len() + a.tasks.len()).sum();
            if units == 7 {
                return a;
            }
        }
        assert!(start.elapsed() < timeout, "the group did not settle within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Three members join one `connect` group; the leader's assignment reaches every member
/// (disjoint, complete, same leader URL). One member leaves cleanly: the two left rebalance
/// and cover everything. Eager: everyone gives up everything on the way. Cooperative: the
/// survivors keep what they ran, and the leaver's work waits for the scheduled delay.
fn three_members_share_and_rebalance_when_one_leaves(protocol: &str) {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let workers: Vec<Arc<Recorder>> = (0..3).map(Recorder::new).collect();
        let tokens: Vec<CancellationToken> = (0..3).map(|_| CancellationToken::new()).collect();
        let mut joins = Vec::new();
        for (w, t) in workers.iter().zip(&tokens) {
            let member = GroupMember::new(settings(&broker.bootstrap, "sluice-group-test", protocol));
            joins.push(tokio::spawn(member.run(w.clone() as Arc<dyn GroupWorker>, t.clone())));
        }
        let a = wait_settled(&workers, Duration::from_secs(30)).await;
        let leader_url = &a[0].leader_url;
        assert!(a.iter().all(|x| &x.leader_url == leader_url && x.leader == a[0].leader), "{a:?}");
        assert!(workers.iter().any(|w| &w.url == leader_url), "the leader URL is a member's URL: {leader_url}");
        assert!(a.iter().all(|x| x.tasks.len() + x.connectors.len() >= 1), "spread over three members: {a:?}");
        let expected_version = match protocol {
            "eager" => 0,
            "compatible" => 1,
            _ => 2,
        };
        assert!(a.iter().all(|x| x.version == expected_version), "{protocol} joins with version {expected_version}: {a:?}");
        let mut all: Vec<String> =
            a.iter().flat_map(|x| x.tasks.iter().map(|t| format!("{}-{}", t.connector, t.task)).chain(x.connectors.clone())).collect();
        all.sort();
        assert_eq!(all, ["sink", "sink-0", "src", "src-0", "src-1", "src-2", "src-3"]);
        // A member that is not the leader leaves (LeaveGroup), so the leader keeps its view
        // of the previous assignment; the others rejoin at once, no session timeout.
        let leaver = workers.iter().position(|w| &w.url != leader_url).unwrap();
        let survivors: Vec<Arc<Recorder>> = workers.iter().enumerate().filter(|(i, _)| *i != leaver).map(|(_, w)| w.clone()).collect();
        let kept: Vec<BTreeSet<String>> = survivors.iter().map(|w| w.units()).collect();
        for w in &workers {
            w.revoked.lock().unwrap().clear();
        }
        tokens[leaver].cancel();
        joins.remove(leaver).await.unwrap();
        let a = wait_settled(&survivors, Duration::from_secs(20)).await;
        assert!(a.iter().all(|x| x.tasks.len() + x.connectors.len() >= 3), "{a:?}");
        if protocol == "eager" {
            assert!(!survivors[0].revoked.lock().unwrap().is_empty(), "eager: a member gives up its work before rejoining");
        } else {
            for (w, kept) in survivors.iter().zip(&kept) {
                assert!(w.revoked.lock().unwrap().is_empty(), "cooperative: a survivor stops nothing: {:?}", w.revoked);
                assert!(kept.is_subset(&w.units()), "a survivor keeps what it ran: {kept:?} then {:?}", w.units());
            }
            assert!(
                survivors.iter().all(|w| w.delays.lock().unwrap().contains(&2000)),
                "the leaver's work waited for scheduled.rebalance.max.delay.ms"
            );
        }
        for t in &tokens {
            t.cancel();
        }
        for j in joins {
            j.await.unwrap();
        }
    });
}

#[test]
fn eager_members_share_connectors_and_tasks_and_rebalance_when_one_leaves() {
    three_members_share_and_rebalance_when_one_leaves("eager");
}

#[test]
fn cooperative_members_keep_their_work_when_one_leaves() {
    three_members_share_and_rebalance_when_one_leaves("sessioned");
}

/// A member that vanishes without LeaveGroup (a SIGKILLed worker) is expired by the
/// coordinator after `session.timeout.ms`, and the survivor is given everything once the
/// scheduled rebalance delay has passed. Runs on
/// tansu: noida 0.2.3 never expires such a member (tests/services/kafka-quirks/
/// group-session-expiry.py), so a group on noida stays stuck until the member returns.
#[test]
fn a_vanished_member_is_expired_and_its_work_reassigned() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start_kind(&dir.path().join("broker"), "tansu");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let workers: Vec<Arc<Recorder>> = (0..2).map(Recorder::new).collect();
        let mut joins = Vec::new();
        for w in &workers {
            let member = GroupMember::new(settings(&broker.bootstrap, "sluice-expiry-test", "compatible"));
            joins.push(tokio::spawn(member.run(w.clone() as Arc<dyn GroupWorker>, CancellationToken::new())));
        }
        wait_settled(&workers, Duration::from_secs(30)).await;
        let vanished = Instant::now();
        joins[1].abort();
        let a = wait_settled(&workers[..1], Duration::from_secs(30)).await;
        eprintln!("the survivor holds everything {:?} after the other member vanished", vanished.elapsed());
        assert_eq!(a[0].connectors.len() + a[0].tasks.len(), 7);
        joins[0].abort();
    });
}

/// Connections to the coordinator that break (a cut, a broker restart) cost a member
/// nothing while it reconnects within half a session timeout: it resumes heartbeats for the
/// generation it holds, keeps its work, and the group does not rebalance (as Kafka's
/// clients rediscover a coordinator). Connections cut off for longer than that stop its
/// work, before the coordinator could hand it to another member.
#[test]
fn members_keep_their_work_across_cut_connections_and_give_it_up_when_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let proxy = FaultProxy::for_kafka(broker.bootstrap.parse().unwrap());
    let bootstrap = format!("127.0.0.1:{}", proxy.port);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let workers: Vec<Arc<Recorder>> = (0..2).map(Recorder::new).collect();
        let shutdown = CancellationToken::new();
        for w in &workers {
            let member = GroupMember::new(settings(&bootstrap, "sluice-cut-test", "compatible"));
            tokio::spawn(member.run(w.clone() as Arc<dyn GroupWorker>, shutdown.clone()));
        }
        let before = wait_settled(&workers, Duration::from_secs(30)).await;
        let generation = |w: &Recorder| w.held.lock().unwrap().as_ref().map(|(g, _)| *g);
        let generations: Vec<_> = workers.iter().map(|w| generation(w)).collect();
        let accepted = proxy.accepted();
        for _ in 0..5 {
            proxy.reset_all();
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        assert!(proxy.accepted() >= accepted + 5, "the members did not reconnect through the proxy");
        for (w, g) in workers.iter().zip(&generations) {
            assert!(w.revoked.lock().unwrap().is_empty(), "a member gave up work over a cut connection: {:?}", w.revoked.lock().unwrap());
            assert_eq!(generation(w), *g, "a cut connection made the group rebalance");
        }
        assert_eq!(settled(&workers), Some(before), "the assignment changed");

        // Nothing through for 6 s (the session timeout): the work stops within it.
        proxy.set(Fault::BlackHole);
        let cut = Instant::now();
        let mut stopped = None;
        while cut.elapsed() < Duration::from_secs(6) {
            if stopped.is_none() && workers.iter().all(|w| w.units().is_empty()) {
                stopped = Some(cut.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let stopped = stopped.expect("members cut off for a session timeout still ran their work");
        eprintln!("cut off: the members stopped their work {stopped:?} into the black hole");
        proxy.set(Fault::Pass);
        let after = wait_settled(&workers, Duration::from_secs(60)).await;
        assert_eq!(after.iter().map(|a| a.connectors.len() + a.tasks.len()).sum::<usize>(), 7);
        shutdown.cancel();
    });
}

fn cluster_props(bootstrap: &str) -> Vec<(String, String)> {
    [
        ("bootstrap.servers", bootstrap),
        ("group.id", "sluice-e2e"),
        ("config.storage.topic", "e2e-configs"),
        ("offset.storage.topic", "e2e-offsets"),
        ("status.storage.topic", "e2e-status"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "1000"),
        ("rebalance.timeout.ms", "10000"),
        ("scheduled.rebalance.max.delay.ms", "3000"),
        ("offset.flush.interval.ms", "200"),
        ("consumer.fetch.max.wait.ms", "100"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

/// [`cluster_props`] with internal topics `<prefix>-configs`, `-offsets` and `-status`.
fn cluster_props_on(bootstrap: &str, prefix: &str) -> Vec<(String, String)> {
    let mut props = cluster_props(bootstrap);
    for (key, suffix) in [("config.storage.topic", "configs"), ("offset.storage.topic", "offsets"), ("status.storage.topic", "status")] {
        if let Some(entry) = props.iter_mut().find(|(k, _)| k == key) {
            entry.1 = format!("{prefix}-{suffix}");
        }
    }
    props
}

/// POST, retried while the cluster answers 409 for a rebalance (as Connect's clients do).
fn post_settled(w: &Worker, path: &str, body: &sluice_tests::Json) -> (u16, sluice_tests::Json) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, reply) = w.post(path, body);
        if code != 409 || !reply["message"].as_str().unwrap_or_default().contains("rebalance") || Instant::now() > deadline {
            return (code, reply);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn worker_ids(status: &sluice_tests::Json) -> BTreeSet<String> {
    std::iter::once(&status["connector"])
        .chain(status["tasks"].as_array().unwrap().iter())
        .map(|s| s["worker_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Three `sluice distributed` workers with one `group.id` are one cluster: connectors and
/// tasks spread over them (statuses name different workers), a write sent to any worker is
/// applied (followers forward to the leader), every worker answers reads, and when one
/// worker stops its work moves to the others without losing a line. With the default
/// protocol (incremental cooperative) and with `connect.protocol=eager`.
#[test]
fn three_workers_share_the_work_and_take_over_from_one_that_stops() {
    three_workers_take_over(None);
}

#[test]
fn three_eager_workers_share_the_work_and_take_over_from_one_that_stops() {
    three_workers_take_over(Some("eager"));
}

fn three_workers_take_over(protocol: Option<&str>) {
    const TOTAL: usize = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    std::fs::write(&input, "").unwrap();
    let mut props = cluster_props(&broker.bootstrap);
    if let Some(p) = protocol {
        props.push(("connect.protocol".to_owned(), p.to_owned()));
    }
    let mut workers: Vec<Worker> =
        (0..3).map(|i| Worker::launch(&dir.path().join(format!("w{i}")), Launch::Distributed { props: props.clone() })).collect();

    // Created through different workers: whichever is not the leader forwards.
    let (code, body) = post_settled(
        &workers[1],
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "e2e-lines"}}),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = post_settled(
        &workers[2],
        "/connectors",
        &json!({"name": "sink", "config": {"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "e2e-lines", "tasks.max": "3"}}),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = post_settled(
        &workers[0],
        "/connectors",
        &json!({"name": "sink", "config": {"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "e2e-lines"}}),
    );
    assert_eq!(code, 409, "a duplicate is refused wherever it is sent: {body}");
    for w in &workers {
        w.wait_running("src", 1);
        w.wait_running("sink", 3);
        let (_, list) = w.get("/connectors");
        assert_eq!(list, json!(["sink", "src"]), "every worker answers reads from the shared state");
    }
    let status = workers[0].wait_running("sink", 3);
    let mut owners = worker_ids(&status);
    owners.extend(worker_ids(&workers[0].wait_running("src", 1)));
    assert!(owners.len() >= 2, "connectors and tasks spread over the workers: {owners:?}");

    let mut f = std::fs::OpenOptions::new().append(true).open(&input).unwrap();
    f.write_all((0..TOTAL / 2).map(|i| format!("line-{i:06}\n")).collect::<String>().as_bytes()).unwrap();
    eventually(Duration::from_secs(30), "the first half in the output", || read_lines(&output).len() >= TOTAL / 2);

    // The worker running the source stops (SIGTERM: LeaveGroup); the others take over. It
    // stops between rounds (see `wait_quiet`).
    wait_quiet(&workers, Duration::from_secs(3));
    let src_owner = workers[0].get("/connectors/src/status").1["tasks"][0]["worker_id"].as_str().unwrap().to_owned();
    let victim = workers.iter().position(|w| format!("127.0.0.1:{}", w.port) == src_owner).expect("the source runs on one of the workers");
    let stopped = Instant::now();
    workers[victim].terminate();
    let survivor = &workers[(victim + 1) % 3];
    survivor.wait_for("/connectors/src/status", Duration::from_secs(30), |code, b| {
        code == 200 && b["tasks"][0]["state"] == "RUNNING" && b["tasks"][0]["worker_id"] != src_owner.as_str()
    });
    survivor.wait_running("sink", 3);
    eprintln!("the source moved off {src_owner} {:?} after it stopped", stopped.elapsed());
    f.write_all((TOTAL / 2..TOTAL).map(|i| format!("line-{i:06}\n")).collect::<String>().as_bytes()).unwrap();
    eventually(Duration::from_secs(30), "every line in the output", || {
        read_lines(&output).into_iter().collect::<BTreeSet<_>>().len() >= TOTAL
    });
    let out = read_lines(&output);
    let unique: BTreeSet<&String> = out.iter().collect();
    assert_eq!(unique.len(), TOTAL);
    eprintln!("{TOTAL} lines, {} delivered ({} duplicates)", out.len(), out.len() - TOTAL);

    // A write sent to a survivor that is not the leader is applied too.
    let (code, body) = survivor.delete("/connectors/src");
    assert_eq!(code, 204, "{body}");
    for (i, w) in workers.iter().enumerate() {
        if i != victim {
            w.wait_for("/connectors", Duration::from_secs(20), |_, b| *b == json!(["sink"]));
        }
    }
}

/// Waits (up to 60 s) until no worker has logged a group round for `quiet`.
fn wait_quiet(workers: &[Worker], quiet: Duration) {
    let rounds = || -> usize {
        workers.iter().map(|w| sluice_tests::strip_ansi(&w.output()).lines().filter(|l| l.contains("group::member")).count()).sum()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut seen, mut since) = (rounds(), Instant::now());
    while since.elapsed() < quiet {
        assert!(Instant::now() < deadline, "the group did not settle: a round at least every {quiet:?} for 60 s");
        std::thread::sleep(Duration::from_millis(100));
        let now = rounds();
        if now != seen {
            (seen, since) = (now, Instant::now());
        }
    }
}

/// `sluice distributed` with these properties, expected to fail at start: its output.
fn failing_start(dir: &std::path::Path, props: &[(String, String)]) -> String {
    let mut text = format!("listeners=http://127.0.0.1:{}\n", sluice_tests::free_port());
    for (k, v) in props {
        text.push_str(&format!("{k}={v}\n"));
    }
    sluice_tests::failing_start("distributed", dir, &text, &[], Duration::from_secs(60))
}

/// The internal topics are created with `*.storage.replication.factor`: on this one-broker
/// cluster a factor of 3 stops the worker at start with the broker's reason and the topic
/// named, a factor of 1 works, and 0 is refused naming the key.
#[test]
fn storage_replication_factors_reach_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    // Each worker below is its own cluster (own group and topics).
    let props_for = |n: &str, key: &str, factor: &str| -> Vec<(String, String)> {
        let mut props: Vec<(String, String)> = cluster_props(&broker.bootstrap)
            .into_iter()
            .map(|(k, v)| match k.as_str() {
                "group.id" | "config.storage.topic" | "offset.storage.topic" | "status.storage.topic" => (k, format!("{v}-{n}")),
                _ => (k, v),
            })
            .collect();
        props.push((key.to_owned(), factor.to_owned()));
        props
    };
    let out = failing_start(&dir.path().join("a"), &props_for("a", "config.storage.replication.factor", "3")).to_lowercase();
    assert!(out.contains("e2e-configs-a") && out.contains("replication factor"), "{out}");

    let out = failing_start(&dir.path().join("c"), &props_for("c", "status.storage.replication.factor", "0"));
    assert!(out.contains("status.storage.replication.factor"), "{out}");

    let mut props = props_for("b", "config.storage.replication.factor", "1");
    props.push(("offset.storage.replication.factor".into(), "1".into()));
    props.push(("status.storage.replication.factor".into(), "1".into()));
    let w = Worker::launch(&dir.path().join("b"), Launch::Distributed { props });
    let (code, _) = w.get("/connectors");
    assert_eq!(code, 200);
}

/// The member id a worker last joined its group with, from its log.
fn member_id(w: &Worker) -> String {
    let out = sluice_tests::strip_ansi(&w.output());
    let line = out.lines().rev().find(|l| l.contains("joined the group")).expect("the worker joined its group");
    let id = line.split("member_id=").nth(1).and_then(|r| r.split_whitespace().next()).expect("member_id in the join line");
    id.trim_matches('"').to_owned()
}

/// `(task, id)` of each bench row a FileStreamSink wrote (`Struct{id=5,task=2,…}`).
fn bench_rows(path: &std::path::Path) -> Vec<(i64, i64)> {
    let field = |line: &str, name: &str| -> Option<i64> {
        let rest = line.split(&format!("{name}=")).nth(1)?;
        rest.split([',', '}']).next()?.parse().ok()
    };
    read_lines(path).iter().filter_map(|l| Some((field(l, "task")?, field(l, "id")?))).collect()
}

fn owners(status: &sluice_tests::Json) -> Vec<String> {
    status["tasks"].as_array().unwrap().iter().map(|t| t["worker_id"].as_str().unwrap().to_owned()).collect()
}

/// The issue's "done means" through the real binary, with the default protocol (incremental
/// cooperative): three workers run a 4-task datagen source and a 2-task file sink spread
/// over them. One worker is SIGKILLed: its work stays unassigned for
/// `scheduled.rebalance.max.delay.ms`, then runs on the survivors, and the sink's file holds
/// every generated row (duplicates counted and printed: the killed tasks' uncommitted
/// progress is redone). A fourth worker then receives a share of the tasks.
///
/// noida 0.2.3 never expires a member that stops heartbeating (tests/services/kafka-quirks/
/// README.md), so after the session timeout this test removes the killed worker's member
/// from the group itself, standing in for the broker's session expiry. Sink tasks read
/// with assigned partitions, not as group members, so there is nothing else to expire.
#[test]
fn a_sigkilled_workers_tasks_move_to_the_survivors_after_the_scheduled_delay() {
    const PER_TASK: i64 = 3_000;
    const DELAY_MS: u64 = 8_000;
    const SESSION_MS: u64 = 6_000;
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let output = dir.path().join("out.txt");
    let mut props: Vec<(String, String)> = cluster_props(&broker.bootstrap)
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "group.id" => (k, "sluice-kill".to_owned()),
            "scheduled.rebalance.max.delay.ms" => (k, DELAY_MS.to_string()),
            "session.timeout.ms" => (k, SESSION_MS.to_string()),
            _ => (k, v),
        })
        .collect();
    props.retain(|(k, _)| k != "connect.protocol");
    let mut workers: Vec<Worker> =
        (0..3).map(|i| Worker::launch(&dir.path().join(format!("w{i}")), Launch::Distributed { props: props.clone() })).collect();
    let id_of = |w: &Worker| format!("127.0.0.1:{}", w.port);

    let (code, body) = post_settled(
        &workers[0],
        "/connectors",
        &json!({"name": "gen", "config": {"connector.class": "datagen", "kafka.topic": "kill-rows", "quickstart": "bench",
            "tasks.max": "4", "iterations": PER_TASK.to_string(), "records.per.second": "100", "payload.bytes": "8"}}),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = post_settled(
        &workers[1],
        "/connectors",
        &json!({"name": "sink", "config": {"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "kill-rows", "tasks.max": "2"}}),
    );
    assert_eq!(code, 201, "{body}");
    workers[0].wait_running("gen", 4);
    workers[0].wait_running("sink", 2);
    eventually(Duration::from_secs(60), "rows in the sink's file", || bench_rows(&output).len() >= 200);
    // The kill comes between rounds. Killed while a round is open, the survivors would wait in
    // JoinGroup for the dead member until the LeaveGroup below, and noida 0.2.3 does not count
    // a member waiting in JoinGroup as alive: it expires the survivors too when that wait is
    // longer than their session (a real broker keeps them), and the test would see the group
    // formed anew instead of the delay.
    wait_quiet(&workers, Duration::from_secs(3));
    let gen = workers[0].wait_running("gen", 4);
    let sink = workers[0].wait_running("sink", 2);
    let mut spread: BTreeSet<String> = owners(&gen).into_iter().collect();
    spread.extend(owners(&sink));
    eprintln!("gen tasks on {:?}, sink tasks on {:?}", owners(&gen), owners(&sink));
    assert_eq!(spread.len(), 3, "the 6 tasks run on all three workers: gen {:?}, sink {:?}", owners(&gen), owners(&sink));

    // The victim: a worker that runs source tasks and is not the leader (a new leader
    // would know no previous assignment and deal the lost work at once, as Connect's does).
    let leader = workers.iter().position(|w| w.output().contains("elected group leader")).expect("a leader");
    let victim =
        (0..3).filter(|i| *i != leader).max_by_key(|i| owners(&gen).iter().filter(|o| **o == id_of(&workers[*i])).count()).unwrap();
    let victim_id = id_of(&workers[victim]);
    let victim_member = member_id(&workers[victim]);
    let victim_gen: Vec<usize> = owners(&gen).iter().enumerate().filter(|(_, o)| **o == victim_id).map(|(i, _)| i).collect();
    eprintln!("killing {victim_id} (member {victim_member}), which runs gen tasks {victim_gen:?}");
    workers[victim].kill9();
    let killed = Instant::now();

    // Stands in for the broker's session expiry (noida never expires a member).
    std::thread::sleep(Duration::from_millis(SESSION_MS + 1_000));
    assert_eq!(broker.expire_group_member("sluice-kill", &victim_member), 0, "LeaveGroup on behalf of the killed worker");
    let expired = Instant::now();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != victim).collect();
    let leader_worker = &workers[leader];

    // The survivors rebalance at once, and are told to wait: the killed worker's tasks are
    // held back, not yet started elsewhere.
    eventually(Duration::from_secs(30), "an assignment with the scheduled delay", || {
        sluice_tests::strip_ansi(&leader_worker.output()).contains("its work stays unassigned until it returns or the delay expires")
    });
    let held_back = leader_worker.get("/connectors/gen/status").1;
    for t in &victim_gen {
        assert_ne!(
            held_back["tasks"][*t]["worker_id"].as_str().map(|w| survivors.iter().any(|s| id_of(&workers[*s]) == w)),
            Some(true),
            "task {t} is not reassigned during the delay: {held_back}"
        );
    }

    // After the delay every task runs on a survivor.
    let moved = |code: u16, b: &sluice_tests::Json| {
        code == 200
            && b["tasks"]
                .as_array()
                .is_some_and(|t| t.iter().all(|t| t["state"] == "RUNNING" && t["worker_id"].as_str() != Some(victim_id.as_str())))
    };
    leader_worker.wait_for("/connectors/gen/status", Duration::from_millis(DELAY_MS + 60_000), moved);
    leader_worker.wait_for("/connectors/sink/status", Duration::from_secs(60), moved);
    eprintln!(
        "the killed worker's tasks run on the survivors {:?} after the kill ({:?} after its member was expired; delay {DELAY_MS} ms)",
        killed.elapsed(),
        expired.elapsed()
    );
    // The status topic can show the tasks moved before the leader's log line is read back.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sluice_tests::strip_ansi(&leader_worker.output()).contains("the scheduled rebalance delay expired") {
        if Instant::now() > deadline {
            // What each worker's group membership did, to tell why the work moved early.
            let rounds: Vec<String> = workers
                .iter()
                .map(|w| {
                    let out = sluice_tests::strip_ansi(&w.output());
                    let lines: Vec<&str> = out.lines().filter(|l| l.contains("group::") || l.contains("cooperative")).collect();
                    format!("--- 127.0.0.1:{} ---\n{}", w.port, lines[lines.len().saturating_sub(25)..].join("\n"))
                })
                .collect();
            panic!(
                "the lost work did not move when the delay expired (it moved {:?} after the expiry)\n{}",
                expired.elapsed(),
                rounds.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // Every row reaches the file; rows the killed tasks produced after their last offset
    // commit are produced again (at least once), and counted.
    let total = 4 * PER_TASK as usize;
    eventually(Duration::from_secs(120), "every generated row in the sink's file", || {
        bench_rows(&output).into_iter().collect::<BTreeSet<_>>().len() >= total
    });
    let rows = bench_rows(&output);
    let unique: BTreeSet<(i64, i64)> = rows.iter().copied().collect();
    let expected: BTreeSet<(i64, i64)> = (0..4).flat_map(|t| (0..PER_TASK).map(move |i| (t, i))).collect();
    assert_eq!(unique, expected, "every row of every task, nothing else");
    eprintln!("{total} rows generated, {} written to the sink's file: {} duplicates", rows.len(), rows.len() - total);

    // A fourth worker joins: the loaded workers give up their surplus and it gets a share.
    let fourth = Worker::launch(&dir.path().join("w3"), Launch::Distributed { props: props.clone() });
    let fourth_id = id_of(&fourth);
    let gained =
        |code: u16, b: &sluice_tests::Json| code == 200 && b["tasks"].as_array().is_some_and(|t| t.iter().all(|t| t["state"] == "RUNNING"));
    eventually(Duration::from_secs(60), "tasks on the fourth worker", || {
        let gen = fourth.get("/connectors/gen/status").1;
        let sink = fourth.get("/connectors/sink/status").1;
        gained(200, &gen) && gained(200, &sink) && owners(&gen).iter().chain(owners(&sink).iter()).any(|o| *o == fourth_id)
    });
    let gen = fourth.wait_running("gen", 4);
    let sink = fourth.wait_running("sink", 2);
    let on_fourth = owners(&gen).iter().chain(owners(&sink).iter()).filter(|o| **o == fourth_id).count();
    eprintln!("the fourth worker runs {on_fourth} of the 6 tasks: gen {:?}, sink {:?}", owners(&gen), owners(&sink));
    assert!(on_fourth >= 1);

    // A task restart (sent to any worker) stops the task where it runs and starts it again.
    let restarts_of_gen_0 = |ws: &[&Worker]| -> usize {
        ws.iter()
            .map(|w| {
                sluice_tests::strip_ansi(&w.output())
                    .lines()
                    .filter(|l| l.contains("stopped the revoked connectors and tasks") && l.contains(r#"connector: "gen", task: 0 }"#))
                    .count()
            })
            .sum()
    };
    let live: Vec<&Worker> = survivors.iter().map(|i| &workers[*i]).chain(std::iter::once(&fourth)).collect();
    let before = restarts_of_gen_0(&live);
    let (code, body) = post_settled(&fourth, "/connectors/gen/tasks/0/restart", &json!({}));
    assert_eq!(code, 204, "{body}");
    eventually(Duration::from_secs(30), "gen task 0 stopped for the restart", || restarts_of_gen_0(&live) > before);
    fourth.wait_running("gen", 4);
}

/// `PUT /admin/loggers/{name}?scope=cluster` (KIP-976): the level goes through the config
/// topic to every worker of the group, and a worker that starts afterwards does not apply
/// it (as Connect's workers ignore levels written before they started).
#[test]
fn a_cluster_scoped_log_level_reaches_every_worker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let props = cluster_props_on(&broker.bootstrap, "log");
    let workers: Vec<Worker> =
        (0..2).map(|i| Worker::launch(&dir.path().join(format!("w{i}")), Launch::Distributed { props: props.clone() })).collect();
    for w in &workers {
        assert_eq!(w.get("/admin/loggers/sluice_runtime").1["level"], "INFO");
    }
    let (code, body) = workers[0].put("/admin/loggers/sluice_runtime?scope=cluster", &json!({"level": "DEBUG"}));
    assert_eq!(code, 204, "{body}");
    for w in &workers {
        w.wait_for("/admin/loggers/sluice_runtime", Duration::from_secs(20), |_, b| b["level"] == "DEBUG");
    }
    // Refused before anything is written.
    let (code, body) = workers[1].put("/admin/loggers/sluice_runtime?scope=cluster", &json!({"level": "LOUD"}));
    assert_eq!(code, 404, "{body}");
    let late = Worker::launch(&dir.path().join("w2"), Launch::Distributed { props: props.clone() });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        late.get("/admin/loggers/sluice_runtime").1["level"],
        "INFO",
        "a level written before a worker started is not applied to it"
    );
    assert!(workers[1].output().contains("cluster-wide log level applied"), "{}", workers[1].output());
}

/// 50 connectors created in a row through the three workers of a group: every create is
/// answered at once (201), none is refused with a 409 while the group rebalances for the
/// previous ones, and all 50 run.
#[test]
fn fifty_creates_in_a_row_on_three_workers_are_never_refused() {
    const N: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let props = cluster_props_on(&broker.bootstrap, "many");
    let workers: Vec<Worker> =
        (0..3).map(|i| Worker::launch(&dir.path().join(format!("w{i}")), Launch::Distributed { props: props.clone() })).collect();
    // The group has formed once: every worker knows its leader.
    for w in &workers {
        w.wait_for("/connectors", Duration::from_secs(30), |code, _| code == 200);
    }
    let (code, body) = post_settled(
        &workers[0],
        "/connectors",
        &json!({"name": "first", "config": {"connector.class": "FileStreamSink", "file": dir.path().join("first.txt").to_str().unwrap(), "topics": "many"}}),
    );
    assert_eq!(code, 201, "{body}");
    let started = Instant::now();
    let mut refused = Vec::new();
    for i in 0..N {
        let file = dir.path().join(format!("out-{i}.txt"));
        let (code, body) = workers[i % 3].post(
            "/connectors",
            &json!({"name": format!("sink-{i:02}"), "config": {"connector.class": "FileStreamSink", "file": file.to_str().unwrap(), "topics": "many"}}),
        );
        if code != 201 {
            refused.push((i, code, body));
        }
    }
    let elapsed = started.elapsed();
    eprintln!("{N} creates through 3 workers took {elapsed:?}; refused: {}", refused.len());
    assert!(refused.is_empty(), "creates refused: {refused:?}");
    for w in &workers {
        w.wait_for("/connectors", Duration::from_secs(60), |_, b| b.as_array().is_some_and(|a| a.len() == N + 1));
    }
    for i in (0..N).step_by(7) {
        workers[0].wait_running(&format!("sink-{i:02}"), 1);
    }
}
