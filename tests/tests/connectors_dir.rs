//! `connectors.dir` against the real binary: connectors declared as files are created in
//! their declared state, updated only when the file really changes, deleted only when the
//! directory made them; a bad file changes nothing; REST writes to a declared connector get
//! 409 naming the file; `sluice plan|apply` against a running worker; and on a 3-worker
//! cluster the leader applies, and a new leader takes over when it stops.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_tests::{eventually, read_lines, Json, KafkaBroker, Launch, Worker};

fn write(dir: &Path, file: &str, text: &str) {
    // Written beside and renamed, as a deploy tool does, so a pass never reads half a file.
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

fn source_json(name: &str, input: &Path, topic: &str, state: Option<&str>) -> String {
    let mut v = json!({"name": name, "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": topic}});
    if let Some(s) = state {
        v["initial_state"] = json!(s);
    }
    v.to_string()
}

fn sink_yaml(name: &str, output: &Path, topic: &str) -> String {
    format!(
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnector\nmetadata:\n  name: {name}\n  labels:\n    strimzi.io/cluster: my-connect\nspec:\n  class: org.apache.kafka.connect.file.FileStreamSinkConnector\n  tasksMax: 1\n  config:\n    topics: {topic}\n    file: {}\n",
        output.display()
    )
}

/// The value of a sample without labels in `/metrics`.
fn metric(w: &Worker, name: &str) -> f64 {
    let (code, _, text) = w.get_text("/metrics");
    assert_eq!(code, 200);
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).map(|v| v.trim().parse::<f64>().unwrap()))
        .unwrap_or_else(|| panic!("{name} not in /metrics"))
}

fn pass_shows(w: &Worker, what: &str, f: impl Fn(&Json) -> bool) -> Json {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, report) = w.get("/connectors-dir");
        if f(&report) {
            return report;
        }
        assert!(Instant::now() < deadline, "timed out waiting for a pass where {what}; last report {report}\n{}", w.output());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn item<'a>(report: &'a Json, name: &str) -> &'a Json {
    report["items"].as_array().unwrap().iter().find(|i| i["name"] == name).unwrap_or(&Json::Null)
}

#[test]
fn a_directory_of_files_is_the_worker_s_connectors() {
    let tmp = tempfile::tempdir().unwrap();
    let cdir = tmp.path().join("connectors");
    std::fs::create_dir_all(&cdir).unwrap();
    let input = tmp.path().join("in.txt");
    let out = tmp.path().join("out.txt");
    let out2 = tmp.path().join("out2.txt");
    std::fs::write(&input, "").unwrap();
    write(&cdir, "src.json", &source_json("src", &input, "lines", None));
    write(&cdir, "sink.yaml", &sink_yaml("sink", &out, "lines"));
    write(&cdir, "parked.json", &source_json("parked", &input, "parked", Some("STOPPED")));
    write(&cdir, "README.md", "not a declaration");
    let w = Worker::start(
        &tmp.path().join("w"),
        &[("connectors.dir", cdir.to_str().unwrap()), ("connectors.dir.interval.ms", "1000"), ("restart.policy", "never")],
    );

    // Created at start, each in its declared state; a stopped one never ran a task.
    w.wait_running("src", 1);
    w.wait_running("sink", 1);
    w.wait_for("/connectors/parked/status", Duration::from_secs(20), |c, b| c == 200 && b["connector"]["state"] == "STOPPED");
    assert_eq!(w.get("/connectors/parked/tasks").1, json!([]));
    let (_, config) = w.get("/connectors/sink/config");
    assert_eq!(config["connector.class"], "org.apache.kafka.connect.file.FileStreamSinkConnector");
    assert_eq!(config["sluice.connectors.dir.file"], "sink.yaml");
    std::fs::write(&input, "one\ntwo\n").unwrap();
    eventually(Duration::from_secs(20), "the declared pipeline delivers", || read_lines(&out) == ["one", "two"]);

    // A connector made through REST beside them.
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "by-rest", "config": {"connector.class": "FileStreamSink", "topics": "lines", "file": tmp.path().join("rest.txt").to_str().unwrap()}}),
    );
    assert_eq!(code, 201, "{body}");

    // REST writes to a declared connector: 409 naming the file, and nothing changes.
    let (code, body) = w.put("/connectors/src/config", &json!({"connector.class": "FileStreamSource", "file": "/x", "topic": "t"}));
    assert_eq!(code, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("src.json"), "{body}");
    let (code, body) = w.patch("/connectors/sink/config", &json!({"file": "/x"}));
    assert_eq!((code, body["error_code"].as_i64()), (409, Some(409)), "{body}");
    let (code, body) = w.delete("/connectors/parked");
    assert_eq!(code, 409, "{body}");
    assert_eq!(w.get("/connectors/src/config").1["file"], input.to_str().unwrap());

    // The same bytes written again: no pass writes anything, no task restarts.
    let report =
        pass_shows(&w, "everything is unchanged", |r| ["src", "sink", "parked"].iter().all(|n| item(r, n)["action"] == "unchanged"));
    assert!(item(&report, "by-rest").is_null(), "a REST connector is not the directory's: {report}");
    let starts = metric(&w, "kafka_connect_worker_task_startup_attempts_total");
    write(&cdir, "src.json", &source_json("src", &input, "lines", None));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(metric(&w, "kafka_connect_worker_task_startup_attempts_total"), starts, "a no-op restarted a task");

    // A real change is applied, and only the changed key is reported.
    write(&cdir, "sink.yaml", &sink_yaml("sink", &out2, "lines"));
    eventually(Duration::from_secs(20), "the sink's new file", || w.get("/connectors/sink/config").1["file"] == out2.to_str().unwrap());
    std::fs::write(&input, "one\ntwo\nthree\n").unwrap();
    eventually(Duration::from_secs(20), "new lines reach the new file", || read_lines(&out2).contains(&"three".to_owned()));

    // Bad files: reported with their errors, and what runs stays as it is.
    write(&cdir, "broken.json", "{\"name\": \"broken\", ");
    let bad = source_json("src", &input, "lines", None).replace("\"topic\":\"lines\"", "\"topic\":\"lines\",\"tasks.max\":\"many\"");
    assert!(bad.contains("many"));
    write(&cdir, "src.json", &bad);
    let report = pass_shows(&w, "the bad files are invalid", |r| {
        item(r, "src")["action"] == "invalid" && item(r, "broken.json")["action"] == "invalid"
    });
    assert!(item(&report, "src")["errors"][0].as_str().unwrap().starts_with("tasks.max: "), "{report}");
    assert!(item(&report, "broken.json")["errors"][0].as_str().unwrap().contains("not valid JSON"), "{report}");
    assert!(w.get("/connectors/src/config").1.get("tasks.max").is_none(), "the invalid version was not applied");
    w.wait_running("src", 1);
    assert!(w.output().contains("connectors.dir: a declaration is not applied"), "the bad file is logged");
    std::fs::remove_file(cdir.join("broken.json")).unwrap();
    write(&cdir, "src.json", &source_json("src", &input, "lines", None));

    // A file removed: its connector is deleted; the REST one stays.
    std::fs::remove_file(cdir.join("parked.json")).unwrap();
    w.wait_for("/connectors", Duration::from_secs(20), |_, b| *b == json!(["by-rest", "sink", "src"]));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(w.get("/connectors").1, json!(["by-rest", "sink", "src"]));
    let report = pass_shows(&w, "it settled", |r| item(r, "src")["action"] == "unchanged");
    assert_eq!(report["worker_id"], format!("127.0.0.1:{}", w.port));
}

/// A secret in a connector config (a client override's JAAS line with its password).
const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"PW\";";

#[test]
fn plan_and_apply_against_a_running_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let cdir = tmp.path().join("declared");
    std::fs::create_dir_all(&cdir).unwrap();
    let input = tmp.path().join("in.txt");
    std::fs::write(&input, "").unwrap();
    let w = Worker::start(&tmp.path().join("w"), &[]);
    let url = format!("http://127.0.0.1:{}", w.port);
    let mut secret = json!({"name": "db", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "t", "producer.override.sasl.jaas.config": JAAS.replace("PW", "hunter2")}});
    write(&cdir, "db.json", &secret.to_string());
    write(&cdir, "sink.yaml", &sink_yaml("sink", &tmp.path().join("out.txt"), "t"));

    let (code, stdout, stderr) = Worker::cli(&["plan", cdir.to_str().unwrap(), "--url", &url]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("create     db  (db.json)"), "{stdout}");
    assert!(stdout.contains("create     sink  (sink.yaml)"), "{stdout}");
    assert!(stdout.ends_with("2 create, 0 update, 0 delete, 0 unchanged, 0 invalid, 0 conflict\n"), "{stdout}");
    assert_eq!(w.get("/connectors").1, json!([]), "plan changes nothing");

    let (code, stdout, stderr) = Worker::cli(&["apply", cdir.to_str().unwrap(), "--url", &url]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    w.wait_running("db", 1);
    w.wait_running("sink", 1);

    // A changed secret is reported by its key name only.
    secret["config"]["producer.override.sasl.jaas.config"] = json!(JAAS.replace("PW", "swordfish"));
    secret["config"]["topic"] = json!("t2");
    write(&cdir, "db.json", &secret.to_string());
    let (code, stdout, _) = Worker::cli(&["plan", cdir.to_str().unwrap(), "--url", &url]);
    assert_eq!(code, 0);
    assert!(stdout.contains("update     db  (db.json): producer.override.sasl.jaas.config, topic\n"), "{stdout}");
    assert!(stdout.contains("unchanged  sink"), "{stdout}");
    assert!(!stdout.contains("swordfish") && !stdout.contains("hunter2"), "{stdout}");

    // An invalid file fails the command and is named; nothing is applied for it.
    write(&cdir, "bad.yaml", "kind: KafkaConnector\nmetadata:\n  name: bad\nspec:\n  class: FileStreamSource\n  replicas: 2\n");
    let (code, stdout, stderr) = Worker::cli(&["apply", cdir.to_str().unwrap(), "--url", &url]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("invalid    bad.yaml") && stdout.contains("unknown field spec.replicas"), "{stdout}");
    assert!(stderr.contains("not applied"), "{stderr}");
    assert_eq!(w.get("/connectors/db/config").1["topic"], "t2", "the valid change was applied");
    std::fs::remove_file(cdir.join("bad.yaml")).unwrap();

    // What apply made is owned: REST changes are refused; removing the file deletes it.
    let (code, body) = w.delete("/connectors/db");
    assert_eq!(code, 409, "{body}");
    std::fs::remove_file(cdir.join("db.json")).unwrap();
    let (code, stdout, _) = Worker::cli(&["apply", cdir.to_str().unwrap(), "--url", &url]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("delete     db  (db.json)"), "{stdout}");
    assert_eq!(w.get("/connectors").1, json!(["sink"]));
    assert_eq!(w.get("/connectors-dir").0, 404, "this worker has no connectors.dir of its own");

    let (code, _, stderr) = Worker::cli(&["plan", cdir.to_str().unwrap(), "--url", "http://127.0.0.1:1"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("cannot reach the worker"), "{stderr}");
}

/// `connectors.dir.drift=revert`: a REST write is accepted, keeps the ownership, and the
/// file's version is back within seconds (the write wakes a pass; the period is a minute).
#[test]
fn revert_puts_the_file_s_version_back() {
    let tmp = tempfile::tempdir().unwrap();
    let cdir = tmp.path().join("connectors");
    std::fs::create_dir_all(&cdir).unwrap();
    let input = tmp.path().join("in.txt");
    std::fs::write(&input, "").unwrap();
    write(&cdir, "src.json", &source_json("src", &input, "lines", None));
    let w = Worker::start(&tmp.path().join("w"), &[("connectors.dir", cdir.to_str().unwrap()), ("connectors.dir.drift", "revert")]);
    w.wait_running("src", 1);
    let (code, body) = w
        .put("/connectors/src/config", &json!({"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "edited"}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["config"]["sluice.connectors.dir.file"], "src.json", "the write keeps the ownership: {body}");
    let started = Instant::now();
    w.wait_for("/connectors/src/config", Duration::from_secs(20), |_, b| b["topic"] == "lines");
    assert!(started.elapsed() < Duration::from_secs(15), "reverted by the woken pass, not the 60 s one");
    let (code, _) = w.delete("/connectors/src");
    assert_eq!(code, 204);
    w.wait_running("src", 1);
}

#[test]
fn bad_settings_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    for (key, value) in [("connectors.dir.drift", "ignore"), ("connectors.dir.interval.ms", "0")] {
        let props = format!(
            "listeners=http://127.0.0.1:{}\ndata.dir={}\n{key}={value}\n",
            sluice_tests::free_port(),
            tmp.path().join("d").display()
        );
        let file = tmp.path().join("w.properties");
        std::fs::write(&file, props).unwrap();
        let (code, _, stderr) = Worker::cli(&["standalone", file.to_str().unwrap()]);
        assert_eq!(code, 1);
        assert!(stderr.contains(key), "{stderr}");
    }
}

/// Three workers with the same group and the same directory: the leader alone applies, a
/// REST write through a follower is refused (409 from the leader), and when the leader
/// stops the next leader applies the next change.
#[test]
fn on_a_three_worker_cluster_the_leader_applies() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&tmp.path().join("broker"));
    let cdir = tmp.path().join("connectors");
    std::fs::create_dir_all(&cdir).unwrap();
    let input = tmp.path().join("in.txt");
    std::fs::write(&input, "a\nb\n").unwrap();
    write(&cdir, "src.json", &source_json("src", &input, "dir-lines", None));
    write(&cdir, "sink.yaml", &sink_yaml("sink", &tmp.path().join("out.txt"), "dir-lines"));
    let props: Vec<(String, String)> = [
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("group.id", "sluice-dir"),
        ("config.storage.topic", "dir-configs"),
        ("offset.storage.topic", "dir-offsets"),
        ("status.storage.topic", "dir-status"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "1000"),
        ("rebalance.timeout.ms", "10000"),
        ("scheduled.rebalance.max.delay.ms", "3000"),
        ("offset.flush.interval.ms", "200"),
        ("connectors.dir", cdir.to_str().unwrap()),
        ("connectors.dir.interval.ms", "2000"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let mut workers: Vec<Worker> =
        (0..3).map(|i| Worker::launch(&tmp.path().join(format!("w{i}")), Launch::Distributed { props: props.clone() })).collect();
    for w in &workers {
        w.wait_running("src", 1);
        w.wait_running("sink", 1);
    }
    eventually(Duration::from_secs(30), "the lines", || read_lines(&tmp.path().join("out.txt")) == ["a", "b"]);

    // Exactly one worker, the leader, has made passes.
    let leader = || -> usize {
        let appliers: Vec<usize> = (0..workers.len()).filter(|i| workers[*i].get("/connectors-dir").1["worker_id"].is_string()).collect();
        assert_eq!(appliers.len(), 1, "one worker applies: {appliers:?}");
        appliers[0]
    };
    let first = leader();
    let follower = &workers[(first + 1) % 3];
    // Retried while the group answers 409 for a rebalance, as Connect's clients do.
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (code, body) =
            follower.put("/connectors/src/config", &json!({"connector.class": "FileStreamSource", "file": "/x", "topic": "t"}));
        assert_eq!(code, 409, "{body}");
        if !body["message"].as_str().unwrap().contains("rebalance") || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(body["message"].as_str().unwrap().contains("src.json"), "{body}");

    // The leader stops; the next leader applies a new file.
    workers[first].terminate();
    write(&cdir, "more.json", &source_json("more", &input, "dir-more", None));
    let survivors: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    for i in &survivors {
        workers[*i].wait_running("more", 1);
    }
    let mut appliers = BTreeSet::new();
    for i in &survivors {
        let report = workers[*i].get("/connectors-dir").1;
        if item(&report, "more")["action"].is_string() {
            appliers.insert(*i);
        }
    }
    assert_eq!(appliers.len(), 1, "the new leader alone applied: {appliers:?}");
    assert_eq!(workers[survivors[0]].get("/connectors").1, json!(["more", "sink", "src"]));

    // Update, no-op and delete through the new leader, seen by every survivor.
    let out2 = tmp.path().join("out2.txt");
    write(&cdir, "sink.yaml", &sink_yaml("sink", &out2, "dir-lines"));
    for i in &survivors {
        workers[*i].wait_for("/connectors/sink/config", Duration::from_secs(30), |_, b| b["file"] == out2.to_str().unwrap());
    }
    let starts = |w: &Worker| -> String {
        let (_, _, text) = w.get_text("/metrics");
        text.lines().find(|l| l.starts_with("kafka_connect_worker_task_startup_attempts_total ")).unwrap_or_default().to_owned()
    };
    for i in &survivors {
        workers[*i].wait_running("sink", 1);
    }
    let before: Vec<String> = survivors.iter().map(|i| starts(&workers[*i])).collect();
    write(&cdir, "more.json", &source_json("more", &input, "dir-more", None));
    std::thread::sleep(Duration::from_secs(5));
    let after: Vec<String> = survivors.iter().map(|i| starts(&workers[*i])).collect();
    assert_eq!(before, after, "rewriting a file with the same content restarted a task");
    std::fs::remove_file(cdir.join("src.json")).unwrap();
    for i in &survivors {
        workers[*i].wait_for("/connectors", Duration::from_secs(30), |_, b| *b == json!(["more", "sink"]));
    }
}
