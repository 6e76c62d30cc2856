//! TLS to PostgreSQL through the real binary: a cluster that refuses unencrypted
//! connections, the Postgres source (`database.sslmode`/`database.sslrootcert`, also for
//! the replication stream) and the JDBC sink (`sslmode`/`sslrootcert` in `connection.url`)
//! verifying the server against the test CA; then client certificates (`database.sslcert`/
//! `sslkey`/`sslpassword`, and the same parameters in the sink's URL) against a cluster
//! whose pg_hba.conf authenticates the test user by certificate.

use std::path::Path;
use std::time::Duration;

use sluice_tests::{eventually, json, Json, Postgres, Worker, CERT_USER};

#[test]
fn source_and_sink_reach_a_tls_only_postgres_and_verify_it() {
    let pg = Postgres::start_tls();
    let ca = pg.ca_cert();
    let ca = ca.to_str().unwrap();
    pg.sql("CREATE DATABASE wh");
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL); INSERT INTO items VALUES (1, 'seed')");
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "300")]);
    let source = |slot: &str, extra: &[(&str, &str)]| pg.source_config(slot, extra);

    // Without TLS the server turns the connector away, and the error says why.
    let (code, body) = w.put(
        "/connector-plugins/io.debezium.connector.postgresql.PostgresConnector/config/validate",
        &source("plain", &[("database.sslmode", "disable")]),
    );
    assert_eq!(code, 200, "{body}");
    assert!(body["error_count"].as_i64().unwrap() >= 1, "{body}");
    assert!(body.to_string().contains("no encryption"), "the server's reason is shown: {body}");

    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "src", "config": source("tls_slot", &[("database.sslmode", "verify-full"), ("database.sslrootcert", ca)])}),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "wh", "config": pg.sink_config("wh", &format!("sslmode=verify-full&sslrootcert={ca}"), &[("schema.evolution", "basic")])}),
    );
    assert_eq!(code, 201, "{body}");
    snapshot_then_stream_reach_the_target(&pg, &w);

    // Every session of the connectors, the replication stream included, is encrypted.
    let sessions = pg.sql(
        "SELECT a.application_name || ':' || a.backend_type || ':' || s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.application_name LIKE 'sluice%' ORDER BY 1",
    );
    assert!(sessions.contains("walsender:true"), "the replication stream: {sessions}");
    assert!(sessions.contains("sluice-jdbc-sink:client backend:true"), "the sink: {sessions}");
    assert!(!sessions.contains(":false"), "{sessions}");

    // A CA that did not sign the server's certificate is refused.
    let other = dir.path().join("other-ca.crt");
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(dir.path().join("other-ca.key"))
        .arg("-out")
        .arg(&other)
        .args(["-days", "1", "-subj", "/CN=someone else"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let (_, body) = w.put(
        "/connector-plugins/io.debezium.connector.postgresql.PostgresConnector/config/validate",
        &source("other", &[("database.sslmode", "verify-ca"), ("database.sslrootcert", other.to_str().unwrap())]),
    );
    assert!(body["error_count"].as_i64().unwrap() >= 1, "{body}");
    assert!(body.to_string().to_lowercase().contains("certificate"), "{body}");
}

const PG_SOURCE: &str = "/connector-plugins/io.debezium.connector.postgresql.PostgresConnector/config/validate";
const JDBC_SINK: &str = "/connector-plugins/io.debezium.connector.jdbc.JdbcSinkConnector/config/validate";

fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl").args(args).current_dir(dir).output().expect("the openssl tool");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Every error `validate` reported, as `key: error`.
fn all_errors(body: &Json) -> Vec<String> {
    body["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| {
            let name = c["value"]["name"].as_str().unwrap_or_default().to_owned();
            c["value"]["errors"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |e| format!("{name}: {}", e.as_str().unwrap_or_default()))
        })
        .collect()
}

/// `config` as the validate endpoint wants it (with a name).
fn named(config: &Json) -> Json {
    let mut c = config.clone();
    c["name"] = json!("check");
    c
}

/// The errors `validate` reported for `key`, joined.
fn errors_of(body: &Json, key: &str) -> String {
    body["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["value"]["name"] == key)
        .flat_map(|c| c["value"]["errors"].as_array().cloned().unwrap_or_default())
        .map(|e| e.as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn client_certificates_authenticate_every_session_of_source_and_sink() {
    let pg = Postgres::start_tls_client_cert();
    let ca = pg.ca_cert();
    let ca = ca.to_str().unwrap();
    let (crt, key) = pg.client_cert();
    let (crt, key) = (crt.to_str().unwrap(), key.to_str().unwrap());
    pg.sql("CREATE DATABASE wh");
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL); INSERT INTO items VALUES (1, 'seed')");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The source gets pgJDBC's default layout, an encrypted DER PKCS#8 key (.pk8); the sink an
    // encrypted PEM one. A stranger's self-signed certificate and an unrelated key for the
    // failure cases.
    const SOURCE_KEY_PW: &str = "SrcKeyPw-5521";
    const SINK_KEY_PW: &str = "SinkKeyPw-8830";
    openssl(
        d,
        &[
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            &format!("pass:{SOURCE_KEY_PW}"),
            "-in",
            key,
            "-outform",
            "DER",
            "-out",
            "client.pk8",
        ],
    );
    openssl(
        d,
        &["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", &format!("pass:{SINK_KEY_PW}"), "-in", key, "-out", "client-enc.key"],
    );
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "stranger.key",
            "-out",
            "stranger.crt",
            "-days",
            "1",
            "-subj",
            &format!("/CN={CERT_USER}"),
        ],
    );
    let path = |f: &str| d.join(f).to_str().unwrap().to_owned();
    let (pk8, enc_pem, stranger_crt, stranger_key) =
        (path("client.pk8"), path("client-enc.key"), path("stranger.crt"), path("stranger.key"));
    let w = Worker::start(d, &[("offset.flush.interval.ms", "300")]);
    let tls = [("database.user", CERT_USER), ("database.sslmode", "verify-full"), ("database.sslrootcert", ca)];
    let source = |slot: &str, extra: &[(&str, &str)]| pg.source_config(slot, &[&tls[..], extra].concat());
    fn with_cert<'a>(crt: &'a str, key: &'a str) -> [(&'static str, &'a str); 2] {
        [("database.sslcert", crt), ("database.sslkey", key)]
    }

    // Without a certificate the server turns the user away, and validate says which keys to set.
    let (_, body) = w.put(PG_SOURCE, &source("v", &[]));
    let err = errors_of(&body, "database.sslcert");
    assert!(err.contains("valid client certificate") && err.contains("database.sslkey"), "{body}");
    let (_, body) =
        w.put(JDBC_SINK, &pg.sink_config("wh", &format!("sslmode=verify-full&sslrootcert={ca}"), &[("connection.username", CERT_USER)]));
    assert!(errors_of(&body, "connection.url").contains("valid client certificate"), "{body}");
    // A certificate from a CA the server does not trust: refused, and the key is named.
    let (_, body) = w.put(PG_SOURCE, &source("v", &[("database.sslcert", &stranger_crt), ("database.sslkey", &stranger_key)]));
    let err = errors_of(&body, "database.sslcert");
    assert!(err.contains("refused the client certificate") && err.contains("stranger.crt"), "{body}");
    // A key that is not the certificate's, an encrypted key without its password, a wrong password.
    let (_, body) = w.put(PG_SOURCE, &source("v", &[("database.sslcert", crt), ("database.sslkey", &stranger_key)]));
    assert!(errors_of(&body, "database.sslkey").contains("is not the private key of the certificate"), "{body}");
    let (_, body) = w.put(PG_SOURCE, &source("v", &with_cert(crt, &pk8)));
    assert!(errors_of(&body, "database.sslkey").contains("database.sslpassword"), "{body}");
    let (_, body) = w.put(PG_SOURCE, &source("v", &[&with_cert(crt, &pk8)[..], &[("database.sslpassword", "not-it-3344")]].concat()));
    assert!(errors_of(&body, "database.sslkey").contains("cannot be decrypted"), "{body}");
    assert!(!body.to_string().contains("not-it-3344"), "{body}");
    let (_, body) = w.put(PG_SOURCE, &source("v", &[("database.sslcert", crt), ("database.sslkey", "/nonexistent/client.key")]));
    assert!(errors_of(&body, "database.sslkey").contains("/nonexistent/client.key"), "{body}");
    // The plain PEM key, and the encrypted one with its password, pass.
    let (_, body) = w.put(PG_SOURCE, &named(&source("v", &with_cert(crt, key))));
    assert!(all_errors(&body).is_empty(), "{:?}", all_errors(&body));
    let good_source = source("cert_slot", &[&with_cert(crt, &pk8)[..], &[("database.sslpassword", SOURCE_KEY_PW)]].concat());
    let (_, body) = w.put(PG_SOURCE, &named(&good_source));
    assert!(all_errors(&body).is_empty(), "{:?}", all_errors(&body));
    assert!(!body.to_string().contains(SOURCE_KEY_PW), "validate shows the key password: {body}");
    let sink_url = format!("sslmode=verify-full&sslrootcert={ca}&sslcert={crt}&sslkey={enc_pem}&sslpassword={SINK_KEY_PW}");
    let good_sink = pg.sink_config("wh", &sink_url, &[("connection.username", CERT_USER), ("schema.evolution", "basic")]);
    let (_, body) = w.put(JDBC_SINK, &named(&good_sink));
    assert!(all_errors(&body).is_empty(), "{:?}", all_errors(&body));
    assert!(!body.to_string().contains(SINK_KEY_PW), "validate shows the key password: {body}");

    let (code, body) = w.post("/connectors", &json!({"name": "src", "config": good_source}));
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post("/connectors", &json!({"name": "wh", "config": good_sink}));
    assert_eq!(code, 201, "{body}");
    snapshot_then_stream_reach_the_target(&pg, &w);

    // Every session of the connectors presented the certificate: the catalog session, the
    // sink and the walsender serving the replication stream.
    let sessions = pg.sql(&format!(
        "SELECT a.application_name || ':' || a.backend_type || ':' || s.ssl || ':' || coalesce(s.client_dn, '-') \
         FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.usename = '{CERT_USER}' ORDER BY 1"
    ));
    let dn = format!("/CN={CERT_USER}");
    assert!(sessions.contains(&format!("sluice-postgres:walsender:true:{dn}")), "the replication stream: {sessions}");
    assert!(sessions.contains(&format!("sluice-postgres:client backend:true:{dn}")), "the catalog session: {sessions}");
    assert!(sessions.contains(&format!("sluice-jdbc-sink:client backend:true:{dn}")), "the sink: {sessions}");
    assert!(sessions.lines().all(|l| l.ends_with(&format!(":true:{dn}"))), "{sessions}");

    // A source without a certificate fails with a trace that says what to set.
    let (code, body) = w.post("/connectors", &json!({"name": "nocert", "config": source("nocert_slot", &[])}));
    assert_eq!(code, 201, "{body}");
    let status = w.wait_for("/connectors/nocert/status", Duration::from_secs(60), |_, b| b["tasks"][0]["state"] == "FAILED");
    let trace = status["tasks"][0]["trace"].as_str().unwrap_or_default();
    assert!(trace.contains("valid client certificate") && trace.contains("database.sslcert"), "{status}");

    // A sink whose certificate the server refuses fails at once (a retry cannot help), and
    // says which key to fix.
    let stranger_url = format!("sslmode=verify-full&sslrootcert={ca}&sslcert={stranger_crt}&sslkey={stranger_key}");
    let stranger_sink = pg.sink_config("wh", &stranger_url, &[("connection.username", CERT_USER)]);
    let (code, body) = w.post("/connectors", &json!({"name": "stranger", "config": stranger_sink}));
    assert_eq!(code, 201, "{body}");
    let status = w.wait_for("/connectors/stranger/status", Duration::from_secs(30), |_, b| b["tasks"][0]["state"] == "FAILED");
    let trace = status["tasks"][0]["trace"].as_str().unwrap_or_default();
    assert!(trace.contains("refused the client certificate") && trace.contains("sslcert"), "{status}");

    // The key passwords appear nowhere: configs, statuses, task configs, the worker's log.
    let (_, config) = w.get("/connectors/src/config");
    assert_eq!(config["database.sslpassword"], "[hidden]");
    let (_, config) = w.get("/connectors/wh/config");
    assert!(config["connection.url"].as_str().unwrap().contains("sslpassword=[hidden]"), "{config}");
    for p in [
        "/connectors/src",
        "/connectors/wh",
        "/connectors/src/tasks",
        "/connectors/wh/tasks",
        "/connectors/src/status",
        "/connectors/wh/status",
        "/connectors?expand=info&expand=status",
    ] {
        let (_, body) = w.get(p);
        let text = body.to_string();
        assert!(!text.contains(SOURCE_KEY_PW) && !text.contains(SINK_KEY_PW), "{p}: {text}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let out = w.output();
    assert!(!out.contains(SOURCE_KEY_PW) && !out.contains(SINK_KEY_PW), "the worker's log shows a key password");
}

/// With `src` (Postgres source) and `wh` (JDBC sink into database `wh`) created: waits for
/// both to run and the snapshot's seed row to reach the target, then streams an insert and
/// an update and waits for them there.
fn snapshot_then_stream_reach_the_target(pg: &Postgres, w: &Worker) {
    w.wait_running("src", 1);
    w.wait_running("wh", 1);
    let rows = || pg.psql().sql("wh", "SELECT coalesce(string_agg(id || ':' || name, ',' ORDER BY id), '') FROM items").trim().to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !(pg.psql().sql("wh", "SELECT to_regclass('items') IS NOT NULL") == "t" && rows() == "1:seed") {
        if std::time::Instant::now() > deadline {
            let (_, src) = w.get("/connectors/src/status");
            let (_, sink) = w.get("/connectors/wh/status");
            let out = w.output();
            panic!("the snapshot never reached the target\nsource {src}\nsink {sink}\n{}", &out[out.len().saturating_sub(6000)..]);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    pg.sql("INSERT INTO items VALUES (2, 'two'); UPDATE items SET name = 'one' WHERE id = 1");
    eventually(Duration::from_secs(60), "streamed changes in the target", || rows() == "1:one,2:two");
}
