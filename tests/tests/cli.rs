//! The `sluice` command line: version, topics reader, and start-up errors.

use sluice_tests::{json, Worker};

#[test]
fn version_prints_the_crate_version() {
    let (code, out, _) = Worker::cli(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), format!("sluice {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn topics_reader_lists_describes_and_consumes_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "one\ntwo\nthree\n").unwrap();
    let w = Worker::start(dir.path(), &[("value.converter", "org.apache.kafka.connect.storage.StringConverter")]);
    w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "words"}}),
    );
    w.wait_running("src", 1);
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    sluice_tests::eventually(std::time::Duration::from_secs(30), "three records", || {
        let (_, out, _) = Worker::cli(&["topics", "consume", "words", "--data-dir", data, "--from-beginning"]);
        out.lines().count() == 3
    });
    let (code, out, err) = Worker::cli(&["topics", "list", "--data-dir", data]);
    assert_eq!(code, 0, "{err}");
    let topics: Vec<&str> = out.lines().collect();
    for t in ["words", "connect-configs", "connect-offsets", "connect-status"] {
        assert!(topics.contains(&t), "{t} missing from {topics:?}");
    }
    let (code, out, err) = Worker::cli(&["topics", "describe", "words", "--data-dir", data]);
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["topic"], "words");
    assert_eq!(d["partitions"][0]["end_offset"], 3);
    let (code, out, _) = Worker::cli(&["topics", "consume", "words", "--data-dir", data, "--offset", "1", "--partition", "0"]);
    assert_eq!(code, 0);
    let values: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["value"].clone()).collect();
    assert_eq!(values, vec![json!("two"), json!("three")]);
    // Without --from-beginning the reader starts at the end, as a console consumer does.
    let (_, out, _) = Worker::cli(&["topics", "consume", "words", "--data-dir", data]);
    assert_eq!(out, "");
    // The stored offset is Connect's: key ["src",{"filename":…}], value {"position":N}.
    let key = json!(["src", {"filename": input.to_str().unwrap()}]);
    sluice_tests::eventually(std::time::Duration::from_secs(30), "the committed offset after the third line", || {
        let (_, out, _) = Worker::cli(&["topics", "consume", "connect-offsets", "--data-dir", data, "--from-beginning"]);
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .any(|r| r["key"] == key && r["value"] == json!({"position": 14}))
    });
    let (code, _, err) = Worker::cli(&["topics", "consume", "nope", "--data-dir", data]);
    assert_ne!(code, 0);
    assert!(err.contains("topic nope does not exist"), "{err}");
}

#[test]
fn bad_worker_config_is_a_clear_start_up_error() {
    let dir = tempfile::tempdir().unwrap();
    let props = dir.path().join("w.properties");
    std::fs::write(&props, "rest.port=notaport\n").unwrap();
    let (code, _, err) = Worker::cli(&["standalone", props.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("rest.port"), "{err}");
    let (code, _, err) = Worker::cli(&["standalone", dir.path().join("missing.properties").to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("missing.properties"), "{err}");
}
