//! A secured cluster: the worker's `security.protocol`, `ssl.*` and `sasl.*` keys (Connect's
//! Java names: `sasl.jaas.config`, a PEM truststore) reach every client, the data plane's
//! librdkafka clients and the group membership client alike.
//!
//! The broker is tansu behind the TLS/SASL proxy of tests/services/kafka.sh
//! (`KAFKA_SECURITY`): tansu 0.6 serves neither TLS nor SASL itself
//! (tests/services/kafka-quirks/tansu-security.md), so these tests check the clients' TLS
//! and SASL against that proxy, and the Kafka protocol behind it against tansu.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_runtime::herder::group::member::{GroupMember, GroupWorker};
use sluice_runtime::herder::group::protocol::{Assignment, WorkerState};
use sluice_runtime::herder::group::GroupSettings;
use sluice_runtime::herder::ConnectorTaskId;
use sluice_tests::{eventually, json, read_lines, KafkaBroker, Launch, Worker};
use tokio_util::sync::CancellationToken;

const USER: &str = "sluice";

/// The worker keys for the secured broker as a Connect user writes them: SCRAM through
/// `sasl.jaas.config`, the CA as a PEM truststore.
fn secured_props(broker: &KafkaBroker, mechanism: &str, password: &str, ca: &str) -> Vec<(String, String)> {
    let module = if mechanism == "PLAIN" { "plain.PlainLoginModule" } else { "scram.ScramLoginModule" };
    [
        ("security.protocol", broker.security_setting("security.protocol").to_owned()),
        ("sasl.mechanism", mechanism.to_owned()),
        ("sasl.jaas.config", format!(r#"org.apache.kafka.common.security.{module} required username="{USER}" password="{password}";"#)),
        ("ssl.truststore.type", "PEM".to_owned()),
        ("ssl.truststore.location", ca.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn group_settings(broker: &KafkaBroker, extra: &[(String, String)]) -> GroupSettings {
    let mut props: std::collections::BTreeMap<String, String> = [
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("group.id", "sluice-secured"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
        ("rebalance.timeout.ms", "10000"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    props.extend(extra.iter().cloned());
    GroupSettings::from_worker_props(&props).unwrap()
}

/// A worker that records its assignment; one connector with 3 tasks.
struct Recorder {
    url: String,
    held: Mutex<Option<(i32, Assignment)>>,
}

#[async_trait::async_trait]
impl GroupWorker for Recorder {
    async fn worker_state(&self) -> WorkerState {
        WorkerState { url: self.url.clone(), config_offset: 3, assignment: None }
    }
    async fn revoke(&self, connectors: &[String], tasks: &[ConnectorTaskId]) {
        if let Some((_, a)) = self.held.lock().unwrap().as_mut() {
            a.connectors.retain(|c| !connectors.contains(c));
            a.tasks.retain(|t| !tasks.contains(t));
        }
    }
    async fn configured(&self) -> (i64, std::collections::BTreeMap<String, u32>) {
        (3, [("src".to_owned(), 3)].into_iter().collect())
    }
    async fn assigned(&self, generation: i32, _member: &str, assignment: &Assignment) {
        *self.held.lock().unwrap() = Some((generation, assignment.clone()));
    }
}

/// Two members join over SASL_SSL (SCRAM-SHA-512) and split the work; PLAIN connects too. A
/// wrong password and an untrusted certificate are refusals, named without the password.
#[test]
fn members_join_over_sasl_ssl_and_refusals_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start_secured(&dir.path().join("broker"), "sasl_ssl");
    let password = broker.security_setting("sasl.password").to_owned();
    let ca = broker.security_setting("ssl.ca.location").to_owned();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let good = group_settings(&broker, &secured_props(&broker, "SCRAM-SHA-512", &password, &ca));
        let workers: Vec<Arc<Recorder>> =
            (0..2).map(|i| Arc::new(Recorder { url: format!("http://w{i}:8083/"), held: Mutex::new(None) })).collect();
        let token = CancellationToken::new();
        let joins: Vec<_> = workers
            .iter()
            .map(|w| tokio::spawn(GroupMember::new(good.clone()).run(w.clone() as Arc<dyn GroupWorker>, token.clone())))
            .collect();
        let start = Instant::now();
        let units = loop {
            let held: Vec<Option<(i32, Assignment)>> = workers.iter().map(|w| w.held.lock().unwrap().clone()).collect();
            if held.iter().all(Option::is_some) {
                let held: Vec<(i32, Assignment)> = held.into_iter().flatten().collect();
                let units: Vec<String> = held
                    .iter()
                    .flat_map(|(_, a)| a.connectors.iter().cloned().chain(a.tasks.iter().map(|t| format!("{}-{}", t.connector, t.task))))
                    .collect();
                if held.iter().all(|(g, _)| *g == held[0].0) && units.len() == 4 {
                    break units;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(40), "the secured group did not settle");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            units.iter().cloned().collect::<BTreeSet<_>>(),
            ["src", "src-0", "src-1", "src-2"].map(String::from).into(),
            "{units:?}"
        );
        assert!(
            workers.iter().all(|w| w.held.lock().unwrap().as_ref().is_some_and(|(_, a)| !a.connectors.is_empty() || !a.tasks.is_empty())),
            "both members got work"
        );
        token.cancel();
        for j in joins {
            j.await.unwrap();
        }

        let plain = group_settings(&broker, &secured_props(&broker, "PLAIN", &password, &ca));
        GroupMember::probe(&plain).await.expect("PLAIN over TLS authenticates");

        let wrong = group_settings(&broker, &secured_props(&broker, "SCRAM-SHA-256", "not-the-password", &ca));
        let err = GroupMember::probe(&wrong).await.expect_err("a wrong password is refused");
        let text = err.to_string();
        assert!(err.is_refusal(), "{text}");
        assert!(text.contains("SASL authentication") && text.contains(USER) && !text.contains("not-the-password"), "{text}");

        // A truststore without the broker's CA: only the broker's own (CA-signed) certificate.
        let leaf = std::path::Path::new(&ca).with_file_name("server.pem");
        let untrusted = group_settings(&broker, &secured_props(&broker, "SCRAM-SHA-512", &password, leaf.to_str().unwrap()));
        let err = GroupMember::probe(&untrusted).await.expect_err("a certificate outside the truststore is refused");
        assert!(err.is_refusal() && err.to_string().contains("TLS"), "{err}");
    });
}

/// `sluice distributed` on the secured broker: the worker joins its group, a source writes
/// through the producer, a sink reads through its consumer, every record arrives. The same
/// worker with a wrong password stops at start with a message that names the user, not the
/// password.
#[test]
fn a_distributed_worker_runs_a_pipeline_on_a_sasl_ssl_cluster() {
    const ROWS: usize = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start_secured(&dir.path().join("broker"), "sasl_ssl");
    let password = broker.security_setting("sasl.password").to_owned();
    let ca = broker.security_setting("ssl.ca.location").to_owned();
    let mut props: Vec<(String, String)> = [
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("group.id", "sluice-secured-workers"),
        ("config.storage.topic", "sec-configs"),
        ("offset.storage.topic", "sec-offsets"),
        ("status.storage.topic", "sec-status"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "1000"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    props.extend(secured_props(&broker, "SCRAM-SHA-512", &password, &ca));

    let w = Worker::launch(&dir.path().join("worker"), Launch::Distributed { props: props.clone() });
    eventually(Duration::from_secs(30), "the worker joins its group", || {
        sluice_tests::strip_ansi(&w.output()).contains("joined the group")
    });
    let post = |body: &sluice_tests::Json| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, reply) = w.post("/connectors", body);
            if code != 409 || Instant::now() > deadline {
                return (code, reply);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let (code, body) = post(&json!({"name": "gen", "config": {"connector.class": "datagen", "kafka.topic": "secured-rows",
        "quickstart": "bench", "iterations": ROWS.to_string(), "payload.bytes": "16", "records.per.second": "5000"}}));
    assert_eq!(code, 201, "{body}");
    let file = dir.path().join("sink.txt");
    let (code, body) = post(
        &json!({"name": "sink", "config": {"connector.class": "FileStreamSink", "file": file.to_str().unwrap(), "topics": "secured-rows"}}),
    );
    assert_eq!(code, 201, "{body}");
    let ids = || -> BTreeSet<usize> {
        read_lines(&file).iter().filter_map(|l| l.split("id=").nth(1)?.split([',', '}']).next()?.parse().ok()).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    while ids().len() < ROWS {
        assert!(Instant::now() < deadline, "{} of {ROWS} records in the sink's file after 90 s; the worker:\n{}", ids().len(), w.output());
        std::thread::sleep(Duration::from_millis(200));
    }
    let ids = ids();
    assert_eq!(ids, (0..ROWS).collect::<BTreeSet<_>>());
    let out = w.output();
    assert!(!out.contains(&password), "the password stays out of the worker's log");
    drop(w);

    // The same worker with a wrong password: a start-up error naming the refusal and the user.
    for (k, v) in props.iter_mut() {
        if k == "sasl.jaas.config" {
            *v = v.replace(&password, "wrong-secret");
        }
    }
    let file = dir.path().join("wrong.properties");
    let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&file, format!("listeners=http://127.0.0.1:{}\n{text}", sluice_tests::free_port())).unwrap();
    let (code, out, err) = Worker::cli(&["distributed", file.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("SASL authentication") && err.contains(USER), "{err}");
    assert!(!err.contains("wrong-secret") && !out.contains("wrong-secret"), "{err}");
}
