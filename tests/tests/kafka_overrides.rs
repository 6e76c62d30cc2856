//! Per-connector client overrides (KIP-458): `producer.override.*`, `consumer.override.*`,
//! `admin.override.*` under the worker's `connector.client.config.override.policy`, against
//! the project's broker.

use std::time::Duration;

use sluice_api::TopicPartition;
use sluice_runtime::log::kafka::{KafkaLog, KafkaOptions};
use sluice_runtime::log::{Log, LogRecord, Produce};
use sluice_tests::{eventually, json, read_lines, Json, KafkaBroker, Worker};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

fn kafka_log(bootstrap: &str) -> KafkaLog {
    let props = [("bootstrap.servers".to_owned(), bootstrap.to_owned())].into_iter().collect();
    KafkaLog::connect(KafkaOptions::from_worker_props(&props).unwrap()).unwrap()
}

/// Appends string values as JsonConverter (schemas on) writes them, to partition 0.
fn produce(bootstrap: &str, topic: &str, values: &[&str]) {
    runtime().block_on(async {
        let log = kafka_log(bootstrap);
        log.partition_count(topic).await.unwrap();
        let records = values
            .iter()
            .map(|v| Produce {
                topic: topic.to_owned(),
                partition: 0,
                record: LogRecord {
                    value: Some(json!({"schema": {"type": "string", "optional": false}, "payload": v}).to_string().into_bytes()),
                    // Recent: the broker deletes records older than retention.ms (7 days).
                    timestamp: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64,
                    ..LogRecord::default()
                },
            })
            .collect();
        log.append(records).await.unwrap();
    })
}

fn committed(bootstrap: &str, group: &str, topic: &str) -> Option<i64> {
    runtime().block_on(async { kafka_log(bootstrap).group_offsets(group).await.unwrap().get(&TopicPartition::new(topic, 0)).copied() })
}

fn topic_len(bootstrap: &str, topic: &str) -> i64 {
    runtime().block_on(async { kafka_log(bootstrap).offsets(&TopicPartition::new(topic, 0)).await.map(|(_, end)| end).unwrap_or(0) })
}

fn sink(name: &str, file: &std::path::Path, topic: &str, extra: &[(&str, &str)]) -> Json {
    let mut config = json!({"name": name, "connector.class": "FileStreamSink", "file": file.to_str().unwrap(), "topics": topic});
    for (k, v) in extra {
        config[*k] = json!(v);
    }
    json!({"name": name, "config": config})
}

/// A sink with `consumer.override.auto.offset.reset=latest` on a topic that already holds
/// records starts at its end; one without the override reads it from the beginning.
#[test]
fn kafka_sink_consumer_override_auto_offset_reset_latest_skips_old_records() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    produce(&broker.bootstrap, "held", &["old-1", "old-2", "old-3"]);
    let w = Worker::start(&dir.path().join("worker"), &[("bootstrap.servers", &broker.bootstrap), ("consumer.fetch.max.wait.ms", "100")]);
    let latest = dir.path().join("latest.txt");
    let earliest = dir.path().join("earliest.txt");
    let (code, body) = w.post("/connectors", &sink("latest", &latest, "held", &[("consumer.override.auto.offset.reset", "latest")]));
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post("/connectors", &sink("earliest", &earliest, "held", &[]));
    assert_eq!(code, 201, "{body}");
    w.wait_running("latest", 1);
    w.wait_running("earliest", 1);
    // The latest sink has positioned itself (its first commit is the end of the topic)
    // before anything new is produced.
    eventually(Duration::from_secs(30), "the latest sink commits its start position", || {
        committed(&broker.bootstrap, "connect-latest", "held").is_some()
    });
    assert_eq!(committed(&broker.bootstrap, "connect-latest", "held"), Some(3), "latest starts at the end of the topic");
    produce(&broker.bootstrap, "held", &["new-1", "new-2"]);
    eventually(Duration::from_secs(30), "both sinks write the new records", || {
        read_lines(&latest).len() >= 2 && read_lines(&earliest).len() >= 5
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(read_lines(&latest), ["new-1", "new-2"], "the override sink reads only what came after it started");
    assert_eq!(
        read_lines(&earliest),
        ["old-1", "old-2", "old-3", "new-1", "new-2"],
        "without the override a sink reads from the beginning"
    );
    // auto.offset.reset is the sink task's business: no clients of its own for that.
    assert!(!w.output().contains("task runs with its own Kafka clients"), "{}", w.output());
}

/// Producer overrides reach the source task's own producer: a valid one (gzip, a client
/// id) delivers; one librdkafka refuses fails the task with a trace naming the key. The
/// same for a sink's consumer overrides.
#[test]
fn kafka_source_producer_and_sink_consumer_overrides_apply_to_their_own_clients() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let w = Worker::start(&dir.path().join("worker"), &[("bootstrap.servers", &broker.bootstrap), ("producer.linger.ms", "5")]);
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a\nb\nc\n").unwrap();
    let config = |topic: &str, compression: &str| {
        json!({
            "connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": topic,
            "producer.override.compression.type": compression, "producer.override.client.id": "sluice-override-src",
        })
    };
    let (code, body) = w.post("/connectors", &json!({"name": "gz", "config": config("gz", "gzip")}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("gz", 1);
    eventually(Duration::from_secs(30), "the gzip source delivers its lines", || topic_len(&broker.bootstrap, "gz") >= 3);
    assert_eq!(topic_len(&broker.bootstrap, "gz"), 3);
    assert!(w.output().contains("producer.override.compression.type"), "the task's own clients are logged with their keys");

    let (code, body) = w.post("/connectors", &json!({"name": "bad", "config": config("bad", "bogus-codec")}));
    assert_eq!(code, 201, "{body}");
    let status = w.wait_for("/connectors/bad/status", Duration::from_secs(30), |_, b| b["tasks"][0]["state"] == "FAILED");
    let trace = status["tasks"][0]["trace"].as_str().unwrap();
    assert!(trace.contains("connector property producer.override.compression.type"), "{trace}");
    assert_eq!(topic_len(&broker.bootstrap, "bad"), 0);
    // The shared clients are untouched: the first source still runs.
    w.wait_running("gz", 1);

    // Consumer overrides reach the sink's readers the same way.
    let out = dir.path().join("out.txt");
    let (code, body) = w.post("/connectors", &sink("badsink", &out, "gz", &[("consumer.override.fetch.min.bytes", "lots")]));
    assert_eq!(code, 201, "{body}");
    let status = w.wait_for("/connectors/badsink/status", Duration::from_secs(30), |_, b| b["tasks"][0]["state"] == "FAILED");
    let trace = status["tasks"][0]["trace"].as_str().unwrap();
    assert!(trace.contains("connector property consumer.override.fetch.min.bytes"), "{trace}");
    let (code, body) = w.post("/connectors", &sink("goodsink", &out, "gz", &[("consumer.override.fetch.min.bytes", "1")]));
    assert_eq!(code, 201, "{body}");
    eventually(Duration::from_secs(30), "the sink with its own consumer reads the gzip topic", || read_lines(&out) == ["a", "b", "c"]);
}

/// `None` refuses every override, on POST and on validate, naming the key; `Principal`
/// refuses `auto.offset.reset` but takes the security keys (the JAAS line stays hidden).
#[test]
fn kafka_override_policy_none_and_principal() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let out = dir.path().join("out.txt");
    let offset_reset = [("consumer.override.auto.offset.reset", "latest")];

    let w = Worker::start(
        &dir.path().join("none"),
        &[("bootstrap.servers", &broker.bootstrap), ("connector.client.config.override.policy", "None")],
    );
    let (code, body) = w.post("/connectors", &sink("s", &out, "t", &offset_reset));
    assert_eq!(code, 400, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("The 'None' policy does not allow 'auto.offset.reset' to be overridden in the connector configuration."),
        "{message}"
    );
    let (code, infos) = w.put("/connector-plugins/FileStreamSink/config/validate", &sink("s", &out, "t", &offset_reset)["config"]);
    assert_eq!((code, infos["error_count"].as_i64()), (200, Some(1)), "{infos}");
    assert_eq!(
        sluice_tests::validate_errors_of(&infos, "consumer.override.auto.offset.reset"),
        ["The 'None' policy does not allow 'auto.offset.reset' to be overridden in the connector configuration."]
    );
    let (code, body) = w.post("/connectors", &sink("s", &out, "t", &[("producer.override.linger.ms", "1")]));
    assert_eq!(code, 400, "{body}");
    let (code, body) = w.post("/connectors", &sink("s", &out, "t", &[]));
    assert_eq!(code, 201, "without overrides the connector is accepted: {body}");
    drop(w);

    let w = Worker::start(
        &dir.path().join("principal"),
        &[
            ("bootstrap.servers", &broker.bootstrap),
            (
                "connector.client.config.override.policy",
                "org.apache.kafka.connect.connector.policy.PrincipalConnectorClientConfigOverridePolicy",
            ),
        ],
    );
    let (code, body) = w.post("/connectors", &sink("p", &out, "t", &offset_reset));
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("The 'Principal' policy does not allow 'auto.offset.reset'"), "{body}");
    produce(&broker.bootstrap, "principal", &["one"]);
    let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cret-override";"#;
    let (code, body) = w.post(
        "/connectors",
        &sink(
            "p",
            &out,
            "principal",
            &[("consumer.override.security.protocol", "PLAINTEXT"), ("consumer.override.sasl.jaas.config", jaas)],
        ),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("p", 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while read_lines(&out) != ["one"] {
        assert!(
            std::time::Instant::now() < deadline,
            "the sink with security overrides did not read: {:?}; output:\n{}",
            read_lines(&out),
            w.output()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, config) = w.get("/connectors/p/config");
    assert_eq!(config["consumer.override.sasl.jaas.config"], "[hidden]", "{config}");
    assert_eq!(config["consumer.override.security.protocol"], "PLAINTEXT");
    assert!(!w.output().contains("s3cret-override"), "the JAAS password never reaches the log");
}

/// On the embedded log, overrides mean nothing: accepted, ignored, one line per connector.
#[test]
fn kafka_overrides_on_the_embedded_log_are_ignored_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(&dir.path().join("worker"), &[]);
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "x\n").unwrap();
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "t",
            "tasks.max": "1", "producer.override.compression.type": "gzip"}}),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    eventually(Duration::from_secs(10), "the ignored-overrides line", || {
        w.output().contains("client overrides have no meaning on the embedded log")
    });
    assert_eq!(w.output().matches("client overrides have no meaning on the embedded log").count(), 1, "{}", w.output());
}
