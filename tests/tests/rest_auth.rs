//! The REST API behind Kafka Connect's `BasicAuthSecurityRestExtension`, configured as a
//! Connect user has it: `rest.extension.classes`, a JAAS file named in `KAFKA_OPTS` (or our
//! worker key) and its users file. Every endpoint asks for credentials, refusals are
//! Connect's 401, a client address that keeps failing is refused for a while, passwords
//! never reach the log, a follower forwards a write with the client's credentials, and a
//! worker configured with a REST extension sluice lacks does not start. Then our bearer
//! tokens with their read and admin roles, and CORS as Connect configures it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_tests::{basic_auth, binary, json, refuses_to_start, rest_token, Extras, Json, KafkaBroker, Launch, Worker};

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
    raw_at(&w.url(""), method, path, authorization)
}

/// [`raw`] to `base` (`http://host:port`).
fn raw_at(base: &str, method: &str, path: &str, authorization: Option<&str>) -> (u16, Option<String>, String) {
    let mut headers = vec![("content-type", "application/json")];
    headers.extend(authorization.map(|a| ("authorization", a)));
    let body =
        if method == "POST" { json!({"name": "x", "config": {"connector.class": "FileStreamSource"}}).to_string() } else { String::new() };
    let (code, headers, body) = send_at(base, method, path, &headers, &body);
    (code, headers.get("www-authenticate").cloned(), body)
}

/// An IPv4 address of this machine that is not loopback (the Docker bridge at least): requests
/// to it come from a non-loopback address.
fn outside_address() -> String {
    let out = Command::new("hostname").arg("-I").output().expect("run hostname -I");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .find(|a| a.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| !ip.is_loopback()))
        .unwrap_or_else(|| panic!("no non-loopback IPv4 address on this machine: {text}"))
        .to_owned()
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
    // A second listener on a non-loopback address: what a client on the network reaches.
    let outside = format!("http://{}:{}", outside_address(), sluice_tests::free_port());
    let listeners = format!("http://127.0.0.1:{{port}},{outside}");
    let w = Worker::launch_with(
        &dir.path().join("w"),
        Launch::Properties { props: props(&[("listeners", &listeners)]), connector_files: Vec::new() },
        Extras {
            env: vec![("KAFKA_OPTS".to_owned(), format!("-Xmx512m -Djava.security.auth.login.config={} -Dx=1", jaas.display()))],
            authorization: Some(basic_auth("ops", PASSWORD)),
        },
    );

    // Without credentials, with a wrong password, an unknown user or another scheme: 401,
    // on every endpoint (health and metrics too, as in Connect) for a client on the network.
    // The first failure of an address in a minute is logged.
    assert_eq!(raw(&w, "GET", "/connectors", Some(&basic_auth("eve", PASSWORD))).0, 401, "an unknown user");
    for (method, path) in [("GET", "/"), ("GET", "/connectors"), ("GET", "/health"), ("GET", "/metrics"), ("POST", "/connectors")] {
        let (code, challenge, body) = raw_at(&outside, method, path, None);
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
    assert_eq!(raw(&w, "GET", "/health", None).0, 200, "/health from the worker's own machine needs no credentials");
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
    assert!(healthy, "sluice health on the worker's machine, with no credentials: {out}");

    // After 10 failures within a minute the address is refused (429), valid credentials too.
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
    // Connect's servlet initializers are Java classes: named, the worker does not start.
    let out = refuses_to_start(&dir.path().join("f"), "rest.servlet.initializor.classes=com.example.HeaderInitializer\n", &[]);
    assert!(out.contains("rest.servlet.initializor.classes") && out.contains("com.example.HeaderInitializer"), "{out}");
    // An empty tokens file.
    std::fs::write(dir.path().join("tokens"), "# none yet\n").unwrap();
    let out =
        refuses_to_start(&dir.path().join("g"), &format!("sluice.rest.auth.tokens.file={}\n", dir.path().join("tokens").display()), &[]);
    assert!(out.contains("sluice.rest.auth.tokens.file") && out.contains("no tokens"), "{out}");
}

/// One request with exactly these headers: (status, headers with lowercase names, body).
fn send(w: &Worker, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, BTreeMap<String, String>, String) {
    send_at(&w.url(""), method, path, headers, body)
}

/// [`send`] to `base` (`http://host:port`).
fn send_at(base: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, BTreeMap<String, String>, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut req = ureq::http::Request::builder().method(method).uri(format!("{base}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut resp = agent.run(req.body(body.to_owned()).unwrap()).expect("an answer");
    let headers = resp.headers().iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned())).collect();
    (resp.status().as_u16(), headers, resp.body_mut().read_to_string().unwrap_or_default())
}

#[test]
fn bearer_tokens_carry_roles_and_a_browser_ui_gets_cors() {
    let dir = tempfile::tempdir().unwrap();
    // Tokens are made by the binary: the token on stdout (once), the file's line on stderr.
    let (read_token, read_line) = rest_token("dashboard", "read");
    let (admin_token, admin_line) = rest_token("ci", "admin");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# REST API tokens\n{read_line}\n{admin_line}\n")).unwrap();
    let file = std::fs::read_to_string(&tokens).unwrap();
    assert!(!file.contains(&read_token) && !file.contains(&admin_token), "the file keeps hashes only:\n{file}");
    let (code, _, err) = Worker::cli(&["rest-token", "x", "owner"]);
    assert!(code != 0 && err.contains("owner"), "{err}");

    let origin = "https://ui.example.com";
    let w = Worker::launch_with(
        &dir.path().join("w"),
        Launch::Properties {
            props: vec![
                ("sluice.rest.auth.tokens.file".to_owned(), tokens.display().to_string()),
                ("access.control.allow.origin".to_owned(), format!("{origin},https://*.corp.example")),
                ("access.control.allow.methods".to_owned(), "GET,POST,PUT,DELETE".to_owned()),
            ],
            connector_files: Vec::new(),
        },
        Extras { env: Vec::new(), authorization: Some(format!("Bearer {admin_token}")) },
    );
    let read = format!("Bearer {read_token}");
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a\n").unwrap();
    let create =
        json!({"name": "lines", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "lines"}})
            .to_string();
    let json_ct = ("content-type", "application/json");

    // No token, a wrong one, or Basic credentials (no Basic users here): 401, Bearer challenge.
    let (code, headers, _) = send(&w, "GET", "/connectors", &[], "");
    assert_eq!((code, headers.get("www-authenticate").map(String::as_str)), (401, Some("Bearer realm=\"sluice\"")));
    assert_eq!(send(&w, "GET", "/connectors", &[("authorization", "Bearer slc_guess")], "").0, 401);
    assert_eq!(send(&w, "GET", "/connectors", &[("authorization", &basic_auth("ci", &admin_token))], "").0, 401);

    // The read role reads and validates; its writes are 403 in Connect's error form.
    assert_eq!(send(&w, "GET", "/connectors", &[("authorization", &read)], "").0, 200);
    let (code, _, body) = send(&w, "POST", "/connectors", &[("authorization", &read), json_ct], &create);
    assert_eq!(code, 403, "{body}");
    let body: Json = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error_code"], 403);
    assert!(body["message"].as_str().unwrap().contains("dashboard has the read role"), "{body}");
    let validate = json!({"connector.class": "FileStreamSource", "file": "/x", "topic": "t"}).to_string();
    let (code, _, body) =
        send(&w, "PUT", "/connector-plugins/FileStreamSource/config/validate", &[("authorization", &read), json_ct], &validate);
    assert_eq!(code, 200, "{body}");
    // The admin role writes.
    let (code, _, body) = send(&w, "POST", "/connectors", &[("authorization", &format!("Bearer {admin_token}")), json_ct], &create);
    assert_eq!(code, 201, "{body}");
    w.wait_running("lines", 1);
    assert_eq!(send(&w, "DELETE", "/connectors/lines", &[("authorization", &read)], "").0, 403);
    assert_eq!(send(&w, "PUT", "/connectors/lines/pause", &[("authorization", &read)], "").0, 403);
    assert_eq!(w.get("/connectors/lines/status").1["connector"]["state"], "RUNNING", "the refused pause changed nothing");

    // CORS: a preflight from an allowed origin is answered without credentials.
    let (code, headers, _) = send(
        &w,
        "OPTIONS",
        "/connectors",
        &[
            ("origin", origin),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "authorization, content-type, x-evil"),
        ],
        "",
    );
    assert_eq!(code, 204, "{headers:?}");
    assert_eq!(headers.get("access-control-allow-origin").map(String::as_str), Some(origin));
    assert_eq!(headers.get("access-control-allow-credentials").map(String::as_str), Some("true"));
    assert_eq!(headers.get("access-control-allow-methods").map(String::as_str), Some("GET,POST,PUT,DELETE"));
    assert_eq!(headers.get("access-control-allow-headers").map(String::as_str), Some("authorization,content-type"));
    // The actual request carries the origin back; a wildcard origin matches.
    let (code, headers, _) = send(&w, "GET", "/connectors", &[("origin", "https://a.corp.example"), ("authorization", &read)], "");
    assert_eq!((code, headers.get("access-control-allow-origin").map(String::as_str)), (200, Some("https://a.corp.example")));
    // Another origin gets no CORS headers (and, without credentials, a 401).
    let (code, headers, _) =
        send(&w, "OPTIONS", "/connectors", &[("origin", "https://evil.example"), ("access-control-request-method", "DELETE")], "");
    assert!(code == 401 && !headers.contains_key("access-control-allow-origin"), "{code} {headers:?}");
    let (_, headers, _) = send(&w, "OPTIONS", "/connectors", &[("origin", origin), ("access-control-request-method", "PATCH")], "");
    assert!(!headers.contains_key("access-control-allow-methods"), "a method not allowed gets no preflight answer: {headers:?}");

    let log = w.output();
    assert!(!log.contains(&read_token) && !log.contains(&admin_token), "a token reached the log");
}

/// `admin.listeners` (KIP-495): set, the `/admin` endpoints move to those listeners; empty,
/// they are served nowhere.
#[test]
fn admin_endpoints_follow_admin_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let admin_port = sluice_tests::free_port();
    let w = Worker::start(&dir.path().join("a"), &[("admin.listeners", &format!("http://127.0.0.1:{admin_port}"))]);
    assert_eq!(w.get("/admin/loggers").0, 404, "not on the main listener");
    assert_eq!(w.get("/connectors").0, 200);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let status = |path: &str| agent.get(format!("http://127.0.0.1:{admin_port}{path}")).call().unwrap().status().as_u16();
    assert_eq!(status("/admin/loggers"), 200, "on the admin listener");
    assert_eq!(status("/admin/loggers/sluice_rest"), 200);
    assert_eq!(status("/connectors"), 404, "the admin listener serves /admin only");
    let off = Worker::start(&dir.path().join("b"), &[("admin.listeners", "")]);
    assert_eq!(off.get("/admin/loggers").0, 404, "empty: no admin endpoints at all");
    assert_eq!(off.get("/connectors").0, 200);
}
