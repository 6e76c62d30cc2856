//! Bad requests against a worker that is moving data. Each must be refused with a status
//! and a message that names the problem, and none may disturb the pipeline that runs
//! throughout (a FileStreamSource → FileStreamSink pair, the "canary"): after each group
//! of bad requests the canary is still RUNNING, its config unchanged, and a fresh line
//! still goes through.

use std::path::PathBuf;

use sluice_tests::{json, read_lines, Json, Worker};

use crate::rest::{
    append, assert_error, create, error_message, named, sink_config, source_config, status_in, wait_lines, DATAGEN_CLASS, DISCARD_CLASS,
    SINK_CLASS, SOURCE_CLASS, VERSION,
};

struct Canary {
    input: PathBuf,
    output: PathBuf,
    lines: Vec<String>,
    source: Json,
    sink: Json,
}

impl Canary {
    const SOURCE: &str = "canary-src";
    const SINK: &str = "canary-sink";

    fn start(w: &Worker, dir: &std::path::Path) -> Canary {
        let input = dir.join("canary-in.txt");
        let output = dir.join("canary-out.txt");
        let source = source_config(&input, "canary");
        let sink = sink_config(&output, "canary");
        create(w, Self::SOURCE, &source);
        create(w, Self::SINK, &sink);
        let mut c = Canary { input, output, lines: Vec::new(), source, sink };
        c.assert_alive(w, "started");
        c
    }

    /// Both connectors RUNNING right now (no waiting), their configs as created, and a new
    /// line reaches the output.
    #[track_caller]
    fn assert_alive(&mut self, w: &Worker, after: &str) {
        for name in [Self::SOURCE, Self::SINK] {
            let (code, status) = w.get(&format!("/connectors/{name}/status"));
            assert_eq!(code, 200, "{name} after {after}: {status}");
            assert_eq!(status["connector"]["state"], "RUNNING", "{name} after {after}: {status}");
            assert_eq!(status["tasks"].as_array().map(Vec::len), Some(1), "{name} after {after}: {status}");
            assert_eq!(status["tasks"][0]["state"], "RUNNING", "{name} after {after}: {status}");
        }
        assert_eq!(w.get(&format!("/connectors/{}/config", Self::SOURCE)), (200, named(&self.source, Self::SOURCE)), "after {after}");
        assert_eq!(w.get(&format!("/connectors/{}/config", Self::SINK)), (200, named(&self.sink, Self::SINK)), "after {after}");
        let line = format!("canary {} after {after}", self.lines.len());
        append(&self.input, std::slice::from_ref(&line));
        self.lines.push(line);
        wait_lines(&self.output, &self.lines);
    }
}

/// POSTs a connector that must be refused with 400, checks nothing was created, and returns
/// the message.
#[track_caller]
fn refused(w: &Worker, name: &str, config: Json) -> String {
    let message = error_message(w.post("/connectors", &json!({"name": name, "config": config})), 400);
    assert_error(w.get(&format!("/connectors/{name}")), 404, &format!("Connector {name} not found"));
    message
}

/// Connect's wording for a config that fails validation.
fn invalid(errors: &[&str]) -> String {
    format!(
        "Connector configuration is invalid and contains the following {} error(s):\n{}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
        errors.len(),
        errors.join("\n")
    )
}

#[test]
fn bad_requests_are_named_and_leave_a_running_pipeline_alone() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let mut canary = Canary::start(&w, dir.path());
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    let src = source_config(&input, "t");
    let sink = sink_config(&output, "t");

    // Bodies that are not what they should be.
    let m = error_message(w.send_raw("POST", "/connectors", r#"{"name": "x", "config": {"#), 400);
    assert!(m.starts_with("Request body is not valid JSON: ") && m.contains("line 1"), "{m}");
    let m = error_message(w.send_raw("PUT", "/connectors/canary-src/config", "not json"), 400);
    assert!(m.starts_with("Request body is not valid JSON: "), "{m}");
    let m = error_message(w.send_raw("PATCH", "/connectors/canary-src/config", r#"{"batch.size": }"#), 400);
    assert!(m.starts_with("Request body is not valid JSON: "), "{m}");
    assert_error(w.send_raw("POST", "/connectors", ""), 400, "Request body is empty: expected a JSON document");
    assert_error(w.send_raw("POST", "/connectors", "[1, 2]"), 400, "Request body must be a JSON object, not an array");
    assert_error(
        w.post("/connectors", &json!({"name": "x"})),
        400,
        "Request body has no \"config\": give the connector configuration as a JSON object",
    );
    assert_error(
        w.post("/connectors", &json!({"name": "x", "config": src, "initialState": "PAUSED"})),
        400,
        "Unrecognized field \"initialState\" in the request body: expected \"name\", \"config\" and \"initial_state\"",
    );
    assert_error(
        w.post("/connectors", &json!({"name": "x", "config": src, "initial_state": "SLEEPING"})),
        400,
        "Invalid initial_state 'SLEEPING': expected RUNNING, PAUSED or STOPPED",
    );
    assert_error(
        w.post(
            "/connectors",
            &json!({"name": "x", "config": {"connector.class": "FileStreamSource", "file": {"path": "/x"}, "topic": "t"}}),
        ),
        400,
        "Connector configuration value for 'file' must be a string, not an object",
    );
    assert_error(
        w.post("/connectors", &json!({"name": "", "config": src})),
        400,
        "Connector name is missing or empty: give a non-empty \"name\"",
    );
    assert_error(w.post("/connectors", &json!({"config": src})), 400, "Connector name is missing or empty: give a non-empty \"name\"");
    let reply = w.call("POST", "/connectors", Some("text/plain"), &json!({"name": "x", "config": src}).to_string());
    assert_eq!((reply.status, reply.body), (415, json!({"error_code": 415, "message": "HTTP 415 Unsupported Media Type"})));
    assert_error(w.get("/connectors/x"), 404, "Connector x not found");
    canary.assert_alive(&w, "malformed bodies");

    // Configs that fail validation: 400, the problem named, nothing created.
    let m = refused(&w, "x", json!({"connector.class": "com.example.NoSuchConnector", "topic": "t"}));
    assert!(
        m.starts_with("Failed to find any class that implements Connector and which name matches com.example.NoSuchConnector, available connectors are: "),
        "{m}"
    );
    for class in [SOURCE_CLASS, SINK_CLASS, DATAGEN_CLASS, DISCARD_CLASS] {
        assert!(m.contains(class), "{class} not listed in {m}");
    }
    let m = refused(&w, "x", json!({"file": "/tmp/in.txt", "topic": "t"}));
    assert!(m.contains("contains no connector type") && m.contains("connector.class"), "{m}");
    let m = refused(&w, "x", json!({"connector.class": "  ", "file": "/tmp/in.txt", "topic": "t"}));
    assert!(m.contains("contains no connector type"), "{m}");
    assert_eq!(
        refused(&w, "x", json!({"connector.class": "FileStreamSink", "topics": "t"})),
        invalid(&["Missing required configuration \"file\" which has no default value."])
    );
    assert_eq!(
        refused(&w, "x", json!({"connector.class": "FileStreamSource", "file": "/tmp/in.txt"})),
        invalid(&["Missing required configuration \"topic\" which has no default value."])
    );
    let mut c = src.clone();
    c["tasks.max"] = json!("0");
    assert_eq!(refused(&w, "x", c), invalid(&["Invalid value 0 for configuration tasks.max: Value must be at least 1"]));
    let mut c = src.clone();
    c["tasks.max"] = json!("abc");
    assert_eq!(refused(&w, "x", c), invalid(&[
            "Invalid value abc for configuration tasks.max: Not a number of type INT",
            "Invalid value null for configuration tasks.max: Value must be non-null",
        ]));
    let mut c = src.clone();
    c["batch.sise"] = json!("10");
    assert_eq!(refused(&w, "x", c), invalid(&[&format!("Unknown configuration key 'batch.sise': {SOURCE_CLASS} does not support it")]));
    let mut c = src.clone();
    c["transforms"] = json!("mask");
    c["transforms.mask.type"] = json!("org.apache.kafka.connect.transforms.MaskField$Value");
    let m = refused(&w, "x", c);
    // A transform missing its required key is refused naming the prefixed key.
    assert!(m.contains("transforms.mask.fields"), "{m}");
    let mut c = src.clone();
    c["transforms"] = json!("route");
    c["transforms.route.type"] = json!("com.example.NoSuchTransform");
    let m = refused(&w, "x", c);
    assert!(m.contains("transforms.route.type") && m.contains("RegexRouter"), "an unknown transform class lists the available ones: {m}");
    assert_eq!(
        refused(&w, "x", json!({"connector.class": "FileStreamSink", "file": output.to_str().unwrap()})),
        invalid(&["Must configure one of topics or topics.regex", "Must configure one of topics or topics.regex"])
    );
    let mut c = sink.clone();
    c["topics.regex"] = json!("t.*");
    assert_eq!(refused(&w, "x", c), invalid(&["topics and topics.regex are mutually exclusive options, but both are set."; 2]));
    let mut c = sink.clone();
    c["value.converter"] = json!("com.example.NoSuchConverter");
    assert_eq!(
        refused(&w, "x", c),
        invalid(&["Invalid value com.example.NoSuchConverter for configuration value.converter: Class com.example.NoSuchConverter could not be found."])
    );
    // Several problems at once are all listed.
    let m = refused(&w, "x", json!({"connector.class": "FileStreamSink", "tasks.max": "0"}));
    assert!(m.starts_with("Connector configuration is invalid and contains the following 4 error(s):\n"), "{m}");
    for part in ["tasks.max", "\"file\"", "topics"] {
        assert!(m.contains(part), "{part} not named in {m}");
    }
    assert_eq!(w.get("/connectors").1.as_array().map(Vec::len), Some(2), "only the canary exists");
    canary.assert_alive(&w, "invalid configs");

    // Names that exist, names that do not, paths and methods nobody serves.
    assert_error(w.post("/connectors", &json!({"name": Canary::SOURCE, "config": src})), 409, "Connector canary-src already exists");
    assert_error(w.post("/connectors", &json!({"name": Canary::SINK, "config": canary.sink})), 409, "Connector canary-sink already exists");
    let ghost = "Connector ghost not found";
    for path in [
        "/connectors/ghost",
        "/connectors/ghost/config",
        "/connectors/ghost/tasks",
        "/connectors/ghost/topics",
        "/connectors/ghost/offsets",
    ] {
        assert_error(w.get(path), 404, ghost);
    }
    // Statuses have Connect's own wording.
    assert_error(w.get("/connectors/ghost/status"), 404, "No status found for connector ghost");
    assert_error(w.get("/connectors/ghost/tasks/0/status"), 404, "No status found for task ghost-0");
    assert_error(w.delete("/connectors/ghost"), 404, ghost);
    assert_error(w.delete("/connectors/ghost/offsets"), 404, ghost);
    for path in ["/connectors/ghost/pause", "/connectors/ghost/resume", "/connectors/ghost/stop", "/connectors/ghost/topics/reset"] {
        assert_error(w.put_empty(path), 404, ghost);
    }
    assert_error(w.post_empty("/connectors/ghost/restart"), 404, ghost);
    assert_error(w.post_empty("/connectors/ghost/tasks/0/restart"), 404, ghost);
    assert_error(w.patch("/connectors/ghost/config", &json!({"batch.size": "5"})), 404, ghost);
    assert_error(
        w.patch("/connectors/ghost/offsets", &json!({"offsets": [{"partition": {"filename": "/x"}, "offset": {"position": 0}}]})),
        404,
        ghost,
    );
    assert_error(w.get("/connectors/ghost/nothing"), 404, "HTTP 404 Not Found");
    assert_error(w.get("/connectors/canary-src/tasks/first/status"), 404, "HTTP 404 Not Found");
    assert_error(w.get("/admin/nothing"), 404, "HTTP 404 Not Found");
    // A wrong method on a connector's paths must not act on it.
    assert_error(w.delete("/connectors/canary-src/status"), 405, "HTTP 405 Method Not Allowed");
    assert_error(w.delete("/connectors/canary-src/config"), 405, "HTTP 405 Method Not Allowed");
    assert_error(w.post_empty("/connectors/canary-src/pause"), 405, "HTTP 405 Method Not Allowed");
    assert_error(w.get("/connectors/canary-src/stop"), 405, "HTTP 405 Method Not Allowed");
    assert_error(w.get("/connectors/canary-src/restart"), 405, "HTTP 405 Method Not Allowed");
    assert_error(w.put_empty("/connectors/canary-src"), 405, "HTTP 405 Method Not Allowed");
    assert_error(
        w.post_empty("/connectors/canary-src/restart?includeTasks=yes"),
        400,
        "Invalid value 'yes' for query parameter includeTasks: expected true or false",
    );
    assert_error(w.get("/connectors/canary-src/tasks/9/status"), 404, "No status found for task canary-src-9");
    assert_error(w.post_empty("/connectors/canary-src/tasks/9/restart"), 404, "Task canary-src-9 not found");
    // Offsets of a running connector cannot change.
    let offsets = json!({"offsets": [{"partition": {"filename": canary.input.to_str().unwrap()}, "offset": {"position": 0}}]});
    assert_error(w.patch("/connectors/canary-src/offsets", &offsets), 400, &crate::rest::not_stopped("canary-src"));
    assert_error(w.delete("/connectors/canary-sink/offsets"), 400, &crate::rest::not_stopped("canary-sink"));
    canary.assert_alive(&w, "unknown names, paths and methods");

    // Bad updates of the running connectors themselves are refused, and they keep their
    // config and keep running.
    let mut c = canary.source.clone();
    c["tasks.max"] = json!("abc");
    assert_eq!(
        error_message(w.put("/connectors/canary-src/config", &c), 400),
        invalid(&[
            "Invalid value abc for configuration tasks.max: Not a number of type INT",
            "Invalid value null for configuration tasks.max: Value must be non-null",
        ])
    );
    assert_eq!(
        error_message(w.patch("/connectors/canary-src/config", &json!({"tasks.max": "0"})), 400),
        invalid(&["Invalid value 0 for configuration tasks.max: Value must be at least 1"])
    );
    assert_eq!(
        error_message(w.patch("/connectors/canary-src/config", &json!({"topic": null})), 400),
        invalid(&["Missing required configuration \"topic\" which has no default value."])
    );
    assert_eq!(
        error_message(w.patch("/connectors/canary-sink/config", &json!({"topics": null})), 400),
        invalid(&["Must configure one of topics or topics.regex", "Must configure one of topics or topics.regex"])
    );
    let m = error_message(w.patch("/connectors/canary-sink/config", &json!({"transforms": "mask"})), 400);
    assert!(m.contains("transforms.mask.type"), "a transform alias without a type is named: {m}");
    assert_eq!(
        error_message(w.put("/connectors/canary-src/config", &named(&canary.source, "other")), 400),
        "Connector name configuration (other) doesn't match connector name in the URL (canary-src)"
    );
    let m = error_message(w.put("/connectors/canary-src/config", &json!({"connector.class": "com.example.Nope"})), 400);
    assert!(m.starts_with("Failed to find any class that implements Connector"), "{m}");
    // A connector keeps its kind: a source cannot become a sink under the same name.
    let m = error_message(w.put("/connectors/canary-src/config", &sink_config(&output, "t")), 400);
    assert!(m.contains("canary-src") && m.contains("cannot change"), "{m}");
    let m = error_message(w.send_raw("PUT", "/connectors/canary-sink/config", r#"{"file": "#), 400);
    assert!(m.starts_with("Request body is not valid JSON"), "{m}");
    canary.assert_alive(&w, "bad updates of the canary");
}

/// As Kafka's FileStreamSourceTask: a missing file is waited for (the task runs), any other
/// reason it cannot be opened (here a path through a regular file) fails the task, so health
/// checks see the broken pipeline; the task config is the connector's with `task.class`.
#[test]
fn a_source_whose_file_cannot_be_opened_fails_but_a_missing_one_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let regular = dir.path().join("regular.txt");
    std::fs::write(&regular, "x\n").unwrap();
    create(&w, "through-a-file", &source_config(&regular.join("x"), "t1"));
    let status = w.wait_for("/connectors/through-a-file/status", crate::rest::TIMEOUT, |code, b| code == 200 && b["tasks"][0]["state"] == "FAILED");
    let trace = status["tasks"][0]["trace"].as_str().unwrap();
    assert!(trace.contains("could not open") && trace.contains("Not a directory"), "{trace}");
    assert!(!trace.contains("Retriable"), "a fatal failure, not a retry: {trace}");

    let missing = dir.path().join("later.txt");
    create(&w, "waiting", &source_config(&missing, "t2"));
    status_in(&w, "waiting", "RUNNING", 1);
    let (code, tasks) = w.get("/connectors/waiting/tasks");
    assert_eq!(code, 200);
    assert_eq!(
        tasks[0]["config"],
        json!({"connector.class": "FileStreamSource", "file": missing.to_str().unwrap(), "name": "waiting",
               "task.class": "org.apache.kafka.connect.file.FileStreamSourceTask", "topic": "t2"}),
        "{tasks}"
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(w.get("/connectors/waiting/status").1["tasks"][0]["state"], "RUNNING", "a missing file is waited for");
}

#[test]
fn a_sink_that_cannot_open_its_file_fails_and_runs_once_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let mut canary = Canary::start(&w, dir.path());
    let wid = format!("127.0.0.1:{}", w.port);

    // The config is valid, so the connector is created; its task cannot open the file.
    let missing = dir.path().join("no-such-dir").join("out.txt");
    create(&w, "broken", &sink_config(&missing, "canary"));
    let status = w.wait_for("/connectors/broken/status", crate::rest::TIMEOUT, |code, b| code == 200 && b["tasks"][0]["state"] == "FAILED");
    assert_eq!(status["connector"], json!({"state": "RUNNING", "worker_id": wid, "version": VERSION}), "{status}");
    let task = &status["tasks"][0];
    let mut keys: Vec<&String> = task.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["id", "state", "trace", "version", "worker_id"], "{task}");
    let trace = task["trace"].as_str().unwrap();
    assert!(trace.contains(missing.to_str().unwrap()), "the trace must name the path: {trace}");
    assert_eq!(w.get("/connectors/broken/tasks/0/status"), (200, task.clone()));
    assert!(!missing.exists());

    // The worker keeps serving, and the canary keeps moving.
    assert_eq!(w.get("/health").0, 200);
    canary.assert_alive(&w, "a task failed");

    // Restarting only what failed restarts the task (202, RESTARTING), which fails again.
    let (code, body) = w.post_empty("/connectors/broken/restart?includeTasks=true&onlyFailed=true");
    assert_eq!(code, 202, "{body}");
    assert_eq!(body["connector"]["state"], "RUNNING", "{body}");
    assert_eq!(body["tasks"], json!([{"id": 0, "state": "RESTARTING", "worker_id": wid, "version": VERSION}]));
    w.wait_for("/connectors/broken/status", crate::rest::TIMEOUT, |_, b| b["tasks"][0]["state"] == "FAILED");

    // Fixing the config with PUT brings it up, and it catches up from the topic's start.
    let fixed = dir.path().join("fixed.txt");
    let (code, info) = w.put("/connectors/broken/config", &sink_config(&fixed, "canary"));
    assert_eq!(code, 200, "{info}");
    let status = w.wait_running("broken", 1);
    assert!(status["tasks"][0].get("trace").is_none(), "a running task has no trace: {status}");
    wait_lines(&fixed, &canary.lines);
    canary.assert_alive(&w, "the broken sink was fixed");
    wait_lines(&fixed, &canary.lines);
    assert_eq!(read_lines(&canary.output), canary.lines);
    status_in(&w, "broken", "RUNNING", 1);
}
