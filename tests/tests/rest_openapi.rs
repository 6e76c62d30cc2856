//! The REST API as a contract: the worker serves its OpenAPI document (`docs/openapi.yaml`)
//! at `GET /openapi.json`, and schemathesis (tests/services/tools.sh) generates requests from
//! it against a live worker with connectors: every answer must have a documented status,
//! content type and schema, and none may be a 5xx (`/health` answers 500 or 503 by design
//! when the worker or a connector is unhealthy). The run is seeded, so it is reproducible.

use std::process::Command;

use sluice_tests::{json, Worker};

const CONFIG: &str = r#"
[[operations]]
include-path = "/health"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "500", "503"]

[[operations]]
include-path = "/health/connectors"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]
"#;

#[test]
fn generated_requests_get_documented_answers_and_never_a_5xx() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let (code, body) = w.post("/connectors", &json!({"name": "a", "config": {"connector.class": "discard", "topics": "t"}}));
    assert_eq!(code, 201, "{body}");
    let gen =
        json!({"name": "gen", "config": {"connector.class": "datagen", "kafka.topic": "t", "max.interval": "100", "iterations": "1000"}});
    let (code, body) = w.post("/connectors", &gen);
    assert_eq!(code, 201, "{body}");

    let (code, doc) = w.get("/openapi.json");
    assert_eq!(code, 200, "{doc}");
    assert_eq!((doc["openapi"].as_str(), doc["info"]["title"].as_str()), (Some("3.0.3"), Some("sluice REST API")));
    assert!(doc["paths"]["/connectors/{connector}/status"]["get"].is_object(), "{}", doc["paths"]);

    let work = dir.path().join("schemathesis");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("schemathesis.toml"), CONFIG).unwrap();
    let python = sluice_tests::tools_python();
    let schemathesis = python.parent().unwrap().join("schemathesis");
    let base = w.url("");
    let base = base.trim_end_matches('/');
    let out = Command::new(&schemathesis)
        .current_dir(&work)
        .args(["--config-file", "schemathesis.toml", "run", &format!("{base}/openapi.json"), "--url", base])
        .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"])
        .args(["--phases", "examples,coverage,fuzzing,stateful", "--max-examples", "30", "--seed", "1", "--request-timeout", "30"])
        .env("NO_COLOR", "1")
        .output()
        .expect("run schemathesis (tests/services/tools.sh installs it)");
    let report = String::from_utf8_lossy(&out.stdout);
    let summary: Vec<&str> = report.lines().filter(|l| l.contains("generated") || l.contains("passed") || l.contains("failed")).collect();
    assert!(
        out.status.success(),
        "schemathesis found answers the document does not allow:\n{report}\n{}\nworker output:\n{}",
        String::from_utf8_lossy(&out.stderr),
        w.output()
    );
    assert!(report.contains("passed"), "schemathesis ran no test case:\n{report}");
    eprintln!("schemathesis: {}", summary.join(" | "));
    let (code, _) = w.get("/connectors");
    assert_eq!(code, 200, "the worker still serves after the run");
}
