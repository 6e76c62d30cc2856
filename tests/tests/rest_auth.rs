//! The REST API behind Kafka Connect's `BasicAuthSecurityRestExtension`, configured as a
//! Connect user has it: `rest.extension.classes`, a JAAS file named in `KAFKA_OPTS` (or our
//! worker key) and its users file. Every endpoint asks for credentials, refusals are
//! Connect's 401, a client address that keeps failing is refused for a while, passwords
//! never reach the log, a follower forwards a write with the client's credentials, and a
//! worker configured with a REST extension sluice lacks does not start.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_tests::{basic_auth, binary, json, refuses_to_start, Extras, Json, KafkaBroker, Launch, Worker};

const EXTENSION: &str = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension";
const PASSWORD: &str = "pw-7f3a9c1e-ops";

/// A users file (Java properties, both separators) and the JAAS file pointing at it.
fn jaas(dir: &Path) -> PathBuf {
    let users = dir.join("connect.password");
    std::fs::write(&users, format!("# users of the REST API\nops={PASSWORD}\nviewer: pw-viewer-2b8d\n")).unwrap();
    let jaas = dir.join("connect-jaas.conf");
    std::fs::write(
        &jaas,
        format!(
            "KafkaConnect {{\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n  file=\"{}\";\n}};\n",
            users.display()
        ),
    )
    .unwrap();
    jaas
}

/// One request without the harness' credentials: (status, `WWW-Authenticate`, body).
fn raw(w: &Worker, method: &str, path: &str, authorization: Option<&str>) -> (u16, Option<String>, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut req = ureq::http::Request::builder().method(method).uri(w.url(path)).header("content-type", "application/json");
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    let body =
        if method == "POST" { json!({"name": "x", "config": {"connector.class": "FileStreamSource"}}).to_string() } else { String::new() };
    let mut resp = agent.run(req.body(body).unwrap()).expect("an answer");
    let challenge = resp.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (resp.status().as_u16(), challenge, resp.body_mut().read_to_string().unwrap_or_default())
}

fn props(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut props = vec![("rest.extension.classes".to_owned(), EXTENSION.to_owned())];
    props.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    props
}

#[test]
fn basic_auth_configured_as_in_connect_guards_every_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let jaas = jaas(dir.path());
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a\nb\n").unwrap();
    let w = Worker::launch_with(
        &dir.path().join("w"),
        Launch::Properties { props: props(&[]), connector_files: Vec::new() },
        Extras {
            env: vec![("KAFKA_OPTS".to_owned(), format!("-Xmx512m -Djava.security.auth.login.config={} -Dx=1", jaas.display()))],
            authorization: Some(basic_auth("ops", PASSWORD)),
        },
    );

    // Without credentials, with a wrong password, an unknown user or another scheme: 401,
    // on every endpoint (health and metrics too, as in Connect). The first failure of an
    // address in a minute is logged.
    assert_eq!(raw(&w, "GET", "/connectors", Some(&basic_auth("eve", PASSWORD))).0, 401, "an unknown user");
    for (method, path) in [("GET", "/"), ("GET", "/connectors"), ("GET", "/health"), ("GET", "/metrics"), ("POST", "/connectors")] {
        let (code, challenge, body) = raw(&w, method, path, None);
        assert_eq!((code, body.as_str()), (401, "User cannot access the resource."), "{method} {path} without credentials");
        assert_eq!(challenge.as_deref(), Some("Basic realm=\"Kafka Connect\""), "{method} {path}");
    }
    assert_eq!(raw(&w, "GET", "/connectors", Some(&basic_auth("ops", "pw-guess"))).0, 401, "a wrong password");
    assert_eq!(raw(&w, "GET", "/connectors", Some("Bearer abc")).0, 401, "another scheme");
    assert_eq!(raw(&w, "POST", "/connectors", Some(&basic_auth("ops", "pw-guess"))).0, 401, "a write with a wrong password");
    assert_eq!(w.get("/connectors").1, json!([]), "the refused write created nothing");

    // Either user, with their password, gets in (both separators of the users file).
    assert_eq!(raw(&w, "GET", "/connectors", Some(&basic_auth("viewer", "pw-viewer-2b8d"))).0, 200);
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "lines", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "lines"}}),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("lines", 1);
    assert_eq!(w.get("/health").0, 200);
    // The image's HEALTHCHECK (`sluice health`) reads the same users file as the worker.
    let opts = format!("-Djava.security.auth.login.config={}", jaas.display());
    let probe = |env: Option<&str>| {
        let mut cmd = Command::new(binary());
        cmd.args(["health", &w.url("")]).env_remove("KAFKA_OPTS").env_remove("CONNECT_SLUICE_REST_AUTH_JAAS_CONFIG");
        if let Some(o) = env {
            cmd.env("KAFKA_OPTS", o);
        }
        let out = cmd.output().expect("run sluice health");
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };
    let (healthy, out) = probe(Some(&opts));
    assert!(healthy, "sluice health with the worker's KAFKA_OPTS: {out}");

    // Refusals are logged with the user and address, never a password.
    let log = w.output();
    assert!(log.contains("REST request refused") && log.contains("eve"), "a refusal is logged:\n{log}");
    for secret in [PASSWORD, "pw-guess", "pw-viewer-2b8d"] {
        assert!(!log.contains(secret), "a password reached the log:\n{log}");
    }

    let (healthy, out) = probe(None);
    assert!(!healthy && out.contains("401"), "sluice health without credentials: {out}");

    // After 10 failures within a minute (10 so far) the address is refused (429), valid
    // credentials too.
    let refused_after = (0..11).position(|_| raw(&w, "GET", "/", Some(&basic_auth("ops", "pw-guess"))).0 == 429);
    assert!(refused_after.is_some(), "failures went on being answered 401");
    let (code, _, body) = raw(&w, "GET", "/connectors", Some(&basic_auth("ops", PASSWORD)));
    assert_eq!(code, 429, "{body}");
    let body: Json = serde_json::from_str(&body).expect("Connect's error body");
    assert_eq!(body["error_code"], 429);
    assert!(body["message"].as_str().unwrap().contains("Too many failed authentication attempts"), "{body}");
}

#[test]
fn a_follower_forwards_a_write_with_the_clients_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let jaas = jaas(dir.path());
    let broker = KafkaBroker::start(&dir.path().join("broker"));
    let group = props(&[
        ("sluice.rest.auth.jaas.config", jaas.to_str().unwrap()),
        ("bootstrap.servers", &broker.bootstrap),
        ("group.id", "auth-cluster"),
        ("config.storage.topic", "auth-configs"),
        ("offset.storage.topic", "auth-offsets"),
        ("status.storage.topic", "auth-status"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "1000"),
        ("rebalance.timeout.ms", "10000"),
        ("scheduled.rebalance.max.delay.ms", "0"),
    ]);
    let workers: Vec<Worker> = (0..2)
        .map(|i| {
            Worker::launch_with(
                &dir.path().join(format!("w{i}")),
                Launch::Distributed { props: group.clone() },
                Extras { env: Vec::new(), authorization: Some(basic_auth("ops", PASSWORD)) },
            )
        })
        .collect();
    // One connector created through each worker: one of them is a follower and forwards
    // (the leader refuses a forwarded write without the client's credentials).
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "").unwrap();
    for (i, w) in workers.iter().enumerate() {
        let body = json!({"name": format!("src{i}"), "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "auth-lines"}});
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (code, reply) = w.post("/connectors", &body);
            if code == 201 {
                break;
            }
            assert!(code == 409 && Instant::now() < deadline, "create through worker {i}: {code} {reply}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for w in &workers {
        w.wait_running("src0", 1);
        w.wait_running("src1", 1);
        // A write without credentials is refused by the worker it reaches, leader or not.
        assert_eq!(raw(w, "DELETE", "/connectors/src0", None).0, 401);
    }
    assert_eq!(workers[0].get("/connectors").1, json!(["src0", "src1"]));
}

#[test]
fn a_worker_whose_api_protection_cannot_be_had_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    // A REST extension sluice does not have: serving without it would leave the API open.
    let out = refuses_to_start(&dir.path().join("a"), "rest.extension.classes=com.example.connect.OAuthRestExtension\n", &[]);
    assert!(out.contains("com.example.connect.OAuthRestExtension") && out.contains("rest.extension.classes"), "{out}");
    let out = refuses_to_start(&dir.path().join("b"), &format!("rest.extension.classes={EXTENSION},com.example.Audit\n"), &[]);
    assert!(out.contains("com.example.Audit"), "{out}");
    // The Basic extension without a JAAS file, or with one whose users file is empty.
    let out = refuses_to_start(&dir.path().join("c"), &format!("rest.extension.classes={EXTENSION}\n"), &[]);
    assert!(out.contains("KAFKA_OPTS") && out.contains("sluice.rest.auth.jaas.config"), "{out}");
    let users = dir.path().join("empty.password");
    std::fs::write(&users, "# nobody\n").unwrap();
    let jaas = dir.path().join("jaas.conf");
    std::fs::write(
        &jaas,
        format!(
            "KafkaConnect {{ org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required file=\"{}\"; }};",
            users.display()
        ),
    )
    .unwrap();
    let opts = format!("-Djava.security.auth.login.config={}", jaas.display());
    let out = refuses_to_start(&dir.path().join("d"), &format!("rest.extension.classes={EXTENSION}\n"), &[("KAFKA_OPTS", &opts)]);
    assert!(out.contains("has no users"), "{out}");
    // Another login module in the KafkaConnect entry.
    std::fs::write(&jaas, "KafkaConnect { com.example.LdapLoginModule required url=\"ldap://x\"; };").unwrap();
    let out = refuses_to_start(&dir.path().join("e"), &format!("rest.extension.classes={EXTENSION}\n"), &[("KAFKA_OPTS", &opts)]);
    assert!(out.contains("com.example.LdapLoginModule"), "{out}");
}
