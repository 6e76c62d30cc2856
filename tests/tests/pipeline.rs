//! FileStreamSource → topic → FileStreamSink through the embedded log.

use std::time::Duration;

use sluice_tests::{eventually, json, read_lines, Json, Worker};

fn input_lines(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i % 5 {
            0 => format!("plain line {i}"),
            1 => format!("quotes \"{i}\" and \\ backslash"),
            2 => format!("unicode ✓ δ {i}"),
            3 => format!("{{\"looks\": \"like json\", \"n\": {i}}}"),
            _ => format!("tab\tseparated\t{i}"),
        })
        .collect()
}

fn file_pipeline(schemas: bool) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    let lines = input_lines(2_000);
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let schemas = schemas.to_string();
    let w = Worker::start(
        dir.path(),
        &[
            ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ("key.converter.schemas.enable", &schemas),
            ("value.converter.schemas.enable", &schemas),
        ],
    );
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "lines"}}),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "sink", "config": {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "file": output.to_str().unwrap(), "topics": "lines"}}),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    w.wait_running("sink", 1);
    eventually(Duration::from_secs(60), "the sink file to hold every line", || read_lines(&output).len() >= lines.len());
    assert_eq!(read_lines(&output), lines, "the output must equal the input, line for line");

    // The bytes in the topic are JsonConverter's, with or without the envelope.
    let data = dir.path().join("data");
    let (code, out, err) =
        Worker::cli(&["topics", "consume", "lines", "--data-dir", data.to_str().unwrap(), "--from-beginning", "--max-messages", "1"]);
    assert_eq!(code, 0, "{err}");
    let first: Json = serde_json::from_str(out.lines().next().expect("one record")).unwrap();
    if schemas == "true" {
        assert_eq!(first["value"], json!({"schema": {"type": "string", "optional": false}, "payload": "plain line 0"}));
    } else {
        assert_eq!(first["value"], json!("plain line 0"));
    }
    assert_eq!(first["key"], Json::Null);
    assert_eq!(first["topic"], "lines");
    assert_eq!(first["offset"], 0);

    let (code, topics) = w.get("/connectors/src/topics");
    assert_eq!(code, 200);
    assert_eq!(topics, json!({"src": {"topics": ["lines"]}}));
}

#[test]
fn file_to_file_with_json_schemas() {
    file_pipeline(true);
}

#[test]
fn file_to_file_with_schemaless_json() {
    file_pipeline(false);
}

#[test]
fn lines_appended_later_keep_flowing() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    let w = Worker::start(dir.path(), &[]);
    w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "t"}}),
    );
    w.post(
        "/connectors",
        &json!({"name": "sink", "config": {"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "t"}}),
    );
    w.wait_running("src", 1);
    // The file does not exist yet: the source waits for it.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&input, "a\nb\n").unwrap();
    eventually(Duration::from_secs(30), "two lines", || read_lines(&output) == ["a", "b"]);
    // A partial line is held back until it is complete.
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new().append(true).open(&input).unwrap();
    f.write_all(b"c-part").unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(read_lines(&output), ["a", "b"]);
    f.write_all(b"-done\n").unwrap();
    eventually(Duration::from_secs(30), "the completed line", || read_lines(&output) == ["a", "b", "c-part-done"]);
}

#[test]
fn sink_lines_appear_before_the_next_offset_commit() {
    // Offsets are committed once a minute here; lines must still reach the file as they are
    // put (Kafka's FileStreamSink prints each record), not only when offsets are committed.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    std::fs::write(&input, "one\ntwo\n").unwrap();
    let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "60000")]);
    w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "t"}}),
    );
    w.post(
        "/connectors",
        &json!({"name": "sink", "config": {"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "t"}}),
    );
    eventually(Duration::from_secs(20), "lines in the sink file well before a commit", || read_lines(&output) == ["one", "two"]);
}
