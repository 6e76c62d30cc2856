//! The REST API under mutated request bodies, against the real binary: connector JSON,
//! configs, validation requests and offsets, each cut, repeated, with characters flipped or
//! inserted. Every request gets an answer below 500, each 4xx in Kafka Connect's
//! `{"error_code", "message"}` form, and the worker keeps serving. A fixed seed keeps the run
//! reproducible (`SLUICE_FUZZ_SEED` picks another); a failure names the request.

use sluice_tests::{json, Worker};

#[test]
fn mutated_request_bodies_never_get_a_5xx() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let (code, body) = w.post("/connectors", &json!({"name": "fixed", "config": {"connector.class": "discard", "topics": "t"}}));
    assert_eq!(code, 201, "{body}");
    let seeds: &[(&str, &str, &str)] = &[
        (
            "POST",
            "/connectors",
            r#"{"name": "fz", "config": {"connector.class": "discard", "topics": "t", "tasks.max": "1", "errors.tolerance": "all"}}"#,
        ),
        (
            "POST",
            "/connectors",
            r#"{"name": "fz2", "config": {"connector.class": "datagen", "kafka.topic": "g", "iterations": "1", "quickstart": "bench"}, "initial_state": "STOPPED"}"#,
        ),
        (
            "PUT",
            "/connectors/fixed/config",
            r#"{"connector.class": "discard", "topics": "t", "transforms": "r", "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter", "transforms.r.regex": "(.*)", "transforms.r.replacement": "$1-x"}"#,
        ),
        ("PATCH", "/connectors/fixed/config", r#"{"tasks.max": "2", "topics.regex": null}"#),
        (
            "PUT",
            "/connector-plugins/FileStreamSource/config/validate",
            r#"{"connector.class": "FileStreamSource", "file": "/dev/null", "topic": "t", "tasks.max": "abc"}"#,
        ),
        (
            "PUT",
            "/connector-plugins/io.debezium.connector.postgresql.PostgresConnector/config/validate",
            r#"{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": "127.0.0.1", "database.port": "1", "topic.prefix": "p", "signal.enabled.channels": "source,kafka"}"#,
        ),
        (
            "PATCH",
            "/connectors/fixed/offsets",
            r#"{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]}"#,
        ),
        ("PUT", "/admin/loggers/sluice_runtime", r#"{"level": "DEBUG"}"#),
    ];
    let inserts = ['{', '}', '[', ']', '"', ':', ',', '-', '0', '9', '.', '\\', 'n', 'é', ' ', '\u{0}'];
    let mut rng = fastrand::Rng::with_seed(std::env::var("SLUICE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x4e57));
    let mut answered = std::collections::BTreeMap::new();
    for _ in 0..800 {
        let (method, path, seed) = seeds[rng.usize(..seeds.len())];
        let mut chars: Vec<char> = seed.chars().collect();
        for _ in 0..rng.usize(1..4) {
            let at = rng.usize(..=chars.len());
            match rng.u8(..4) {
                0 if at < chars.len() => chars[at] = inserts[rng.usize(..inserts.len())],
                1 => chars.truncate(at),
                2 => {
                    let piece: Vec<char> = chars[at..].to_vec();
                    chars.extend(piece);
                }
                _ => chars.insert(at, inserts[rng.usize(..inserts.len())]),
            }
        }
        let body: String = chars.into_iter().collect();
        let (code, reply) = w.send_raw(method, path, &body);
        assert!(code < 500, "{method} {path} with {body:?} answered {code} {reply}");
        if code >= 400 && code != 404 && code != 409 {
            assert!(reply["error_code"] == json!(code) && reply["message"].is_string(), "{method} {path} with {body:?}: {code} {reply}");
        }
        *answered.entry(code).or_insert(0) += 1;
    }
    let (code, _) = w.get("/connectors");
    assert_eq!(code, 200, "the worker still serves");
    assert!(answered.keys().any(|c| *c < 300) && answered.keys().any(|c| *c >= 400), "both accepted and refused bodies: {answered:?}");
    eprintln!("answers to 800 mutated bodies: {answered:?}");
}
