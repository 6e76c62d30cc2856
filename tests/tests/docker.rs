//! The container image's behaviour, without a Docker engine: run the image's entrypoint
//! command on the host with only `CONNECT_*` environment variables, as `docker run` would.

use std::time::Duration;

use sluice_tests::{eventually, json, read_lines, Launch, Worker};

/// The ENTRYPOINT/CMD of docker/Dockerfile, so the test runs what the image runs.
fn image_command() -> (String, Vec<String>) {
    let dockerfile = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docker/Dockerfile")).expect("docker/Dockerfile");
    let entry = dockerfile.lines().rev().find_map(|l| l.strip_prefix("ENTRYPOINT ")).expect("an ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(entry).expect("ENTRYPOINT in JSON form");
    let cmd: Vec<String> = dockerfile
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("CMD "))
        .map(|c| serde_json::from_str(c).expect("CMD in JSON form"))
        .unwrap_or_default();
    (entry[0].clone(), entry[1..].iter().chain(cmd.iter()).cloned().collect())
}

#[test]
fn image_runs_on_environment_variables_alone() {
    let (program, args) = image_command();
    assert_eq!(program, "/usr/local/bin/sluice", "the image runs the sluice binary");
    assert!(args.is_empty(), "the image passes no arguments, so configuration comes from the environment: {args:?}");

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("volume");
    let env = vec![
        ("CONNECT_DATA_DIR".to_owned(), data.display().to_string()),
        ("CONNECT_OFFSET_FLUSH_INTERVAL_MS".to_owned(), "500".to_owned()),
        ("CONNECT_VALUE_CONVERTER".to_owned(), "org.apache.kafka.connect.storage.StringConverter".to_owned()),
        ("CONNECT_REST_ADVERTISED_HOST_NAME".to_owned(), "sluice.example".to_owned()),
    ];
    let w = Worker::launch(dir.path(), Launch::EnvOnly { env });
    let (code, root) = w.get("/");
    assert_eq!(code, 200);
    assert!(root["version"].is_string(), "{root}");

    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    std::fs::write(&input, "hello\nworld\n").unwrap();
    w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "t"}}),
    );
    w.post(
        "/connectors",
        &json!({"name": "sink", "config": {"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "t"}}),
    );
    let status = w.wait_running("src", 1);
    assert_eq!(
        status["connector"]["worker_id"],
        json!(format!("sluice.example:{}", w.port)),
        "rest.advertised.host.name from the environment"
    );
    eventually(Duration::from_secs(30), "both lines", || read_lines(&output) == ["hello", "world"]);
    assert!(data.join("topics").is_dir(), "the embedded log lives in CONNECT_DATA_DIR");
    // The StringConverter from the environment wrote plain text into the topic.
    let (code, out, err) = Worker::cli(&["topics", "consume", "t", "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    assert_eq!(code, 0, "{err}");
    let values: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["value"].clone()).collect();
    assert_eq!(values, vec![json!("hello"), json!("world")]);
}
