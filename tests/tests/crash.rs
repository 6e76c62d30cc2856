//! SIGKILL the worker while lines stream; after each restart nothing is lost, and the
//! connectors come back on their own.

use std::time::Duration;

use sluice_tests::{eventually, first_deliveries, json, numbered_lines, read_lines, LineWriter, Worker};

#[test]
fn sigkill_mid_stream_loses_nothing() {
    const TOTAL: usize = 30_000;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    std::fs::write(&input, "").unwrap();
    let mut w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
    let (code, body) = w.post("/connectors", &json!({"name": "src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "stream", "batch.size": "500"}}));
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "sink", "config": {"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "stream"}}),
    );
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    w.wait_running("sink", 1);

    // A writer appends lines steadily for the whole test.
    let writer = LineWriter::start(&input, TOTAL, Duration::from_millis(10));

    let mut kills = 0;
    let mut rng = fastrand_seed();
    while !writer.is_done() || kills < 3 {
        std::thread::sleep(Duration::from_millis(150 + rng() % 600));
        w.kill9();
        kills += 1;
        w.restart();
        // Connectors and their tasks come back from the internal topics, no re-POST.
        w.wait_running("src", 1);
        w.wait_running("sink", 1);
        if kills >= 8 {
            break;
        }
    }
    writer.join();

    let expected = numbered_lines(TOTAL);
    eventually(Duration::from_secs(90), "every line in the output", || {
        let out = read_lines(&output);
        let mut seen: Vec<&String> = out.iter().collect();
        seen.sort();
        seen.dedup();
        seen.len() >= TOTAL
    });
    let out = read_lines(&output);
    let mut unique = out.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique, expected, "every input line must reach the output");
    // First occurrences keep the input order: duplicates only repeat what came before.
    assert_eq!(first_deliveries(&out), expected, "order of first deliveries");
    let duplicates = out.len() - TOTAL;
    eprintln!("crash test: {kills} SIGKILLs, {TOTAL} lines, {duplicates} duplicate deliveries (at-least-once)");
}

#[test]
fn state_and_target_states_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "x\n").unwrap();
    let mut w = Worker::start(dir.path(), &[]);
    for (name, state) in [("running", None), ("paused", Some("PAUSED")), ("stopped", Some("STOPPED"))] {
        let mut body =
            json!({"name": name, "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": name}});
        if let Some(s) = state {
            body["initial_state"] = json!(s);
        }
        let (code, resp) = w.post("/connectors", &body);
        assert_eq!(code, 201, "{resp}");
    }
    w.wait_running("running", 1);
    w.kill9();
    w.restart();
    let (code, list) = w.get("/connectors");
    assert_eq!(code, 200);
    assert_eq!(list, json!(["paused", "running", "stopped"]));
    w.wait_running("running", 1);
    w.wait_for("/connectors/paused/status", Duration::from_secs(20), |_, b| {
        b["connector"]["state"] == "PAUSED" && b["tasks"][0]["state"] == "PAUSED"
    });
    w.wait_for("/connectors/stopped/status", Duration::from_secs(20), |_, b| {
        b["connector"]["state"] == "STOPPED" && b["tasks"] == json!([])
    });
    // A clean stop exits 0.
    let status = w.terminate();
    assert!(status.success(), "SIGTERM must exit 0, got {status}");
}

fn fastrand_seed() -> impl FnMut() -> u64 {
    let mut x = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
