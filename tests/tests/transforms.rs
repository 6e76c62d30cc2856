//! Transforms and predicates through the real binary, with connector JSON as Kafka's docs
//! write it.

use std::time::Duration;

use sluice_tests::{eventually, json, Json, Worker};

fn consume(dir: &std::path::Path, topic: &str) -> Vec<Json> {
    let data = dir.join("data");
    let (code, out, _) = Worker::cli(&["topics", "consume", topic, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn kafka_docs_chain_with_router_and_predicate() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "foo\nbar\n").unwrap();
    let w = Worker::start(dir.path(), &[]);
    // Kafka's documentation example (MakeMap + InsertSource), plus a RegexRouter that only
    // applies to topics matching a predicate.
    let config = json!({
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": input.to_str().unwrap(),
        "topic": "connect-test",
        "transforms": "MakeMap, InsertSource, Router",
        "transforms.MakeMap.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.MakeMap.field": "line",
        "transforms.InsertSource.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.InsertSource.static.field": "data_source",
        "transforms.InsertSource.static.value": "test-file-source",
        "transforms.Router.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.Router.regex": "connect-(.*)",
        "transforms.Router.replacement": "routed-$1",
        "transforms.Router.predicate": "IsConnectTopic",
        "predicates": "IsConnectTopic",
        "predicates.IsConnectTopic.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.IsConnectTopic.pattern": "connect-.*"
    });
    let (code, body) = w.post("/connectors", &json!({"name": "docs", "config": config}));
    assert_eq!(code, 201, "{body}");
    eventually(Duration::from_secs(30), "two routed records", || consume(dir.path(), "routed-test").len() == 2);
    let records = consume(dir.path(), "routed-test");
    // The documented result, byte for byte as JsonConverter writes it.
    let expected = |line: &str| {
        json!({"schema": {"type": "struct", "fields": [
            {"type": "string", "optional": false, "field": "line"},
            {"type": "string", "optional": true, "field": "data_source"}
        ], "optional": false}, "payload": {"line": line, "data_source": "test-file-source"}})
    };
    assert_eq!(records[0]["value"], expected("foo"));
    assert_eq!(records[1]["value"], expected("bar"));
    assert!(consume(dir.path(), "connect-test").is_empty(), "nothing stays on the original topic");

    // The same chain with the predicate negated: the router does not apply.
    let mut negated = config.clone();
    negated["topic"] = json!("other-test");
    negated["transforms.Router.negate"] = json!("true");
    negated["predicates.IsConnectTopic.pattern"] = json!("connect-.*");
    w.post("/connectors", &json!({"name": "negated", "config": negated}));
    eventually(Duration::from_secs(30), "unrouted records", || consume(dir.path(), "other-test").len() == 2);
    let (_, topics) = w.get("/connectors/docs/topics");
    assert_eq!(topics, json!({"docs": {"topics": ["routed-test"]}}), "active topics are the transformed ones");
}

#[test]
fn a_failing_transform_goes_to_the_dead_letter_topic_and_the_source_moves_on() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "1\n2\nnot-a-number\n4\n").unwrap();
    let w = Worker::start(dir.path(), &[("value.converter.schemas.enable", "false")]);
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "cast", "config": {
            "connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "numbers",
            "transforms": "toInt", "transforms.toInt.type": "org.apache.kafka.connect.transforms.Cast$Value", "transforms.toInt.spec": "int32",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "numbers-dlq", "errors.deadletterqueue.context.headers.enable": "true"
        }}),
    );
    assert_eq!(code, 201, "{body}");
    eventually(Duration::from_secs(30), "three numbers", || consume(dir.path(), "numbers").len() == 3);
    let values: Vec<Json> = consume(dir.path(), "numbers").into_iter().map(|r| r["value"].clone()).collect();
    assert_eq!(values, [json!(1), json!(2), json!(4)]);
    let dead = consume(dir.path(), "numbers-dlq");
    assert_eq!(dead.len(), 1);
    let header = |k: &str| dead[0]["headers"].as_array().unwrap().iter().find(|h| h["key"] == k).map(|h| h["value"].clone());
    assert_eq!(header("__connect.errors.stage"), Some(json!("TRANSFORMATION")));
    assert_eq!(header("__connect.errors.source.offset"), Some(json!({"position": 17})), "the source position just after the bad line");
    assert_eq!(dead[0]["value"], json!("not-a-number"));
    // The source offset moved past the bad record.
    w.wait_for("/connectors/cast/offsets", Duration::from_secs(20), |_, b| b["offsets"][0]["offset"]["position"] == 19);

    // With errors.tolerance=none the task fails at the TRANSFORMATION stage.
    let (code, _) = w.post(
        "/connectors",
        &json!({"name": "strict", "config": {
            "connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "strict",
            "transforms": "toInt", "transforms.toInt.type": "org.apache.kafka.connect.transforms.Cast$Value", "transforms.toInt.spec": "int32"
        }}),
    );
    assert_eq!(code, 201);
    let status = w.wait_for("/connectors/strict/status", Duration::from_secs(30), |_, b| b["tasks"][0]["state"] == "FAILED");
    let trace = status["tasks"][0]["trace"].as_str().unwrap();
    assert!(trace.contains("stage TRANSFORMATION"), "{trace}");
}
