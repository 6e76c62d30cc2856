//! TLS to PostgreSQL through the real binary: a cluster that refuses unencrypted
//! connections, the Postgres source (`database.sslmode`/`database.sslrootcert`, also for
//! the replication stream) and the JDBC sink (`sslmode`/`sslrootcert` in `connection.url`)
//! verifying the server against the test CA.

use std::time::Duration;

use sluice_tests::{eventually, json, Postgres, Worker};

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
