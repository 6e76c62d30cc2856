//! Standalone mode on Kafka: data topics and sink groups in the broker, the worker's own
//! state in the embedded log. SIGKILL mid-stream loses nothing.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::time::Duration;

use sluice_api::TopicPartition;
use sluice_runtime::log::kafka::{KafkaLog, KafkaOptions};
use sluice_runtime::log::CleanupPolicy;
use sluice_runtime::log::Log;
use sluice_tests::{assert_first_deliveries, eventually, json, read_lines, KafkaBroker, Launch, LineWriter, Worker};

fn kafka_log(bootstrap: &str) -> KafkaLog {
    let props = [("bootstrap.servers".to_owned(), bootstrap.to_owned())].into_iter().collect();
    KafkaLog::connect(KafkaOptions::from_worker_props(&props).unwrap()).unwrap()
}

/// Every record value of a topic, read back from the broker (none while the worker has not
/// created the topic yet), and the broker's topics.
fn topic_values(bootstrap: &str, topic: &str) -> (Vec<String>, Vec<String>) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.block_on(async {
        let log = kafka_log(bootstrap);
        let tp = TopicPartition::new(topic, 0);
        let (mut next, end) = match log.offsets(&tp).await {
            Ok(bounds) => bounds,
            Err(sluice_runtime::log::LogError::UnknownPartition { .. } | sluice_runtime::log::LogError::UnknownTopic(_)) => (0, 0),
            Err(e) => panic!("reading the offsets of {topic}: {e}"),
        };
        let mut values = Vec::new();
        while next < end {
            let batch = log.read(&tp, next, 1 << 20, Duration::from_secs(1)).await.unwrap();
            next = batch.last().map(|r| r.offset + 1).expect("records up to the end");
            // JsonConverter with schemas: {"schema":…,"payload":"line-…"}.
            values.extend(batch.into_iter().map(|r| {
                let v: sluice_tests::Json = serde_json::from_slice(&r.record.value.unwrap()).unwrap();
                v["payload"].as_str().unwrap().to_owned()
            }));
        }
        (values, log.list_topics().await.unwrap())
    })
}

#[test]
fn standalone_on_kafka_survives_sigkill_mid_stream() {
    const TOTAL: usize = 6_000;
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    std::fs::write(&input, "").unwrap();
    let mut w = Worker::start(
        &dir.path().join("worker"),
        &[
            ("bootstrap.servers", &broker.bootstrap),
            ("offset.flush.interval.ms", "200"),
            ("consumer.fetch.max.wait.ms", "100"),
            ("producer.linger.ms", "5"),
        ],
    );
    w.start_file_pipeline(&input, &output, "stream", &[("batch.size", "500")]);

    let writer = LineWriter::start(&input, TOTAL, Duration::from_millis(20));
    let mut kills = 0;
    while !writer.is_done() || kills < 2 {
        std::thread::sleep(Duration::from_millis(300 + 200 * kills));
        w.kill9();
        kills += 1;
        w.restart();
        w.wait_running("src", 1);
        w.wait_running("sink", 1);
        if kills >= 4 {
            break;
        }
    }
    writer.join();

    eventually(Duration::from_secs(90), "every line in the output file", || {
        read_lines(&output).into_iter().collect::<BTreeSet<_>>().len() >= TOTAL
    });
    let out = read_lines(&output);
    assert_first_deliveries(&out, TOTAL, "the output file");

    // The records are in the broker's topic (the source may have sent some twice after a
    // SIGKILL: at least once), and only the data topic is there: the worker's own topics
    // stay in its embedded log.
    let (values, topics) = topic_values(&broker.bootstrap, "stream");
    assert_first_deliveries(&values, TOTAL, "the Kafka topic");
    assert!(topics.contains(&"stream".to_owned()), "{topics:?}");
    assert!(!topics.iter().any(|t| t.starts_with("connect-")), "internal topics must not be in Kafka: {topics:?}");
    assert!(dir.path().join("worker/data/topics/connect-offsets").exists(), "the offsets topic lives in the embedded log");
    eprintln!("kafka crash test: {kills} SIGKILLs, {TOTAL} lines, {} in the topic, {} in the output", values.len(), out.len());
}

fn describe(bootstrap: &str, topic: &str) -> Option<sluice_runtime::log::TopicDescription> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async { kafka_log(bootstrap).describe_topic(topic).await.unwrap() })
}

/// `sluice distributed` with one worker: configs, offsets and statuses live in Kafka's
/// internal topics, so a worker whose whole directory is gone comes back with its
/// connectors and resumes its source where its committed offsets say.
#[test]
fn distributed_single_worker_keeps_its_state_in_kafka() {
    const TOTAL: usize = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let input = dir.path().join("in.txt");
    let text: String = (0..TOTAL).map(|i| format!("line-{i:06}\n")).collect();
    std::fs::write(&input, text).unwrap();
    let props: Vec<(String, String)> = [
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("group.id", "sluice-cluster"),
        ("config.storage.topic", "my-configs"),
        ("offset.storage.topic", "my-offsets"),
        ("status.storage.topic", "my-status"),
        ("offset.storage.partitions", "3"),
        ("offset.flush.interval.ms", "200"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let worker_dir = dir.path().join("worker");
    let mut w = Worker::launch(&worker_dir, Launch::Distributed { props: props.clone() });
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "lines"}}),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    let count = || topic_values(&broker.bootstrap, "lines").0.len();
    eventually(Duration::from_secs(60), "every line in the topic", || count() >= TOTAL);
    // Let an offset flush pass, then lose the worker and everything it had on disk.
    std::thread::sleep(Duration::from_millis(1500));
    w.kill9();
    std::fs::remove_dir_all(&worker_dir).unwrap();
    assert!(!worker_dir.join("sluice-data").exists());

    // A new worker in a new group: noida 0.2.3 never expires the SIGKILLed member
    // (tests/services/kafka-quirks/group-session-expiry.py), so a worker joining the old
    // group would wait for it forever. The state lives in the topics, not the group.
    let props: Vec<(String, String)> =
        props.into_iter().map(|(k, v)| if k == "group.id" { (k, "sluice-cluster-after-loss".to_owned()) } else { (k, v) }).collect();
    let w = Worker::launch(&worker_dir, Launch::Distributed { props });
    w.wait_running("src", 1);
    let (code, body) = w.get("/connectors/src/config");
    assert_eq!((code, body["topic"].as_str()), (200, Some("lines")), "{body}");
    // More input: the source resumes after what it had committed, not from the start.
    let mut f = std::fs::OpenOptions::new().append(true).open(&input).unwrap();
    f.write_all(b"line-after-restart\n").unwrap();
    eventually(Duration::from_secs(60), "the new line in the topic", || {
        topic_values(&broker.bootstrap, "lines").0.iter().any(|v| v == "line-after-restart")
    });
    let (values, topics) = topic_values(&broker.bootstrap, "lines");
    assert_eq!(values.len(), TOTAL + 1, "the source resumed from its committed offset (no re-read of the file)");

    for t in ["my-configs", "my-offsets", "my-status"] {
        assert!(topics.contains(&t.to_owned()), "{t} in Kafka: {topics:?}");
        let d = describe(&broker.bootstrap, t).unwrap();
        assert_eq!(d.config.cleanup, CleanupPolicy::Compact, "{t} is compacted");
    }
    assert_eq!(describe(&broker.bootstrap, "my-configs").unwrap().partitions.len(), 1, "the config topic has one partition");
    assert_eq!(describe(&broker.bootstrap, "my-offsets").unwrap().partitions.len(), 3);
    assert!(!worker_dir.join("sluice-data").exists(), "distributed mode keeps nothing on local disk");
}

#[test]
fn distributed_mode_requires_connects_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("worker.properties");
    std::fs::write(&file, "bootstrap.servers=127.0.0.1:1\n").unwrap();
    let (code, _, err) = Worker::cli(&["distributed", file.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("group.id") && err.contains("config.storage.topic"), "{err}");
}
