//! sluice's REST answers against those of a real Kafka Connect 4.3.0 worker, recorded in
//! `tests/golden/rest/connect-4.3/` (see its README for how): the same requests in the same
//! order get the same status codes, and the answers the same fields in the same order.
//! Contents that differ by design (plugin lists, log4j's logger names, versions, addresses)
//! are compared by shape only.

use std::path::{Path, PathBuf};

use sluice_tests::{json, Json, Worker};

use crate::rest::{create, status_in};

fn recorded(file: &str) -> Vec<Json> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/rest/connect-4.3").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Json = serde_json::from_str(&text).unwrap();
    doc["entries"].as_array().unwrap().clone()
}

/// Field names in order, recursively into objects and the first element of arrays.
fn shape(v: &Json) -> Json {
    match v {
        Json::Object(m) => Json::Array(m.iter().map(|(k, v)| json!([k, shape(v)])).collect()),
        Json::Array(a) => a.first().map_or(json!([]), |first| json!([shape(first)])),
        _ => Json::Null,
    }
}

/// The recording's file paths, moved into this test's directory.
fn moved(v: &Json, dir: &Path) -> Json {
    serde_json::from_str(&v.to_string().replace("/tmp/rest-golden-work", dir.to_str().unwrap())).unwrap()
}

#[test]
fn trailing_slashes_and_empty_segments_answer_as_connect_4_3() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    let entries = recorded("trailing_slashes.json");
    // The recording starts with connector x, a FileStreamSource, in place.
    let x_config = entries
        .iter()
        .find(|e| e["request"]["path"] == "/connectors/x/config/")
        .map(|e| moved(&e["body"], dir.path()))
        .expect("x's config in the recording");
    create(&w, "x", &x_config);
    status_in(&w, "x", "RUNNING", 1);
    for e in &entries {
        let (method, path) = (e["request"]["method"].as_str().unwrap(), e["request"]["path"].as_str().unwrap());
        let body = moved(&e["request"]["body"], dir.path());
        let reply = w.call(method, path, (!body.is_null()).then_some("application/json"), &if body.is_null() { String::new() } else { body.to_string() });
        let what = format!("{method} {path}");
        assert_eq!(reply.status, e["status"].as_u64().unwrap() as u16, "{what}: {}", reply.body);
        if reply.status == 400 {
            continue; // Jetty's HTML page there; ours is Connect's JSON error shape
        }
        // A task config's key order is a Java HashMap's in Connect: compared as a set below.
        if path.starts_with("/connectors/x/tasks/0/status") || path.starts_with("/connectors/x/status") {
            assert_eq!(shape(&reply.body), shape(&e["body"]), "{what}: fields and their order\n ours: {}\n Connect's: {}", reply.body, e["body"]);
        }
        if path == "/connectors/x/tasks/" {
            let keys = |b: &Json| {
                let mut k: Vec<String> = b[0]["config"].as_object().unwrap().keys().cloned().collect();
                k.sort();
                k
            };
            assert_eq!(shape(&reply.body[0]["id"]), shape(&e["body"][0]["id"]), "{what}");
            assert_eq!(keys(&reply.body), keys(&e["body"]), "{what}: task config keys");
            assert_eq!(reply.body[0]["config"]["task.class"], e["body"][0]["config"]["task.class"], "{what}");
        }
        if path == "/connectors/x/config/" {
            assert_eq!(reply.body, x_config, "{what}");
        }
    }
}

#[test]
fn validate_definitions_have_connects_fields_in_connects_order() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[]);
    for e in recorded("validate.json") {
        let path = e["request"]["path"].as_str().unwrap();
        if e["status"] != 200 || !path.contains("FileStream") {
            continue;
        }
        let body = moved(&e["request"]["body"], dir.path());
        if body.as_object().is_some_and(|b| b.is_empty()) {
            continue; // `{}`: Connect answers 500, sluice validates against the path's plugin (docs/compatibility.md)
        }
        let (code, ours) = w.put(path, &body);
        let what = format!("PUT {path} {body}");
        assert_eq!(code, 200, "{what}: {ours}");
        assert_eq!(ours["error_count"], e["body"]["error_count"], "{what}\n ours: {ours}");
        assert_eq!(ours["groups"], e["body"]["groups"], "{what}");
        let theirs = &e["body"]["configs"];
        let definition_fields = |configs: &Json| shape(&configs[0]["definition"]);
        assert_eq!(definition_fields(&ours["configs"]), definition_fields(theirs), "{what}: definition fields");
        // Every key Connect reports an error for, sluice does too, with the same messages.
        for c in theirs.as_array().unwrap() {
            let errors = &c["value"]["errors"];
            if errors.as_array().is_some_and(|a| !a.is_empty()) {
                let name = &c["value"]["name"];
                let ours_c = ours["configs"].as_array().unwrap().iter().find(|o| o["value"]["name"] == *name);
                let ours_errors = ours_c.map(|o| o["value"]["errors"].clone()).unwrap_or(Json::Null);
                assert_eq!(&ours_errors, errors, "{what}: errors of {name}");
            }
        }
    }
}

/// A listener without a host, as Connect's default `http://:8083`: one socket for IPv6 and
/// IPv4, and the worker advertised at the address the host name resolves to (Connect's
/// `InetAddress.getLocalHost()`), recorded in `listeners_no_host.json`.
#[test]
fn a_listener_without_a_host_takes_ipv4_and_ipv6_and_advertises_the_host_address() {
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("listeners", "http://:{port}")]);
    let input = dir.path().join("in.txt");
    create(&w, "x", &json!({"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "t"}));
    let status = status_in(&w, "x", "RUNNING", 1);
    let want = sluice_runtime::worker::config::local_host_address();
    assert_eq!(status["connector"]["worker_id"], json!(format!("{want}:{}", w.port)), "{status}");
    // Where Connect's worker accepted connections, sluice's does too.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/rest/connect-4.3/listeners_no_host.json");
    let doc: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let accepts = doc["listening_sockets"]["accepts_on"].as_object().unwrap();
    assert_eq!(accepts.len(), 2);
    for (ip, accepted) in accepts {
        let ip: std::net::IpAddr = ip.parse().unwrap();
        let ours = std::net::TcpStream::connect((ip, w.port)).is_ok();
        assert_eq!(ours, accepted.as_bool().unwrap(), "connecting to {ip}");
    }
    let theirs = recorded("listeners_no_host.json");
    let status = theirs.iter().find(|e| e["request"]["path"] == "/connectors/nohost/status").unwrap();
    assert_eq!(shape(&status["body"]), shape(&w.get("/connectors/x/status").1));
}
