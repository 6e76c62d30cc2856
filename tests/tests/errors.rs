//! Error handling through the real binary: a poison record is skipped into a dead-letter
//! topic with Connect's context headers while the rest flows (`errors.tolerance=all`), or
//! fails the task with the stage and position in its trace (`none`).

use std::time::Duration;

use sluice_tests::{eventually, json, read_lines, Json, Worker};

/// A source writing raw lines (StringConverter) and a sink reading them as schemaless JSON:
/// a line that is not JSON is a poison record for the sink's value converter.
fn pipeline(dir: &std::path::Path, sink_extra: Json) -> (Worker, std::path::PathBuf, std::path::PathBuf) {
    let input = dir.join("in.txt");
    let output = dir.join("out.txt");
    std::fs::write(&input, "\"first\"\n42\nnot json\n\"after\"\n").unwrap();
    let w = Worker::start(dir, &[]);
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "raw",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}),
    );
    assert_eq!(code, 201, "{body}");
    let mut config = json!({"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "raw",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false"});
    for (k, v) in sink_extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    let (code, body) = w.post("/connectors", &json!({"name": "sink", "config": config}));
    assert_eq!(code, 201, "{body}");
    (w, input, output)
}

fn header<'a>(record: &'a Json, key: &str) -> Option<&'a Json> {
    record["headers"].as_array()?.iter().find(|h| h["key"] == key).map(|h| &h["value"])
}

#[test]
fn poison_record_goes_to_the_dead_letter_topic_and_the_rest_flows() {
    let dir = tempfile::tempdir().unwrap();
    let (w, _input, output) = pipeline(
        dir.path(),
        json!({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq", "errors.deadletterqueue.context.headers.enable": "true", "errors.log.enable": "true"}),
    );
    eventually(Duration::from_secs(30), "the good records", || read_lines(&output) == ["first", "42", "after"]);
    let status = w.wait_running("sink", 1);
    assert_eq!(status["tasks"][0]["state"], "RUNNING");

    let data = dir.path().join("data");
    let (code, out, err) = Worker::cli(&["topics", "consume", "dlq", "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    assert_eq!(code, 0, "{err}");
    let dead: Vec<Json> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(dead.len(), 1, "exactly the poison record: {out}");
    let d = &dead[0];
    assert_eq!(d["value"], json!("not json"), "the original bytes");
    assert_eq!(header(d, "__connect.errors.topic"), Some(&json!("raw")));
    assert_eq!(header(d, "__connect.errors.partition"), Some(&json!(0)));
    assert_eq!(header(d, "__connect.errors.offset"), Some(&json!(2)));
    assert_eq!(header(d, "__connect.errors.connector.name"), Some(&json!("sink")));
    assert_eq!(header(d, "__connect.errors.task.id"), Some(&json!(0)));
    assert_eq!(header(d, "__connect.errors.stage"), Some(&json!("VALUE_CONVERTER")));
    assert_eq!(header(d, "__connect.errors.class.name"), Some(&json!("org.apache.kafka.connect.json.JsonConverter")));
    assert_eq!(header(d, "__connect.errors.exception.class.name"), Some(&json!("org.apache.kafka.connect.errors.DataException")));
    assert!(
        header(d, "__connect.errors.exception.message").and_then(Json::as_str).is_some_and(|m| m.contains("serialization error")),
        "{d}"
    );
    assert!(header(d, "__connect.errors.exception.stacktrace").is_some());
    assert!(w.output().contains("skipping the record"), "errors.log.enable logs the failure");

    // The sink's committed offset moved past the poison record.
    w.wait_for("/connectors/sink/offsets", Duration::from_secs(20), |_, b| b["offsets"][0]["offset"]["kafka_offset"] == 4);
}

#[test]
fn with_tolerance_none_the_task_fails_with_the_stage_and_recovers_once_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let (w, input, output) = pipeline(dir.path(), json!({}));
    let status = w.wait_for("/connectors/sink/status", Duration::from_secs(30), |_, b| b["tasks"][0]["state"] == "FAILED");
    let trace = status["tasks"][0]["trace"].as_str().unwrap();
    assert!(trace.contains("stage VALUE_CONVERTER"), "{trace}");
    assert!(trace.contains("topic raw partition 0 offset 2"), "{trace}");
    // Nothing past the poison record was written or committed. (Like Connect, the batch is
    // converted before it is put, so the records before it in the batch wait too.)
    let written = read_lines(&output);
    assert!(["first", "42"].starts_with(&written.iter().map(String::as_str).collect::<Vec<_>>()), "{written:?}");
    let (_, offsets) = w.get("/connectors/sink/offsets");
    assert!(offsets["offsets"].as_array().unwrap().iter().all(|o| o["offset"]["kafka_offset"].as_i64().unwrap() <= 2), "{offsets}");
    // The worker keeps serving; the source is unaffected.
    w.wait_running("src", 1);

    // Move the sink past the bad record (stop, alter offsets, resume): it runs cleanly.
    assert_eq!(w.put_empty("/connectors/sink/stop").0, 204);
    w.wait_for("/connectors/sink/status", Duration::from_secs(20), |_, b| b["connector"]["state"] == "STOPPED");
    let (code, body) = w.patch(
        "/connectors/sink/offsets",
        &json!({"offsets": [{"partition": {"kafka_topic": "raw", "kafka_partition": 0}, "offset": {"kafka_offset": 3}}]}),
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(w.put_empty("/connectors/sink/resume").0, 202);
    w.wait_running("sink", 1);
    std::fs::OpenOptions::new().append(true).open(&input).and_then(|mut f| std::io::Write::write_all(&mut f, b"\"later\"\n")).unwrap();
    let mut expected = written.clone();
    expected.extend(["after".to_owned(), "later".to_owned()]);
    eventually(Duration::from_secs(30), "records after the poison one", || read_lines(&output) == expected);
}
