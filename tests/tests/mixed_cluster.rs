//! sluice and real Apache Kafka Connect 4.3 (`ConnectDistributed` on the JVM, see
//! tests/services/kafka-connect.sh) in one Connect cluster, on the `sessioned` protocol that
//! both run by default, so internal requests are signed (KIP-507):
//! - a Java worker leads; a sluice worker joins; connectors created through either REST API
//!   spread over both workers and run, and both APIs show the same statuses;
//! - the Java worker stops: sluice leads, takes over its connectors and, as leader,
//!   distributes session keys (a short `inter.worker.key.ttl.ms` makes it rotate them);
//! - a Java worker joins again: the connectors it is given produce task configs that it
//!   sends, signed with sluice's key, to sluice's `POST /connectors/{c}/tasks`; sluice checks
//!   the signature and writes them, and the tasks run on the Java worker;
//! - unsigned or forged internal requests get Connect's 400 and 403.

use std::time::{Duration, Instant};

use sluice_tests::java_connect::JavaConnect;
use sluice_tests::{json, Json, KafkaBroker, Launch, Worker};

fn props(bootstrap: &str) -> Vec<(String, String)> {
    [
        ("bootstrap.servers", bootstrap),
        ("group.id", "mixed"),
        ("config.storage.topic", "mixed-configs"),
        ("offset.storage.topic", "mixed-offsets"),
        ("status.storage.topic", "mixed-status"),
        ("config.storage.replication.factor", "1"),
        ("offset.storage.replication.factor", "1"),
        ("status.storage.replication.factor", "1"),
        ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "1000"),
        ("scheduled.rebalance.max.delay.ms", "3000"),
        ("offset.flush.interval.ms", "1000"),
        ("inter.worker.key.ttl.ms", "20000"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

fn context(sluice: &Worker, java: &JavaConnect) -> String {
    let log = sluice_tests::strip_ansi(&sluice.output());
    let lines: Vec<&str> = log.lines().collect();
    format!("sluice:\n{}\nJava:\n{}", lines[lines.len().saturating_sub(40)..].join("\n"), java.log_tail(40))
}

fn wait(timeout: Duration, what: &str, mut f: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}\n{}", context());
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Every connector in `names` RUNNING with one RUNNING task, as `status` shows it; the
/// workers running the tasks.
fn running(status: &dyn Fn(&str) -> (u16, Json), names: &[String]) -> Option<Vec<String>> {
    names
        .iter()
        .map(|n| {
            let (code, s) = status(n);
            let ok = code == 200
                && s["connector"]["state"] == "RUNNING"
                && s["tasks"].as_array().is_some_and(|t| t.len() == 1)
                && s["tasks"][0]["state"] == "RUNNING";
            ok.then(|| s["tasks"][0]["worker_id"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

fn create(post: &dyn Fn(&Json) -> (u16, Json), dir: &std::path::Path, name: &str) {
    let input = dir.join(format!("{name}.txt"));
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    let body = json!({"name": name, "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": format!("mixed-{name}")}});
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let (code, reply) = post(&body);
        if code == 201 {
            return;
        }
        // Created by an earlier try whose answer did not come in time.
        if code == 409 && reply["message"].as_str().is_some_and(|m| m.contains("already exists")) {
            return;
        }
        // A rebalance under way (409, or no answer while Connect's herder is busy), or
        // Connect's REST not yet serving its resources (404).
        assert!(Instant::now() < deadline && matches!(code, 0 | 404 | 409 | 500), "creating {name}: {code} {reply}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn sluice_and_kafka_connect_share_a_sessioned_cluster_and_sign_their_requests() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let p = props(&broker.bootstrap);
    let mut java = JavaConnect::start(&dir.path().join("java1"), &p);
    let sluice = Worker::launch(&dir.path().join("sluice"), Launch::Distributed { props: p.clone() });
    let sluice_status = |n: &str| sluice.get(&format!("/connectors/{n}/status"));

    // Java leads (it joined first); connectors made through both APIs run on both workers.
    let first: Vec<String> = (0..4).map(|i| format!("a{i}")).collect();
    for (i, name) in first.iter().enumerate() {
        if i % 2 == 0 {
            create(&|b| sluice.post("/connectors", b), dir.path(), name);
        } else {
            create(&|b| java.post("/connectors", b), dir.path(), name);
        }
    }
    let mut owners = Vec::new();
    wait(
        Duration::from_secs(180),
        "the first connectors running",
        || running(&sluice_status, &first).map(|o| owners = o).is_some(),
        || context(&sluice, &java),
    );
    let sluice_id = format!("127.0.0.1:{}", sluice.port);
    assert!(owners.contains(&sluice_id) && owners.contains(&java.worker_id()), "the work spreads over both workers: {owners:?}");
    let expected = sluice_status("a0").1["tasks"][0]["worker_id"].clone();
    wait(
        Duration::from_secs(60),
        "the Java worker's API showing the same status as sluice's",
        || java.get("/connectors/a0/status").1["tasks"][0]["worker_id"] == expected,
        || context(&sluice, &java),
    );
    // What sluice runs shows with a plugin version in Connect's API too (from the status
    // records sluice writes).
    let on_sluice = first.iter().zip(&owners).find(|(_, w)| **w == sluice_id).map(|(n, _)| n.clone()).unwrap();
    let (_, s) = java.get(&format!("/connectors/{on_sluice}/status"));
    assert!(s["tasks"][0]["version"].is_string(), "Connect shows the version of a task sluice runs: {s}");
    let log = sluice_tests::strip_ansi(&sluice.output());
    assert!(log.contains("protocol=\"sessioned\""), "the group runs the sessioned protocol");

    // The Java worker leaves: sluice leads, runs everything and distributes session keys.
    java.terminate();
    wait(
        Duration::from_secs(180),
        "sluice running every connector",
        || running(&sluice_status, &first).is_some_and(|o| o.iter().all(|w| *w == sluice_id)),
        || context(&sluice, &java),
    );
    wait(
        Duration::from_secs(60),
        "sluice distributing a session key",
        || sluice_tests::strip_ansi(&sluice.output()).contains("distributed a new session key"),
        || context(&sluice, &java),
    );

    // A Java worker joins again; connectors made now and given to it send their task
    // configs to sluice, signed with sluice's key.
    let java = JavaConnect::start(&dir.path().join("java2"), &p);
    let second: Vec<String> = (0..4).map(|i| format!("b{i}")).collect();
    for name in &second {
        create(&|b| java.post("/connectors", b), dir.path(), name);
    }
    let mut owners = Vec::new();
    wait(
        Duration::from_secs(180),
        "the new connectors running",
        || running(&sluice_status, &second).map(|o| owners = o).is_some(),
        || context(&sluice, &java),
    );
    // The worker running a connector (not its task) generates its task configs.
    let connector_owners: Vec<String> =
        second.iter().map(|n| sluice_status(n).1["connector"]["worker_id"].as_str().unwrap_or_default().to_owned()).collect();
    let on_java: Vec<&String> = second.iter().zip(&connector_owners).filter(|(_, w)| **w == java.worker_id()).map(|(n, _)| n).collect();
    assert!(!on_java.is_empty(), "some new connectors run on the Java worker: {connector_owners:?}");
    let log = sluice_tests::strip_ansi(&sluice.output());
    for name in &on_java {
        assert!(
            log.lines().any(|l| l.contains("wrote task configs sent by the worker running the connector")
                && l.contains(&format!("connector=\"{name}\""))),
            "sluice wrote {name}'s task configs from the Java worker's signed request\n{}",
            context(&sluice, &java)
        );
    }

    // Unsigned and forged internal requests.
    let body = r#"[{"task.class":"org.apache.kafka.connect.file.FileStreamSourceTask"}]"#;
    let r = sluice.call("POST", "/connectors/b0/tasks", Some("application/json"), body);
    assert_eq!((r.status, r.body["message"].as_str()), (400, Some("Internal request missing required signature")), "{:?}", r.body);
    let forged = sluice.call_with(
        "POST",
        "/connectors/b0/tasks",
        &[
            ("Content-Type", "application/json"),
            ("X-Connect-Authorization", "c2lnbmF0dXJl"),
            ("X-Connect-Request-Signature-Algorithm", "HmacSHA256"),
        ],
        body,
    );
    assert_eq!(
        (forged.status, forged.body["message"].as_str()),
        (403, Some("Internal request contained invalid signature.")),
        "{:?}",
        forged.body
    );
    let r = sluice.call("PUT", "/connectors/b0/fence", None, "");
    assert_eq!((r.status, r.body["message"].as_str()), (400, Some("Internal request missing required signature")), "{:?}", r.body);
    eprintln!("mixed cluster: new connectors on {connector_owners:?}, their tasks on {owners:?}; the Java worker sent signed task configs for {on_java:?}");
}
