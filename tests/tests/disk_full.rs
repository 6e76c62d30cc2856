//! The embedded log's disk fills up. The worker's data directory is a tmpfs of a few MB
//! (mounted by the test, which runs as root as CI does); a Postgres source snapshots a
//! table and then streams large rows until no more fit. Appends fail with "No space left
//! on device", the task fails with it in its trace and restarts itself, the worker stays
//! up; the filesystem is grown again and the pipeline catches up without a worker restart.
//! Every row is in the topic, which also shows the slot was never confirmed past what
//! reached the log (the restarted task resumes from the slot).
//!
//! The second test SIGKILLs the worker while its appends keep failing (each failed write
//! group is cut back off the segment), then grows the filesystem and starts the worker
//! again on the same directory: every record stored before the kill is still there, and
//! every row arrives.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sluice_tests::{json, Postgres, Worker};

const TOPIC: &str = "full.public.items";

/// A tmpfs mounted at a directory, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir).output().unwrap();
        assert!(out.status.success(), "mounting a tmpfs needs root: {}", String::from_utf8_lossy(&out.stderr));
        Tmpfs(dir.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let out = Command::new("mount").args(["-o", &format!("remount,size={size}")]).arg(&self.0).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The ids in the topic (read-only, beside the running worker).
fn ids(data: &Path) -> Vec<i64> {
    let (code, out, _) = Worker::cli(&["topics", "consume", TOPIC, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).filter_map(|r| r["key"]["id"].as_i64()).collect()
}

#[test]
fn a_full_log_disk_fails_appends_and_the_pipeline_catches_up_when_room_returns() {
    fill_then_grow(false);
}

#[test]
fn a_worker_sigkilled_while_its_log_disk_is_full_loses_nothing() {
    fill_then_grow(true);
}

/// Fills the log's disk under a streaming source, then grows it; with `kill`, the worker is
/// SIGKILLed while its appends fail and started again after the disk grew.
fn fill_then_grow(kill: bool) {
    let pg = Postgres::start();
    pg.sql("CREATE TABLE items (id bigint PRIMARY KEY, body text NOT NULL); INSERT INTO items SELECT g, repeat('s', 800) FROM generate_series(1, 500) g;");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let disk = Tmpfs::mount(&data, "3m");
    let mut w = Worker::start(
        dir.path(),
        &[
            ("offset.flush.interval.ms", "200"),
            ("key.converter.schemas.enable", "false"),
            ("value.converter.schemas.enable", "false"),
            ("restart.policy", "on-failure"),
        ],
    );
    let pid = w.pid();
    let config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": pg.port.to_string(), "database.user": "postgres",
        "database.password": "", "database.dbname": "postgres", "topic.prefix": "full",
        "table.include.list": "public.items", "slot.name": "disk_full", "snapshot.mode": "initial",
    });
    let (code, body) = w.post("/connectors", &json!({"name": "full", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("full", 1);
    w.eventually(Duration::from_secs(60), "the snapshot", || ids(&data).len() >= 500);

    // About 6 MB of change events into what is left of 3 MB.
    for chunk in 0..20 {
        let from = 1_000 + chunk * 200;
        pg.sql(&format!("INSERT INTO items SELECT g, repeat('c', 1000) FROM generate_series({from}, {}) g", from + 199));
    }
    let mut trace = String::new();
    w.eventually(Duration::from_secs(90), "the task failing with no space left", || {
        let (_, status) = w.get("/connectors/full/status");
        trace = status["tasks"][0]["trace"].as_str().unwrap_or_default().to_owned();
        trace.contains("No space left on device")
    });
    let log = sluice_tests::strip_ansi(&w.output());
    assert!(log.contains("log write failed; the group's records were thrown away"), "the writer went on after the failed group");
    let stored = ids(&data).len();
    assert!(stored < 4_500, "the disk was meant to fill before the stream ended ({stored} records stored)");
    // Still full for a while: the task keeps failing and restarting, the worker stays up.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(w.pid(), pid);
    let mut kept = 0;
    if kill {
        // Mid-way through a restart's failing appends and their cut-backs.
        std::thread::sleep(Duration::from_millis(1_300));
        let before: BTreeSet<i64> = ids(&data).into_iter().collect();
        w.kill9();
        let after: BTreeSet<i64> = ids(&data).into_iter().collect();
        let lost: Vec<_> = before.difference(&after).take(10).collect();
        assert!(lost.is_empty(), "records readable before the SIGKILL are gone after it: {lost:?}");
        kept = after.len();
    }

    disk.resize("64m");
    if kill {
        w.restart();
        let after: BTreeSet<i64> = ids(&data).into_iter().collect();
        assert!(after.len() >= kept, "the restarted worker's log holds {} records, {kept} before", after.len());
    }
    pg.sql("INSERT INTO items VALUES (-1, 'end')");
    let expected: BTreeSet<i64> = pg.sql("SELECT id FROM items").lines().map(|l| l.trim().parse().unwrap()).collect();
    let mut got = BTreeSet::new();
    w.eventually(Duration::from_secs(120), "every row once there is room again", || {
        got = ids(&data).into_iter().collect();
        got.contains(&-1)
    });
    let missing: Vec<_> = expected.difference(&got).take(10).collect();
    assert!(missing.is_empty(), "{} rows missing, e.g. {missing:?}", expected.difference(&got).count());
    if !kill {
        assert_eq!(w.pid(), pid, "the worker stayed up");
    }
    w.wait_running("full", 1);
    let (schedule, faults) = match kill {
        false => ("the embedded log's 3 MB filesystem fills, then grows to 64 MB", "disk full"),
        true => (
            "the embedded log's 3 MB filesystem fills, the worker is SIGKILLed while appends fail, then the disk grows and it restarts",
            "disk full, SIGKILL",
        ),
    };
    sluice_tests::report_figures(json!({
        "schedule": schedule,
        "faults": faults, "destination": "embedded log (topic)",
        "written": expected.len(), "delivered_distinct": got.len(), "lost": 0, "stored_before_full": stored,
        "trace": trace.lines().find(|l| l.contains("No space left")).unwrap_or(""),
    }));
}
