//! Kafka Connect's REST contract against the real binary, endpoint by endpoint: the status
//! codes, JSON shapes and messages a Connect 3.9/4.x worker answers, over connectors that
//! really run (FileStreamSource → embedded log → FileStreamSink).
//!
//! Bad input (and that it leaves running connectors alone) is in `bad_input.rs`.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use sluice_tests::{eventually, json, read_lines, Json, Worker};

pub const SOURCE_CLASS: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";
pub const SINK_CLASS: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";
pub const DATAGEN_CLASS: &str = "io.confluent.kafka.connect.datagen.DatagenConnector";
pub const DISCARD_CLASS: &str = "sluice.connect.DiscardSinkConnector";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Connect's message for offset changes on a connector that is not stopped.
pub fn not_stopped(name: &str) -> String {
    format!(
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
    )
}

/// Connect's error body, `{"error_code": N, "message": "…"}`, with N as the HTTP status.
#[track_caller]
pub fn assert_error(answer: (u16, Json), code: u16, message: &str) {
    assert_eq!(answer, (code, json!({"error_code": code, "message": message})));
}

/// The message of an error answer, after checking its status and shape.
#[track_caller]
pub fn error_message(answer: (u16, Json), code: u16) -> String {
    let (status, body) = answer;
    assert_eq!(status, code, "{body}");
    assert_eq!(body["error_code"], code, "{body}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(2), "only error_code and message: {body}");
    body["message"].as_str().unwrap_or_else(|| panic!("no message in {body}")).to_owned()
}

pub fn source_config(input: &Path, topic: &str) -> Json {
    json!({"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": topic})
}

pub fn sink_config(output: &Path, topics: &str) -> Json {
    json!({"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": topics})
}

/// `config` with `name` added, as the worker stores and shows it.
pub fn named(config: &Json, name: &str) -> Json {
    let mut c = config.clone();
    c["name"] = json!(name);
    c
}

/// `POST /connectors`, asserting 201.
#[track_caller]
pub fn create(w: &Worker, name: &str, config: &Json) -> Json {
    let (code, body) = w.post("/connectors", &json!({"name": name, "config": config}));
    assert_eq!(code, 201, "creating {name}: {body}");
    body
}

pub fn append(path: &Path, lines: &[String]) {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    f.write_all(lines.iter().map(|l| format!("{l}\n")).collect::<String>().as_bytes()).unwrap();
    f.sync_all().unwrap();
}

pub fn numbered(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i:03}")).collect()
}

/// Waits until the file holds exactly `expected`; fails at once if it holds more lines.
#[track_caller]
pub fn wait_lines(path: &Path, expected: &[String]) {
    eventually(TIMEOUT, &format!("{} to hold {} lines", path.display(), expected.len()), || {
        let got = read_lines(path);
        assert!(got.len() <= expected.len(), "{} has more lines than expected:\n{got:#?}\nexpected:\n{expected:#?}", path.display());
        got.len() == expected.len()
    });
    assert_eq!(read_lines(path), expected, "{}", path.display());
}

/// The connector status with every entry in `state`.
pub fn status_in(w: &Worker, name: &str, state: &str, tasks: usize) -> Json {
    w.wait_for(&format!("/connectors/{name}/status"), TIMEOUT, |code, b| {
        code == 200
            && b["connector"]["state"] == state
            && b["tasks"].as_array().is_some_and(|t| t.len() == tasks && t.iter().all(|t| t["state"] == state))
    })
}

fn worker_id(w: &Worker) -> String {
    format!("127.0.0.1:{}", w.port)
}

fn sorted_strings(v: &Json) -> Vec<String> {
    let mut out: Vec<String> =
        v.as_array().unwrap_or_else(|| panic!("not an array: {v}")).iter().map(|s| s.as_str().unwrap().to_owned()).collect();
    out.sort();
    out
}

/// The validation errors reported for `key` in a `ConfigInfos` answer.
fn errors_of(infos: &Json, key: &str) -> Vec<String> {
    let entry =
        infos["configs"].as_array().unwrap().iter().find(|c| c["value"]["name"] == key).unwrap_or_else(|| panic!("no {key} in {infos}"));
    entry["value"]["errors"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_owned()).collect()
}

#[test]
fn worker_info_plugins_validation_and_loggers() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);

    // GET /: ServerInfo, exactly its three keys.
    let (code, root) = w.get("/");
    assert_eq!(code, 200);
    let mut keys: Vec<&String> = root.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["commit", "kafka_cluster_id", "version"], "{root}");
    assert_eq!(root["version"], VERSION);
    assert!(root["commit"].as_str().is_some_and(|c| !c.is_empty()), "{root}");
    assert!(root["kafka_cluster_id"].as_str().is_some_and(|c| !c.is_empty()), "{root}");

    // GET /health: KIP-1017's WorkerStatus.
    assert_eq!(
        w.get("/health"),
        (200, json!({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}))
    );

    // GET /connector-plugins: the built-in connectors only, each {class, type, version}.
    let (code, plugins) = w.get("/connector-plugins");
    assert_eq!(code, 200);
    let mut listed: Vec<Json> = plugins.as_array().unwrap().clone();
    listed.sort_by_key(|p| p["class"].as_str().unwrap().to_owned());
    assert_eq!(
        listed,
        [
            json!({"class": "io.confluent.connect.jdbc.JdbcSinkConnector", "type": "sink", "version": VERSION}),
            json!({"class": "io.confluent.connect.s3.S3SinkConnector", "type": "sink", "version": VERSION}),
            json!({"class": DATAGEN_CLASS, "type": "source", "version": VERSION}),
            json!({"class": "io.debezium.connector.jdbc.JdbcSinkConnector", "type": "sink", "version": VERSION}),
            json!({"class": "io.debezium.connector.postgresql.PostgresConnector", "type": "source", "version": VERSION}),
            json!({"class": SINK_CLASS, "type": "sink", "version": VERSION}),
            json!({"class": SOURCE_CLASS, "type": "source", "version": VERSION}),
            json!({"class": DISCARD_CLASS, "type": "sink", "version": VERSION}),
        ]
    );
    assert_eq!(w.get("/connector-plugins?connectorsOnly=true").1, plugins);
    // Connect's order: sinks, then sources, each by class name.
    let order: Vec<(String, String)> =
        plugins.as_array().unwrap().iter().map(|p| (p["type"].as_str().unwrap().to_owned(), p["class"].as_str().unwrap().to_owned())).collect();
    let mut want = order.clone();
    want.sort_by(|a, b| (a.0 != "sink", &a.1).cmp(&(b.0 != "sink", &b.1)));
    assert_eq!(order, want, "sinks first, then sources, each sorted by class");
    // connectorsOnly=false adds the converters and header converters.
    let (code, all) = w.get("/connector-plugins?connectorsOnly=false");
    assert_eq!(code, 200);
    let all = all.as_array().unwrap();
    for p in plugins.as_array().unwrap() {
        assert!(all.contains(p), "{p} missing from {all:?}");
    }
    for class in ["org.apache.kafka.connect.json.JsonConverter", "org.apache.kafka.connect.storage.StringConverter"] {
        assert!(all.iter().any(|p| p["class"] == class && p["type"] == "converter"), "{class} not listed as a converter: {all:?}");
    }
    assert!(all.iter().any(|p| p["type"] == "header_converter"), "no header converter in {all:?}");
    let kinds = ["sink", "source", "transformation", "predicate", "converter", "header_converter"];
    let rank = |p: &Json| (kinds.iter().position(|k| p["type"] == *k).unwrap(), p["class"].as_str().unwrap().to_owned());
    let mut sorted = all.clone();
    sorted.sort_by_key(rank);
    assert_eq!(all, &sorted, "Connect's order: by type, then by class");
    assert!(
        all.iter()
            .all(|p| ["source", "sink", "converter", "header_converter", "transformation", "predicate"]
                .contains(&p["type"].as_str().unwrap())),
        "{all:?}"
    );
    // … and every transformation and predicate, Kafka's and Debezium's.
    for (class, kind) in [
        ("org.apache.kafka.connect.transforms.InsertField$Value", "transformation"),
        ("org.apache.kafka.connect.transforms.RegexRouter", "transformation"),
        ("io.debezium.transforms.ExtractNewRecordState", "transformation"),
        ("io.debezium.transforms.outbox.EventRouter", "transformation"),
        ("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", "predicate"),
        ("org.apache.kafka.connect.transforms.predicates.RecordIsTombstone", "predicate"),
    ] {
        assert!(all.iter().any(|p| p["class"] == class && p["type"] == kind), "{class} not listed as a {kind}");
    }
    assert_error(
        w.get("/connector-plugins?connectorsOnly=maybe"),
        400,
        "Invalid value 'maybe' for query parameter connectorsOnly: expected true or false",
    );

    // GET /connector-plugins/{plugin}/config: ConfigKeyInfos, by alias or class name.
    let (code, def) = w.get("/connector-plugins/FileStreamSource/config");
    assert_eq!(code, 200);
    assert_eq!(w.get(&format!("/connector-plugins/{SOURCE_CLASS}/config")), (200, def.clone()));
    let def = def.as_array().unwrap();
    let fields = [
        "default_value",
        "dependents",
        "display_name",
        "documentation",
        "group",
        "importance",
        "name",
        "order_in_group",
        "required",
        "type",
        "width",
    ];
    for k in def {
        let mut got: Vec<&String> = k.as_object().unwrap().keys().collect();
        got.sort();
        assert_eq!(got, fields, "{k}");
    }
    let key = |name: &str| def.iter().find(|k| k["name"] == name).unwrap_or_else(|| panic!("{name} not in {def:?}")).clone();
    let file = key("file");
    assert_eq!(
        (&file["type"], &file["required"], &file["default_value"], &file["importance"]),
        (&json!("STRING"), &json!(true), &Json::Null, &json!("HIGH"))
    );
    let batch = key("batch.size");
    assert_eq!((&batch["type"], &batch["required"], &batch["default_value"]), (&json!("INT"), &json!(false), &json!("2000")));
    key("topic");
    let (code, sink_def) = w.get("/connector-plugins/FileStreamSink/config");
    assert_eq!(code, 200);
    assert!(sink_def.as_array().unwrap().iter().any(|k| k["name"] == "file"), "{sink_def}");
    let (code, json_def) = w.get("/connector-plugins/org.apache.kafka.connect.json.JsonConverter/config");
    assert_eq!(code, 200);
    assert!(json_def.as_array().unwrap().iter().any(|k| k["name"] == "schemas.enable"), "{json_def}");
    assert_error(w.get("/connector-plugins/com.example.Nope/config"), 404, "Unknown plugin com.example.Nope.");

    // PUT /connector-plugins/{plugin}/config/validate: ConfigInfos.
    let good = json!({"connector.class": "FileStreamSource", "name": "v", "file": "/tmp/in.txt", "topic": "t"});
    let (code, infos) = w.put("/connector-plugins/FileStreamSource/config/validate", &good);
    assert_eq!(code, 200, "{infos}");
    assert_eq!(infos["name"], SOURCE_CLASS);
    assert_eq!(infos["error_count"], 0, "{infos}");
    assert!(infos["groups"].as_array().unwrap().contains(&json!("Common")), "{infos}");
    for c in infos["configs"].as_array().unwrap() {
        let mut got: Vec<&String> = c.as_object().unwrap().keys().collect();
        got.sort();
        assert_eq!(got, ["definition", "value"], "{c}");
        let mut got: Vec<&String> = c["value"].as_object().unwrap().keys().collect();
        got.sort();
        assert_eq!(got, ["errors", "name", "recommended_values", "value", "visible"], "{c}");
    }
    let file_entry = infos["configs"].as_array().unwrap().iter().find(|c| c["value"]["name"] == "file").unwrap();
    assert_eq!(file_entry["value"]["value"], "/tmp/in.txt");
    assert_eq!(file_entry["definition"]["name"], "file");

    // Per-key errors: missing required keys (`name` is one, as in Connect), a value out of
    // range, an unknown key.
    let bad = json!({"connector.class": SOURCE_CLASS, "topic": "t", "tasks.max": "0", "no.such.key": "1"});
    let (code, infos) = w.put("/connector-plugins/FileStreamSourceConnector/config/validate", &bad);
    assert_eq!(code, 200, "{infos}");
    assert_eq!(infos["error_count"], 4, "{infos}");
    assert_eq!(errors_of(&infos, "name"), ["Missing required configuration \"name\" which has no default value."]);
    assert_eq!(errors_of(&infos, "file"), ["Missing required configuration \"file\" which has no default value."]);
    assert_eq!(errors_of(&infos, "tasks.max"), ["Invalid value 0 for configuration tasks.max: Value must be at least 1"]);
    assert_eq!(errors_of(&infos, "no.such.key"), [format!("Unknown configuration key 'no.such.key': {SOURCE_CLASS} does not support it")]);
    assert_eq!(errors_of(&infos, "topic"), Vec::<String>::new());
    let unknown = infos["configs"].as_array().unwrap().iter().find(|c| c["value"]["name"] == "no.such.key").unwrap();
    assert_eq!(unknown["definition"], Json::Null, "an unknown key has no definition: {unknown}");

    // A sink needs topics or topics.regex, not both.
    let (_, infos) = w.put("/connector-plugins/FileStreamSink/config/validate", &json!({"name": "v", "file": "/tmp/out.txt"}));
    assert_eq!(infos["name"], SINK_CLASS);
    assert_eq!(infos["error_count"], 2, "on both keys, as Connect: {infos}");
    assert_eq!(errors_of(&infos, "topics"), ["Must configure one of topics or topics.regex"]);
    assert_eq!(errors_of(&infos, "topics.regex"), ["Must configure one of topics or topics.regex"]);
    let (_, infos) = w.put(
        "/connector-plugins/FileStreamSink/config/validate",
        &json!({"name": "v", "file": "/tmp/out.txt", "topics": "a", "topics.regex": "a.*"}),
    );
    assert_eq!(errors_of(&infos, "topics"), ["topics and topics.regex are mutually exclusive options, but both are set."]);
    assert_eq!(errors_of(&infos, "topics.regex"), ["topics and topics.regex are mutually exclusive options, but both are set."]);
    assert_eq!(infos["error_count"], 2, "{infos}");
    // The class in the body must be the plugin in the path.
    assert_error(
        w.put("/connector-plugins/FileStreamSink/config/validate", &good),
        400,
        "Included connector type FileStreamSource does not match request type FileStreamSink",
    );
    let message = error_message(w.put("/connector-plugins/com.example.Nope/config/validate", &json!({})), 400);
    assert!(message.starts_with("Failed to find any class that implements Connector and which name matches com.example.Nope"), "{message}");

    // /admin/loggers: list, set, read back, and the level really applies.
    let (code, loggers) = w.get("/admin/loggers");
    assert_eq!(code, 200);
    assert_eq!(loggers["root"]["level"], "INFO", "{loggers}");
    assert!(loggers.get("sluice_rest").is_none(), "{loggers}");
    w.get("/probe-before-debug");
    let (code, changed) = w.put("/admin/loggers/sluice_rest", &json!({"level": "DEBUG"}));
    assert_eq!(code, 200, "{changed}");
    assert!(changed.as_array().is_some_and(|a| a.contains(&json!("sluice_rest"))), "{changed}");
    let (code, level) = w.get("/admin/loggers/sluice_rest");
    assert_eq!(code, 200);
    assert_eq!(level["level"], "DEBUG", "{level}");
    assert!(level["last_modified"].as_u64().is_some_and(|t| t > 1_600_000_000_000), "{level}");
    assert_eq!(w.get("/admin/loggers").1["sluice_rest"], level);
    // The access log is a debug event of sluice_rest: only requests after the change show.
    w.get("/probe-after-debug");
    eventually(TIMEOUT, "the access log line of a request made at DEBUG", || w.output().contains("probe-after-debug"));
    assert!(!w.output().contains("probe-before-debug"), "a request made at INFO was logged:\n{}", w.output());
    assert_error(w.put("/admin/loggers/sluice_rest", &json!({"level": "LOUD"})), 404, "invalid log level 'LOUD'.");
    assert_error(w.put("/admin/loggers/sluice_rest", &json!({})), 400, "Desired 'level' parameter was not specified in request.");
    assert_eq!(w.put("/admin/loggers/sluice_runtime?scope=cluster", &json!({"level": "WARN"})), (204, Json::Null));
    assert_eq!(w.get("/admin/loggers/sluice_runtime").1["level"], "WARN");

    // Paths and methods nobody serves.
    assert_error(w.get("/no/such/path"), 404, "HTTP 404 Not Found");
    assert_error(w.delete("/connector-plugins"), 405, "HTTP 405 Method Not Allowed");
    assert_error(w.post_empty("/health"), 405, "HTTP 405 Method Not Allowed");
    assert_error(w.put_empty("/connectors"), 405, "HTTP 405 Method Not Allowed");
}

#[test]
fn create_list_read_and_reconfigure_connectors() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    let lines = numbered("first", 0..5);
    append(&input, &lines);
    let w = Worker::start(dir.path(), &[]);
    let wid = worker_id(&w);

    // POST /connectors: 201, an absolute Location, and ConnectorInfo.
    let src = source_config(&input, "lines");
    let reply = w.call("POST", "/connectors", Some("application/json"), &json!({"name": "src", "config": src}).to_string());
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.header("Location"), Some(format!("http://127.0.0.1:{}/connectors/src", w.port).as_str()));
    let mut keys: Vec<&String> = reply.body.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["config", "name", "tasks", "type"], "{}", reply.body);
    assert_eq!(reply.body["name"], "src");
    assert_eq!(reply.body["config"], named(&src, "src"));
    assert_eq!(reply.body["type"], "source");
    assert!(reply.body["tasks"].as_array().is_some_and(|t| t.iter().all(|t| t["connector"] == "src")), "{}", reply.body);

    // The same name again: 409 with Connect's message, and the first config stays.
    assert_error(
        w.post("/connectors", &json!({"name": "src", "config": source_config(&output, "other")})),
        409,
        "Connector src already exists",
    );
    assert_eq!(w.get("/connectors/src/config"), (200, named(&src, "src")));

    // PUT /connectors/{c}/config creates (201, Location) and then updates (200).
    let sink = sink_config(&output, "lines");
    let reply = w.call("PUT", "/connectors/sink/config", Some("application/json"), &sink.to_string());
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.header("Location"), Some(format!("http://127.0.0.1:{}/connectors/sink", w.port).as_str()));
    assert_eq!(reply.body["config"], named(&sink, "sink"));
    assert_eq!(reply.body["type"], "sink");
    w.wait_running("src", 1);
    w.wait_running("sink", 1);
    wait_lines(&output, &lines);
    let mut sink2 = sink.clone();
    sink2["tasks.max"] = json!("1");
    let (code, info) = w.put("/connectors/sink/config", &sink2);
    assert_eq!(code, 200, "{info}");
    assert_eq!(info, json!({"name": "sink", "config": named(&sink2, "sink"), "tasks": [{"connector": "sink", "task": 0}], "type": "sink"}));
    assert_eq!(w.get("/connectors/sink/config"), (200, named(&sink2, "sink")));
    // A name in the config must match the URL.
    assert_error(
        w.put("/connectors/sink/config", &named(&sink2, "other")),
        400,
        "Connector name configuration (other) doesn't match connector name in the URL (sink)",
    );
    w.wait_running("sink", 1);

    // GET /connectors and its expansions.
    let (code, names) = w.get("/connectors");
    assert_eq!(code, 200);
    assert_eq!(sorted_strings(&names), ["sink", "src"]);
    let status = |name: &str, kind: &str| json!({"name": name, "connector": {"state": "RUNNING", "worker_id": wid, "version": VERSION}, "tasks": [{"id": 0, "state": "RUNNING", "worker_id": wid, "version": VERSION}], "type": kind});
    let info = |name: &str, config: &Json, kind: &str| json!({"name": name, "config": named(config, name), "tasks": [{"connector": name, "task": 0}], "type": kind});
    assert_eq!(w.get("/connectors/src/status"), (200, status("src", "source")));
    assert_eq!(w.get("/connectors/src"), (200, info("src", &src, "source")));
    assert_eq!(w.get("/connectors/sink"), (200, info("sink", &sink2, "sink")));
    assert_eq!(
        w.get("/connectors?expand=status"),
        (200, json!({"src": {"status": status("src", "source")}, "sink": {"status": status("sink", "sink")}}))
    );
    assert_eq!(
        w.get("/connectors?expand=info"),
        (200, json!({"src": {"info": info("src", &src, "source")}, "sink": {"info": info("sink", &sink2, "sink")}}))
    );
    assert_eq!(
        w.get("/connectors?expand=status&expand=info"),
        (
            200,
            json!({
                "src": {"status": status("src", "source"), "info": info("src", &src, "source")},
                "sink": {"status": status("sink", "sink"), "info": info("sink", &sink2, "sink")},
            })
        )
    );

    // GET /connectors/{c}/tasks and one task's status.
    let (code, tasks) = w.get("/connectors/src/tasks");
    assert_eq!(code, 200);
    let tasks = tasks.as_array().unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["id"], json!({"connector": "src", "task": 0}));
    assert_eq!(tasks[0]["config"]["file"], input.to_str().unwrap(), "{}", tasks[0]);
    assert_eq!(tasks[0]["config"]["topic"], "lines", "{}", tasks[0]);
    assert_eq!(w.get("/connectors/src/tasks/0/status"), (200, json!({"id": 0, "state": "RUNNING", "worker_id": wid, "version": VERSION})));
    assert_eq!(w.get("/connectors/src/tasks/7/status").0, 404);
    assert_error(w.get("/connectors/src/tasks/zero/status"), 404, "HTTP 404 Not Found");

    // PATCH /connectors/{c}/config merges; null removes a key. The change takes effect:
    // with batch.size 1 the source still delivers every line.
    let (code, info) = w.patch("/connectors/src/config", &json!({"batch.size": 1}));
    assert_eq!(code, 200, "{info}");
    assert_eq!(info["config"]["batch.size"], "1");
    assert_eq!(info["config"]["file"], input.to_str().unwrap());
    assert_eq!(w.get("/connectors/src/config").1["batch.size"], "1");
    w.wait_running("src", 1);
    let more = numbered("second", 0..3);
    append(&input, &more);
    let all: Vec<String> = lines.iter().chain(&more).cloned().collect();
    wait_lines(&output, &all);
    let (code, info) = w.patch("/connectors/src/config", &json!({"batch.size": null}));
    assert_eq!(code, 200, "{info}");
    assert_eq!(info["config"], named(&src, "src"));
    assert_eq!(w.get("/connectors/src/config"), (200, named(&src, "src")));
    w.wait_running("src", 1);

    // initial_state: PAUSED and STOPPED connectors are created so, and resume runs them.
    let paused_in = dir.path().join("paused.txt");
    append(&paused_in, &numbered("paused", 0..3));
    let (code, body) =
        w.post("/connectors", &json!({"name": "paused", "config": source_config(&paused_in, "paused"), "initial_state": "PAUSED"}));
    assert_eq!(code, 201, "{body}");
    status_in(&w, "paused", "PAUSED", 1);
    // A new config keeps the target state: still PAUSED, tasks included.
    let (code, body) = w.patch("/connectors/paused/config", &json!({"batch.size": "1"}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["config"]["batch.size"], "1");
    status_in(&w, "paused", "PAUSED", 1);
    let (code, body) =
        w.post("/connectors", &json!({"name": "stopped", "config": source_config(&paused_in, "stopped"), "initial_state": "STOPPED"}));
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["tasks"], json!([]), "{body}");
    assert_eq!(
        status_in(&w, "stopped", "STOPPED", 0),
        json!({"name": "stopped", "connector": {"state": "STOPPED", "worker_id": wid, "version": VERSION}, "tasks": [], "type": "source"})
    );
    assert_eq!(w.get("/connectors/stopped/tasks"), (200, json!([])));
    // Neither has produced anything.
    assert_eq!(w.get("/connectors/paused/offsets"), (200, json!({"offsets": []})));
    assert_eq!(w.get("/connectors/stopped/topics"), (200, json!({"stopped": {"topics": []}})));
    // A connector created STOPPED can have its offsets set before it ever runs: it then
    // starts past the first line.
    let file = paused_in.to_str().unwrap();
    let first_line = "paused-000\n".len();
    let at = |position: usize| json!({"offsets": [{"partition": {"filename": file}, "offset": {"position": position}}]});
    assert_eq!(w.patch("/connectors/stopped/offsets", &at(first_line)).0, 200);
    assert_eq!(w.get("/connectors/stopped/offsets"), (200, at(first_line)));
    let stopped_out = dir.path().join("stopped-out.txt");
    create(&w, "stopped-sink", &sink_config(&stopped_out, "stopped"));
    assert_eq!(w.put_empty("/connectors/stopped/resume"), (202, Json::Null));
    w.wait_running("stopped", 1);
    assert_eq!(w.get("/connectors/stopped").1["tasks"], json!([{"connector": "stopped", "task": 0}]));
    wait_lines(&stopped_out, &numbered("paused", 1..3));
    w.wait_for("/connectors/stopped/topics", TIMEOUT, |_, b| *b == json!({"stopped": {"topics": ["stopped"]}}));
    assert_eq!(w.put_empty("/connectors/paused/resume"), (202, Json::Null));
    w.wait_running("paused", 1);
    assert_eq!(sorted_strings(&w.get("/connectors").1), ["paused", "sink", "src", "stopped", "stopped-sink"]);
}

#[test]
fn pause_resume_restart_stop_topics_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    let w = Worker::start(dir.path(), &[]);
    let wid = worker_id(&w);
    create(&w, "src", &source_config(&input, "lines"));
    create(&w, "sink", &sink_config(&output, "lines"));
    w.wait_running("src", 1);
    w.wait_running("sink", 1);
    let mut expected = numbered("a", 0..5);
    append(&input, &expected);
    wait_lines(&output, &expected);

    // Pause: 202, PAUSED everywhere, and nothing moves.
    assert_eq!(w.put_empty("/connectors/src/pause"), (202, Json::Null));
    assert_eq!(
        status_in(&w, "src", "PAUSED", 1),
        json!({"name": "src", "connector": {"state": "PAUSED", "worker_id": wid, "version": VERSION}, "tasks": [{"id": 0, "state": "PAUSED", "worker_id": wid, "version": VERSION}], "type": "source"})
    );
    assert_eq!(w.put_empty("/connectors/src/pause"), (202, Json::Null), "pausing twice is fine");
    let during_pause = numbered("b", 0..3);
    append(&input, &during_pause);
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(read_lines(&output), expected, "a paused source must not produce");
    // Resume: 202, RUNNING, and what was written meanwhile arrives.
    assert_eq!(w.put_empty("/connectors/src/resume"), (202, Json::Null));
    w.wait_running("src", 1);
    expected.extend(during_pause);
    wait_lines(&output, &expected);

    // Restart the connector instance only: 204, no body.
    assert_eq!(w.post_empty("/connectors/src/restart"), (204, Json::Null));
    w.wait_running("src", 1);
    // With its tasks: 202 and the status showing what restarts.
    let restarting = json!({
        "name": "src",
        "connector": {"state": "RESTARTING", "worker_id": wid, "version": VERSION},
        "tasks": [{"id": 0, "state": "RESTARTING", "worker_id": wid, "version": VERSION}],
        "type": "source",
    });
    assert_eq!(w.post_empty("/connectors/src/restart?includeTasks=true"), (202, restarting));
    w.wait_running("src", 1);
    // Only failed ones, when nothing failed: 202 and nothing restarts.
    let running = json!({
        "name": "src",
        "connector": {"state": "RUNNING", "worker_id": wid, "version": VERSION},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": wid, "version": VERSION}],
        "type": "source",
    });
    assert_eq!(w.post_empty("/connectors/src/restart?includeTasks=true&onlyFailed=true"), (202, running.clone()));
    assert_eq!(w.post_empty("/connectors/src/restart?onlyFailed=true"), (202, running));
    // One task: 204.
    assert_eq!(w.post_empty("/connectors/src/tasks/0/restart"), (204, Json::Null));
    assert_eq!(w.post_empty("/connectors/src/tasks/3/restart").0, 404);
    w.wait_running("src", 1);
    let after_restarts = numbered("c", 0..3);
    append(&input, &after_restarts);
    expected.extend(after_restarts);
    wait_lines(&output, &expected);

    // Topics each connector has used, and resetting them.
    assert_eq!(w.get("/connectors/src/topics"), (200, json!({"src": {"topics": ["lines"]}})));
    assert_eq!(w.get("/connectors/sink/topics"), (200, json!({"sink": {"topics": ["lines"]}})));
    assert_eq!(w.put_empty("/connectors/src/topics/reset"), (202, Json::Null));
    assert_eq!(w.put_empty("/connectors/sink/topics/reset"), (202, Json::Null));
    assert_eq!(w.get("/connectors/src/topics"), (200, json!({"src": {"topics": []}})));
    assert_eq!(w.get("/connectors/sink/topics"), (200, json!({"sink": {"topics": []}})));
    // Records flowing again bring the topic back for both.
    let after_reset = numbered("d", 0..2);
    append(&input, &after_reset);
    expected.extend(after_reset);
    wait_lines(&output, &expected);
    w.wait_for("/connectors/src/topics", TIMEOUT, |_, b| *b == json!({"src": {"topics": ["lines"]}}));
    w.wait_for("/connectors/sink/topics", TIMEOUT, |_, b| *b == json!({"sink": {"topics": ["lines"]}}));

    // Stop: 204, STOPPED with no tasks at all.
    assert_eq!(w.put_empty("/connectors/src/stop"), (204, Json::Null));
    let stopped = json!({"name": "src", "connector": {"state": "STOPPED", "worker_id": wid, "version": VERSION}, "tasks": [], "type": "source"});
    assert_eq!(status_in(&w, "src", "STOPPED", 0), stopped);
    assert_eq!(w.get("/connectors/src").1["tasks"], json!([]));
    assert_eq!(w.get("/connectors/src/tasks"), (200, json!([])));
    assert_eq!(w.get("/connectors/src/tasks/0/status").0, 404);
    assert_eq!(w.put_empty("/connectors/src/stop"), (204, Json::Null), "stopping twice is fine");
    let during_stop = numbered("e", 0..3);
    append(&input, &during_stop);
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(read_lines(&output), expected, "a stopped source must not produce");
    // Resume from STOPPED: tasks come back and continue where they were (no line twice).
    assert_eq!(w.put_empty("/connectors/src/resume"), (202, Json::Null));
    w.wait_running("src", 1);
    assert_eq!(w.get("/connectors/src").1["tasks"], json!([{"connector": "src", "task": 0}]));
    expected.extend(during_stop);
    wait_lines(&output, &expected);

    // Delete: 204, then 404 everywhere; the other connector keeps running.
    assert_eq!(w.delete("/connectors/src"), (204, Json::Null));
    assert_error(w.get("/connectors/src"), 404, "Connector src not found");
    assert_error(w.get("/connectors/src/status"), 404, "No status found for connector src");
    assert_error(w.delete("/connectors/src"), 404, "Connector src not found");
    assert_eq!(w.get("/connectors"), (200, json!(["sink"])));
    w.wait_running("sink", 1);
    // Deleted means gone: a new connector of the same name starts afresh (a sink now).
    let second = dir.path().join("second.txt");
    create(&w, "src", &sink_config(&second, "lines"));
    w.wait_running("src", 1);
    wait_lines(&second, &expected);
}

#[test]
fn source_offsets_read_alter_and_reset() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    let w = Worker::start(dir.path(), &[]);
    create(&w, "src", &source_config(&input, "lines"));
    create(&w, "sink", &sink_config(&output, "lines"));
    let first = numbered("line", 0..10);
    append(&input, &first);
    wait_lines(&output, &first);
    let file = input.to_str().unwrap();
    let offsets = |position: u64| json!({"offsets": [{"partition": {"filename": file}, "offset": {"position": position}}]});
    let size = std::fs::metadata(&input).unwrap().len();
    w.wait_for("/connectors/src/offsets", TIMEOUT, |code, b| code == 200 && *b == offsets(size));

    // Altering or resetting needs STOPPED: refused while running and while paused.
    assert_error(w.patch("/connectors/src/offsets", &offsets(0)), 400, &not_stopped("src"));
    assert_error(w.delete("/connectors/src/offsets"), 400, &not_stopped("src"));
    w.put_empty("/connectors/src/pause");
    status_in(&w, "src", "PAUSED", 1);
    assert_error(w.patch("/connectors/src/offsets", &offsets(0)), 400, &not_stopped("src"));
    assert_error(w.delete("/connectors/src/offsets"), 400, &not_stopped("src"));
    w.put_empty("/connectors/src/resume");
    w.wait_running("src", 1);

    // Stopped: reading still works, and an alter moves the position. Lines 10–19 are
    // written while stopped; the position is set past line 14, so 15–19 follow.
    assert_eq!(w.put_empty("/connectors/src/stop"), (204, Json::Null));
    status_in(&w, "src", "STOPPED", 0);
    assert_eq!(w.get("/connectors/src/offsets"), (200, offsets(size)));
    let second = numbered("line", 10..20);
    append(&input, &second);
    let skip_to = size + second[..5].iter().map(|l| l.len() as u64 + 1).sum::<u64>();
    // Bodies that say nothing or the wrong thing are refused and change nothing.
    assert_error(
        w.patch("/connectors/src/offsets", &json!({"offsets": []})),
        400,
        "Partitions / offsets need to be provided for an alter offsets request",
    );
    assert_error(
        w.patch("/connectors/src/offsets", &json!({"offsets": [{"partition": {"filename": file}, "offset": 5}]})),
        400,
        "offsets[0].offset must be a JSON object or null, not a number",
    );
    assert_eq!(w.get("/connectors/src/offsets"), (200, offsets(size)));
    assert_eq!(
        w.patch("/connectors/src/offsets", &offsets(skip_to)),
        (200, json!({"message": "The offsets for this connector have been altered successfully"}))
    );
    assert_eq!(w.get("/connectors/src/offsets"), (200, offsets(skip_to)));
    w.put_empty("/connectors/src/resume");
    w.wait_running("src", 1);
    let mut expected: Vec<String> = first.iter().chain(&second[5..]).cloned().collect();
    wait_lines(&output, &expected);
    let size = std::fs::metadata(&input).unwrap().len();
    w.wait_for("/connectors/src/offsets", TIMEOUT, |_, b| *b == offsets(size));

    // Reset: the offsets are gone, and after resuming the whole file is read again.
    w.put_empty("/connectors/src/stop");
    status_in(&w, "src", "STOPPED", 0);
    assert_eq!(
        w.delete("/connectors/src/offsets"),
        (200, json!({"message": "The offsets for this connector have been reset successfully"}))
    );
    assert_eq!(w.get("/connectors/src/offsets"), (200, json!({"offsets": []})));
    w.put_empty("/connectors/src/resume");
    w.wait_running("src", 1);
    expected.extend(first.iter().chain(&second).cloned());
    wait_lines(&output, &expected);
    w.wait_for("/connectors/src/offsets", TIMEOUT, |_, b| *b == offsets(size));

    // An offset of null removes that partition's offset, as a reset does.
    w.put_empty("/connectors/src/stop");
    status_in(&w, "src", "STOPPED", 0);
    let remove = json!({"offsets": [{"partition": {"filename": file}, "offset": null}]});
    assert_eq!(w.patch("/connectors/src/offsets", &remove).0, 200);
    assert_eq!(w.get("/connectors/src/offsets"), (200, json!({"offsets": []})));
}

#[test]
fn sink_offsets_read_alter_and_reset() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    let w = Worker::start(dir.path(), &[]);
    create(&w, "src", &source_config(&input, "lines"));
    create(&w, "sink", &sink_config(&output, "lines"));
    let lines = numbered("line", 0..10);
    append(&input, &lines);
    wait_lines(&output, &lines);
    let partition = json!({"kafka_topic": "lines", "kafka_partition": 0});
    let offsets = |o: i64| json!({"offsets": [{"partition": partition, "offset": {"kafka_offset": o}}]});
    w.wait_for("/connectors/sink/offsets", TIMEOUT, |code, b| code == 200 && *b == offsets(10));

    assert_error(w.patch("/connectors/sink/offsets", &offsets(0)), 400, &not_stopped("sink"));
    assert_error(w.delete("/connectors/sink/offsets"), 400, &not_stopped("sink"));

    // Alter while stopped: the sink resumes at offset 7, so the last three come again.
    assert_eq!(w.put_empty("/connectors/sink/stop"), (204, Json::Null));
    status_in(&w, "sink", "STOPPED", 0);
    assert_eq!(w.get("/connectors/sink/offsets"), (200, offsets(10)));
    assert_error(
        w.patch(
            "/connectors/sink/offsets",
            &json!({"offsets": [{"partition": {"kafka_topic": "lines", "kafka_partition": -1}, "offset": {"kafka_offset": 1}}]}),
        ),
        400,
        "Kafka partitions must be valid non-negative integers: set kafka_partition in each partition",
    );
    assert_error(
        w.patch("/connectors/sink/offsets", &json!({"offsets": [{"partition": {"kafka_partition": 0}, "offset": {"kafka_offset": 1}}]})),
        400,
        "Kafka topic names must be valid strings: set kafka_topic in each partition",
    );
    assert_error(
        w.patch("/connectors/sink/offsets", &json!({"offsets": [{"partition": partition, "offset": {"kafka_offset": "x"}}]})),
        400,
        "Kafka offsets must be valid non-negative integers: set kafka_offset in each offset",
    );
    assert_eq!(w.get("/connectors/sink/offsets"), (200, offsets(10)), "refused alters change nothing");
    assert_eq!(
        w.patch("/connectors/sink/offsets", &offsets(7)),
        (200, json!({"message": "The offsets for this connector have been altered successfully"}))
    );
    assert_eq!(w.get("/connectors/sink/offsets"), (200, offsets(7)));
    w.put_empty("/connectors/sink/resume");
    w.wait_running("sink", 1);
    let mut expected: Vec<String> = lines.iter().chain(&lines[7..]).cloned().collect();
    wait_lines(&output, &expected);
    w.wait_for("/connectors/sink/offsets", TIMEOUT, |_, b| *b == offsets(10));

    // A null offset removes the partition's committed offset: everything comes again.
    w.put_empty("/connectors/sink/stop");
    status_in(&w, "sink", "STOPPED", 0);
    assert_eq!(w.patch("/connectors/sink/offsets", &json!({"offsets": [{"partition": partition, "offset": null}]})).0, 200);
    assert_eq!(w.get("/connectors/sink/offsets"), (200, json!({"offsets": []})));
    w.put_empty("/connectors/sink/resume");
    w.wait_running("sink", 1);
    expected.extend(lines.iter().cloned());
    wait_lines(&output, &expected);
    w.wait_for("/connectors/sink/offsets", TIMEOUT, |_, b| *b == offsets(10));

    // Reset: the same, through DELETE.
    w.put_empty("/connectors/sink/stop");
    status_in(&w, "sink", "STOPPED", 0);
    assert_eq!(
        w.delete("/connectors/sink/offsets"),
        (200, json!({"message": "The offsets for this connector have been reset successfully"}))
    );
    assert_eq!(w.get("/connectors/sink/offsets"), (200, json!({"offsets": []})));
    w.put_empty("/connectors/sink/resume");
    w.wait_running("sink", 1);
    expected.extend(lines.iter().cloned());
    wait_lines(&output, &expected);

    // The source was never disturbed.
    w.wait_running("src", 1);
}
