//! `sluice.max.records.per.second`: a connector that would flood the worker is held to its
//! rate, and a light pipeline beside it keeps delivering within seconds.

use std::io::Write as _;
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_tests::{read_lines, Worker};

/// The sum of a counter over the tasks of `connector` in `/metrics`.
fn connector_total(w: &Worker, family: &str, connector: &str) -> f64 {
    let (code, _, text) = w.get_text("/metrics");
    assert_eq!(code, 200);
    let label = format!("connector=\"{connector}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(&label))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

#[test]
fn a_flooding_connector_is_held_to_its_rate_and_a_light_one_keeps_moving() {
    const RATE: f64 = 4000.0;
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.txt");
    let output = tmp.path().join("out.txt");
    std::fs::write(&input, "").unwrap();
    let w = Worker::start(&tmp.path().join("w"), &[]);
    // No datagen pacing of its own: it produces as fast as the worker takes records.
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "flood", "config": {"connector.class": "datagen", "kafka.topic": "flood", "quickstart": "bench",
            "payload.bytes": "64", "max.interval": "0", "tasks.max": "2", "sluice.max.records.per.second": RATE.to_string()}}),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post(
        "/connectors",
        &json!({"name": "light-src", "config": {"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": "light"}}),
    );
    assert_eq!(code, 201, "{body}");
    let (code, body) = w.post("/connectors", &json!({"name": "light-sink", "config": {"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": "light"}}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("flood", 2);
    w.wait_running("light-src", 1);
    w.wait_running("light-sink", 1);
    std::thread::sleep(Duration::from_secs(2));

    // The light pipeline, while the flood runs: every line arrives within seconds.
    let family = "kafka_connect_source_task_source_record_poll_total";
    let (before, t0) = (connector_total(&w, family, "flood"), Instant::now());
    let mut f = std::fs::OpenOptions::new().append(true).open(&input).unwrap();
    let mut worst = Duration::ZERO;
    for i in 0..10 {
        let line = format!("line-{i}");
        let written = Instant::now();
        writeln!(f, "{line}").unwrap();
        while !read_lines(&output).contains(&line) {
            assert!(written.elapsed() < Duration::from_secs(15), "{line} not delivered within 15 s beside the flood\n{}", w.output());
            std::thread::sleep(Duration::from_millis(20));
        }
        worst = worst.max(written.elapsed());
        std::thread::sleep(Duration::from_millis(300));
    }
    let (after, elapsed) = (connector_total(&w, family, "flood"), t0.elapsed().as_secs_f64());
    let rate = (after - before) / elapsed;
    eprintln!("flood: {rate:.0} records/s over {elapsed:.1} s (limit {RATE}); light pipeline: worst latency {worst:?}");
    // At most the rate plus a second's burst and a batch per task over the window.
    assert!(rate <= RATE * 1.5, "the flood ran at {rate:.0} records/s, above its limit of {RATE}");
    assert!(rate >= RATE * 0.5, "the flood ran at {rate:.0} records/s: it is held to its rate, not stopped");

    // A bad value is refused by name.
    let (code, body) = w.put(
        "/connectors/flood/config",
        &json!({"connector.class": "datagen", "kafka.topic": "flood", "sluice.max.records.per.second": "fast"}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("sluice.max.records.per.second"), "{body}");
}
