//! Topic creation for source connectors (KIP-158 `topic.creation.*`) and dead-letter topic
//! creation (`errors.deadletterqueue.topic.replication.factor`), through the real binary,
//! on the project's Kafka-protocol broker and on the embedded log.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use sluice_tests::{eventually, json, Json, KafkaBroker, Worker};

/// Whether the broker refuses a replication factor above its broker count (noida does;
/// tansu accepts any, see tests/services/kafka-quirks/README.md).
fn checks_replication_factor() -> bool {
    std::env::var("SLUICE_TEST_BROKER").map_or(true, |kind| kind != "tansu")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

/// What the broker says about a topic: its partition count (`None`: no such topic) and
/// the topic configs it reports.
fn describe(bootstrap: &str, topic: &str) -> (Option<usize>, BTreeMap<String, String>) {
    runtime().block_on(async {
        let admin: AdminClient<DefaultClientContext> =
            // Asking for a topic's metadata must not create it.
            ClientConfig::new().set("bootstrap.servers", bootstrap).set("allow.auto.create.topics", "false").create().expect("an admin client");
        let md = admin.inner().fetch_metadata(Some(topic), Duration::from_secs(10)).expect("metadata");
        let partitions = md.topics().iter().find(|t| t.name() == topic && t.error().is_none()).map(|t| t.partitions().len());
        let partitions = partitions.filter(|n| *n > 0);
        if partitions.is_none() {
            return (None, BTreeMap::new());
        }
        let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
        let results = admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options).await.expect("describe configs");
        let resource = results.into_iter().next().expect("one resource").expect("the topic's configs");
        let configs = resource.entries.into_iter().filter_map(|e| e.value.map(|v| (e.name, v))).collect();
        (partitions, configs)
    })
}

fn datagen(name: &str, topic: &str, extra: &[(&str, &str)]) -> Json {
    let mut config = json!({
        "connector.class": "io.confluent.kafka.connect.datagen.DatagenConnector",
        "kafka.topic": topic, "quickstart": "users", "max.interval": "50", "iterations": "20",
    });
    for (k, v) in extra {
        config[*k] = json!(v);
    }
    json!({"name": name, "config": config})
}

/// A connector's groups as in the KIP's example: compacted `cdc.*` topics with their own
/// partitions and compression; everything else in the default group.
const GROUPS: &[(&str, &str)] = &[
    ("topic.creation.groups", "compacted"),
    ("topic.creation.compacted.include", "cdc\\..*"),
    ("topic.creation.compacted.exclude", "cdc\\.tmp.*"),
    ("topic.creation.compacted.partitions", "3"),
    ("topic.creation.compacted.cleanup.policy", "compact"),
    ("topic.creation.compacted.compression.type", "lz4"),
    ("topic.creation.default.replication.factor", "-1"),
    ("topic.creation.default.partitions", "2"),
    ("topic.creation.default.retention.ms", "3600000"),
];

fn with(base: &[(&'static str, &'static str)], extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<_> = base.iter().copied().filter(|(k, _)| !extra.iter().any(|(e, _)| e == k)).collect();
    all.extend_from_slice(extra);
    all
}

fn error_messages(body: &Json) -> String {
    body["message"].as_str().unwrap_or_default().to_owned()
}

fn validate_errors(w: &Worker, config: &Json, key: &str) -> Vec<String> {
    let (code, infos) = w.put("/connector-plugins/DatagenConnector/config/validate", config);
    assert_eq!(code, 200, "{infos}");
    sluice_tests::validate_errors_of(&infos, key)
}

/// A datagen source with topic creation groups creates its topics with each group's
/// partitions and topic configs, as the broker reports them; a topic that already exists
/// is left alone; without topic.creation keys the log's defaults apply as before; a
/// replication factor the one-broker cluster cannot meet fails the task with the topic
/// named; bad groups are refused with 400 naming the key.
#[test]
fn kafka_source_topic_creation_groups_create_topics_with_their_settings() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let w = Worker::start(&dir.path().join("worker"), &[("bootstrap.servers", &broker.bootstrap), ("producer.linger.ms", "5")]);

    for (name, topic) in [("accounts", "cdc.accounts"), ("tmp", "cdc.tmp1"), ("plain", "plain")] {
        let (code, body) = w.post("/connectors", &datagen(name, topic, GROUPS));
        assert_eq!(code, 201, "{body}");
    }
    let (code, body) = w.post("/connectors", &datagen("nogroups", "untouched", &[]));
    assert_eq!(code, 201, "{body}");
    // -1: the broker's own partition count and replication factor (KIP-464).
    let broker_defaults = [("topic.creation.default.replication.factor", "-1"), ("topic.creation.default.partitions", "-1")];
    let (code, body) = w.post("/connectors", &datagen("brokerdefaults", "broker.defaults", &broker_defaults));
    assert_eq!(code, 201, "{body}");
    for name in ["accounts", "tmp", "plain", "nogroups", "brokerdefaults"] {
        w.wait_running(name, 1);
    }
    eventually(Duration::from_secs(60), "the five topics exist", || {
        ["cdc.accounts", "cdc.tmp1", "plain", "untouched", "broker.defaults"].iter().all(|t| describe(&broker.bootstrap, t).0.is_some())
    });
    w.wait_running("brokerdefaults", 1);

    let (partitions, configs) = describe(&broker.bootstrap, "cdc.accounts");
    assert_eq!(partitions, Some(3), "the compacted group's partitions");
    assert_eq!(configs.get("cleanup.policy").map(String::as_str), Some("compact"), "{configs:?}");
    assert_eq!(configs.get("compression.type").map(String::as_str), Some("lz4"), "{configs:?}");

    for topic in ["cdc.tmp1", "plain"] {
        let (partitions, configs) = describe(&broker.bootstrap, topic);
        assert_eq!(partitions, Some(2), "{topic}: excluded from the compacted group or not included: the default group");
        assert_eq!(configs.get("retention.ms").map(String::as_str), Some("3600000"), "{topic}: {configs:?}");
        assert_ne!(configs.get("cleanup.policy").map(String::as_str), Some("compact"), "{topic}: {configs:?}");
    }
    // No topic.creation keys: the topic is created as before (one partition, the log's default).
    assert_eq!(describe(&broker.bootstrap, "untouched").0, Some(1));
    assert!(w.output().contains("created topic using topic creation group"), "{}", w.output());

    // A replication factor of 3 on a one-broker cluster: the task fails naming the topic.
    if checks_replication_factor() {
        let config = datagen("wide", "wide", &with(GROUPS, &[("topic.creation.default.replication.factor", "3")]));
        let (code, body) = w.post("/connectors", &config);
        assert_eq!(code, 201, "{body}");
        let status = w.wait_for("/connectors/wide/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "FAILED");
        let trace = status["tasks"][0]["trace"].as_str().unwrap();
        assert!(trace.contains("Task failed to create new topic wide with topic creation group default"), "{trace}");
        assert!(trace.to_lowercase().contains("replication factor"), "{trace}");
        assert_eq!(describe(&broker.bootstrap, "wide").0, None, "nothing was created");
        // The other connectors go on.
        w.wait_running("plain", 1);
    }

    // Bad groups: 400 naming the key, and the same errors from config/validate.
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("topic.creation.default.partitions", "0")], "topic.creation.default.partitions"),
        (&[("topic.creation.compacted.replication.factor", "-2")], "topic.creation.compacted.replication.factor"),
        (&[("topic.creation.groups", "compacted,compacted")], "topic.creation.groups"),
    ];
    for (extra, key) in cases {
        let config = datagen("bad", "bad", &with(GROUPS, extra));
        let (code, body) = w.post("/connectors", &config);
        assert_eq!(code, 400, "{key}: {body}");
        assert_eq!(body["error_code"], 400, "{body}");
        assert!(error_messages(&body).contains(key), "{key}: {body}");
        let errors = validate_errors(&w, &config["config"], key);
        assert_eq!(errors.len(), 1, "{key}: {errors:?}");
        assert!(errors[0].contains(key), "{errors:?}");
    }
    let missing = datagen("bad", "bad", &[("topic.creation.default.partitions", "1")]);
    let (code, body) = w.post("/connectors", &missing);
    assert_eq!(code, 400, "{body}");
    assert!(
        error_messages(&body)
            .contains("Missing required configuration \"topic.creation.default.replication.factor\" which has no default value."),
        "{body}"
    );
    let (code, _) = w.get("/connectors/bad");
    assert_eq!(code, 404, "no refused connector was stored");
}

/// With `topic.creation.enable=false` on the worker, topic.creation keys are not looked at
/// (not even validated) and topics are created with the log's defaults, as in Connect.
#[test]
fn kafka_topic_creation_disabled_on_the_worker_ignores_the_groups() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let w = Worker::start(&dir.path().join("worker"), &[("bootstrap.servers", &broker.bootstrap), ("topic.creation.enable", "false")]);
    let (code, body) =
        w.post("/connectors", &datagen("gen", "cdc.off", &with(GROUPS, &[("topic.creation.default.replication.factor", "3")])));
    assert_eq!(code, 201, "{body}");
    w.wait_running("gen", 1);
    eventually(Duration::from_secs(60), "the topic exists", || describe(&broker.bootstrap, "cdc.off").0.is_some());
    let (partitions, configs) = describe(&broker.bootstrap, "cdc.off");
    assert_eq!(partitions, Some(1), "the log's default, not the group's 3");
    assert_ne!(configs.get("compression.type").map(String::as_str), Some("lz4"), "{configs:?}");
    std::thread::sleep(Duration::from_millis(500));
    w.wait_running("gen", 1);
}

/// A sink's dead-letter topic is created when its task starts, with one partition and
/// `errors.deadletterqueue.topic.replication.factor`; a factor the cluster cannot meet fails
/// the task naming the topic; 0 is refused with 400.
#[test]
fn kafka_dead_letter_topic_is_created_with_its_replication_factor() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let w = Worker::start(&dir.path().join("worker"), &[("bootstrap.servers", &broker.bootstrap)]);
    let sink = |name: &str, dlq: &str, factor: Option<&str>| {
        let mut config = json!({
            "connector.class": "FileStreamSink", "file": dir.path().join(format!("{name}.txt")).to_str().unwrap(),
            "topics": "input", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        });
        if let Some(f) = factor {
            config["errors.deadletterqueue.topic.replication.factor"] = json!(f);
        }
        json!({"name": name, "config": config})
    };
    let (code, body) = w.post("/connectors", &sink("ok", "dlq-ok", None));
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post("/connectors", &sink("one", "dlq-one", Some("1")));
    assert_eq!(code, 201, "{body}");
    w.wait_running("ok", 1);
    w.wait_running("one", 1);
    eventually(Duration::from_secs(30), "both dead-letter topics exist before any record failed", || {
        describe(&broker.bootstrap, "dlq-ok").0.is_some() && describe(&broker.bootstrap, "dlq-one").0.is_some()
    });
    assert_eq!(describe(&broker.bootstrap, "dlq-ok").0, Some(1));
    assert_eq!(describe(&broker.bootstrap, "dlq-one").0, Some(1));

    if checks_replication_factor() {
        let (code, body) = w.post("/connectors", &sink("wide", "dlq-wide", Some("3")));
        assert_eq!(code, 201, "{body}");
        let status = w.wait_for("/connectors/wide/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "FAILED");
        let trace = status["tasks"][0]["trace"].as_str().unwrap();
        assert!(trace.contains("dead letter queue with topic=dlq-wide"), "{trace}");
        assert!(trace.to_lowercase().contains("replication factor"), "{trace}");
    }

    let (code, body) = w.post("/connectors", &sink("zero", "dlq-zero", Some("0")));
    assert_eq!(code, 400, "{body}");
    assert!(error_messages(&body).contains("errors.deadletterqueue.topic.replication.factor"), "{body}");
}

/// On the embedded log the groups' partitions and cleanup policy take effect (the
/// replication factor is accepted and ignored: one copy).
#[test]
fn embedded_topic_creation_applies_partitions_and_cleanup_policy() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(&dir.path().join("worker"), &[]);
    let (code, body) =
        w.post("/connectors", &datagen("accounts", "cdc.accounts", &with(GROUPS, &[("topic.creation.default.replication.factor", "3")])));
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post("/connectors", &datagen("plain", "plain", GROUPS));
    assert_eq!(code, 201, "{body}");
    w.wait_running("accounts", 1);
    w.wait_running("plain", 1);
    let data = dir.path().join("worker/data");
    let data = data.to_str().unwrap();
    let describe = |topic: &str| -> Option<Json> {
        let (code, out, _) = Worker::cli(&["topics", "describe", topic, "--data-dir", data]);
        (code == 0).then(|| serde_json::from_str(&out).unwrap())
    };
    eventually(Duration::from_secs(30), "both topics exist", || describe("cdc.accounts").is_some() && describe("plain").is_some());
    let accounts = describe("cdc.accounts").unwrap();
    assert_eq!(accounts["partition_count"], 3, "{accounts}");
    assert_eq!(accounts["cleanup.policy"], "compact", "{accounts}");
    let plain = describe("plain").unwrap();
    assert_eq!(plain["partition_count"], 2, "{plain}");
    assert_eq!(plain["cleanup.policy"], "delete", "{plain}");
    assert_eq!(plain["retention.ms"], 3_600_000, "{plain}");
    // Records spread over the created partitions (datagen keys its records).
    eventually(Duration::from_secs(30), "records in more than one partition of plain", || {
        describe("plain").unwrap()["partitions"].as_array().unwrap().iter().filter(|p| p["end_offset"].as_i64().unwrap() > 0).count() > 1
    });
    assert!(w.output().contains("has no use for these topic configs"), "compression.type and the factor are reported as ignored");
}
