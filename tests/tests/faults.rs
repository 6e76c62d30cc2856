//! Faults between sluice and its services, mostly through the project's own fault proxy
//! (`tests/src/fault_proxy.rs`), each schedule run while a writer changes the source:
//! - the source's connections (catalog, snapshot and replication sessions) cut again and
//!   again, stalled past the status interval, and the replication session ended by the
//!   server with its close passed on 2 s late;
//! - a 60 s black hole of the database (nothing in or out, new connections unanswered);
//! - the warehouse sink's connection cut between its `COMMIT` and the reply (the ambiguous
//!   commit), again and again;
//! - S3 uploads throttled and cut mid-part, then answered late;
//! - the Kafka broker stopped (SIGSTOP) past `session.timeout.ms` in distributed mode;
//! - the broker's connections cut again and again, then black-holed past
//!   `session.timeout.ms`, in distributed mode (the proxy rewrites the broker's advertised
//!   address, so every connection goes through it).
//!
//! In the end the destination reproduces the table (nothing lost, nothing stale, and no
//! duplicate in the warehouse), the task is RUNNING, the failure was visible meanwhile (a
//! [`sluice_tests::StatusWatch`] samples the status every 100 ms: the task's trace, or, for
//! a broker out of reach in distributed mode, the worker's `/health`, since the statuses
//! travel through that broker), and the replication slot was never confirmed past what the
//! log held.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_tests::{
    assert_first_deliveries, json, read_lines, Fault, FaultProxy, Json, KafkaBroker, Launch, LineWriter, Moto, Postgres, Sighting,
    SqlWriter, Worker,
};

/// What a user watching `connector`'s status saw: at least one trace on a RUNNING task during
/// the faults (`seen`), then, once the faults are over, the tasks RUNNING without one. Returns
/// the figures: when the first trace was seen, how many changes of trace, the first line.
fn check_traces(w: &Worker, connector: &str, seen: &[Sighting]) -> Json {
    let first = seen.iter().find(|s| s.state == "RUNNING" && !s.trace.is_empty());
    let Some(first) = first else {
        panic!("no failure was visible in {connector}'s task trace during the faults: {seen:?}\nworker output:\n{}", w.output())
    };
    check_traces_gone(w, connector);
    json!({"trace_from_s": tenths(first.at), "trace_changes": seen.len(), "trace": first.trace})
}

/// What a user watching the worker's `/health` saw while its broker was out of reach: the
/// worker unhealthy, out of the group, during the fault (`seen`), and healthy again after it.
/// In distributed mode the task statuses travel through the status topic on that broker, so
/// the worker's health is where such an outage shows while it lasts.
fn check_health(w: &Worker, seen: &[Sighting]) -> Json {
    let Some(first) = seen.iter().find(|s| s.state.starts_with("500") && s.trace.contains("ensuring membership in the cluster")) else {
        panic!("the worker never reported itself unhealthy while its broker was out of reach: {seen:?}\nworker output:\n{}", w.output())
    };
    w.eventually(Duration::from_secs(120), "the worker healthy again", || w.get("/health").0 == 200);
    json!({"unhealthy_from_s": tenths(first.at), "health": first.trace})
}

/// `x` rounded to a tenth, as the report shows seconds.
fn tenths(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Adds `more`'s fields to the object `figures`.
fn with(mut figures: Json, more: Json) -> Json {
    for (k, v) in more.as_object().expect("an object") {
        figures[k] = v.clone();
    }
    figures
}

const TOPIC: &str = "flt.public.items";

fn consume(data: &std::path::Path) -> Vec<Json> {
    let (code, out, _) = Worker::cli(&["topics", "consume", TOPIC, "--data-dir", data.to_str().unwrap(), "--from-beginning"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Change events delivered more than once (the same key, operation and value): allowed
/// in a topic (at least once), counted for the report.
fn duplicates(records: &[Json]) -> usize {
    let mut seen = std::collections::HashSet::new();
    records
        .iter()
        .filter(|r| !seen.insert((r["key"]["id"].as_i64(), r["value"]["op"].to_string(), r["value"]["after"]["v"].as_i64())))
        .count()
}

/// The newest event per key: `id -> v` (a delete removes the key).
fn applied(records: &[Json]) -> BTreeMap<i64, i64> {
    let mut state = BTreeMap::new();
    for r in records {
        let Some(id) = r["key"]["id"].as_i64() else { continue };
        match r["value"]["op"].as_str() {
            Some("r" | "c" | "u") => {
                state.insert(id, r["value"]["after"]["v"].as_i64().unwrap());
            }
            Some("d") => {
                state.remove(&id);
            }
            _ => {}
        }
    }
    state
}

const ROWS: i64 = 2_000;

/// A worker with a Postgres source `flt` on table `items` (ROWS rows) reached through
/// `port`, its snapshot read.
fn start_source(pg: &Postgres, port: u16, dir: &std::path::Path) -> Worker {
    pg.sql(&format!(
        "CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL); INSERT INTO items SELECT g, 0 FROM generate_series(1, {ROWS}) g;"
    ));
    let w = Worker::start(
        dir,
        &[
            ("offset.flush.interval.ms", "200"),
            ("key.converter.schemas.enable", "false"),
            ("value.converter.schemas.enable", "false"),
            ("restart.policy", "on-failure"),
        ],
    );
    let config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": port.to_string(), "database.user": "postgres",
        "database.password": "", "database.dbname": "postgres", "topic.prefix": "flt",
        "table.include.list": "public.items", "slot.name": "faults", "snapshot.mode": "initial",
        "status.update.interval.ms": "1000",
    });
    let (code, body) = w.post("/connectors", &json!({"name": "flt", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("flt", 1);
    let data = dir.join("data");
    w.eventually(Duration::from_secs(60), "the snapshot", || {
        consume(&data).iter().filter(|r| r["value"]["op"] == "r").count() as i64 >= ROWS
    });
    w
}

/// Postgres, a fault proxy in front of it and a worker whose source reaches it through the
/// proxy, its snapshot read.
fn start_source_behind_proxy() -> (Postgres, FaultProxy, tempfile::TempDir, Worker) {
    let pg = Postgres::start();
    let proxy = FaultProxy::start(([127, 0, 0, 1], pg.port).into());
    let dir = tempfile::tempdir().unwrap();
    let w = start_source(&pg, proxy.port, dir.path());
    (pg, proxy, dir, w)
}

/// Inserts above the snapshot and updates across it, written straight to Postgres.
fn start_writer(pg: &Postgres) -> SqlWriter {
    SqlWriter::start(pg, Duration::from_millis(5), move |i| {
        format!("BEGIN; INSERT INTO items VALUES ({}, 1); UPDATE items SET v = v + 1 WHERE id = {}; COMMIT;\n", 10_000 + i, 1 + i % ROWS)
    })
}

/// Waits for an end marker written after the writer stopped, then checks that the newest
/// event per key reproduces the table; returns the records.
fn check_topic(pg: &Postgres, w: &Worker, data: &std::path::Path) -> Vec<Json> {
    pg.sql("INSERT INTO items VALUES (-1, 0)");
    let mut records = Vec::new();
    w.eventually(Duration::from_secs(180), "the end marker after the faults", || {
        records = consume(data);
        records.iter().any(|r| r["key"]["id"] == -1)
    });
    let expected: BTreeMap<i64, i64> = pg
        .sql("SELECT id || '|' || v FROM items ORDER BY id")
        .lines()
        .map(|l| {
            let (id, v) = l.split_once('|').unwrap();
            (id.parse().unwrap(), v.parse().unwrap())
        })
        .collect();
    let got = applied(&records);
    let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(k)).take(10).collect();
    let stale: Vec<_> = expected.iter().filter(|(k, v)| got.get(k).is_some_and(|g| g != *v)).take(10).collect();
    let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(k)).take(10).collect();
    assert!(missing.is_empty() && stale.is_empty() && extra.is_empty(), "missing {missing:?}, stale {stale:?}, extra {extra:?}");
    records
}

#[test]
fn a_postgres_source_loses_nothing_while_its_connections_are_cut_and_stalled() {
    let (pg, proxy, dir, w) = start_source_behind_proxy();
    let data = dir.path().join("data");

    let writer = start_writer(&pg);
    let accepted_before = proxy.accepted();
    let watch = w.watch_status("flt");
    for round in 0..8 {
        std::thread::sleep(Duration::from_secs(2));
        slot_not_ahead(&pg, &w);
        if round == 4 {
            // Held, not cut: nothing moves for 5 s, past the status interval.
            proxy.set(Fault::Stall);
            std::thread::sleep(Duration::from_secs(5));
            proxy.set(Fault::Pass);
        } else if round == 6 {
            // The server ends the replication session; its close reaches sluice 2 s late.
            proxy.set_slow_close(Duration::from_secs(2));
            pg.sql(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'faults' AND active_pid IS NOT NULL",
            );
            std::thread::sleep(Duration::from_secs(3));
            proxy.set_slow_close(Duration::ZERO);
        } else {
            proxy.reset_all();
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let seen = watch.stop();
    let traces = check_traces(&w, "flt", &seen);
    let transactions = writer.finish();
    let records = check_topic(&pg, &w, &data);
    let reconnects = proxy.accepted() - accepted_before;
    assert!(reconnects >= 7, "the source reconnected after each cut ({reconnects} new connections)");
    let (code, status) = w.get("/connectors/flt/status");
    assert_eq!((code, &status["tasks"][0]["state"]), (200, &json!("RUNNING")), "{status}");
    let log = sluice_tests::strip_ansi(&w.output());
    assert!(log.contains("replication stream failed"), "no cut was seen by the replication stream");
    sluice_tests::report_figures(with(
        json!({
            "schedule": "Postgres connections cut every 2 s, stalled 5 s, the replication session ended by the server with its close 2 s late",
            "faults": "6 cuts, 1 stall of 5 s, 1 slow close", "destination": "embedded log (topic)",
            "written": ROWS as u64 + 2 * transactions, "delivered": records.len(), "lost": 0, "duplicated": duplicates(&records),
            "reconnects": reconnects,
        }),
        traces,
    ));
}

/// The slot's confirmed position, then the position the stored offset resumes at: the first
/// may never pass the second (the slot moves only after what it covers is durable).
fn slot_then_offset(pg: &Postgres, w: &Worker) -> Option<(u64, u64)> {
    let slot = pg.sql("SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots WHERE slot_name = 'faults'");
    let slot: u64 = slot.parse().ok()?;
    let (code, body) = w.get("/connectors/flt/offsets");
    let offset = &body["offsets"].as_array().filter(|_| code == 200)?.first()?["offset"];
    let resume = offset["lsn_commit"].as_u64().or_else(|| offset["lsn"].as_u64())?;
    Some((slot, resume))
}

/// Waits until the source's slot exists: with `snapshot.mode=no_data`, changes committed
/// before it are not captured (as in Debezium), so the writer starts after it.
fn wait_for_slot(pg: &Postgres, w: &Worker, slot: &str) {
    let sql = format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}' AND confirmed_flush_lsn IS NOT NULL");
    w.eventually(Duration::from_secs(60), "the source's replication slot", || pg.sql(&sql) == "1");
}

/// Asserts that the slot is not confirmed past the stored offset; `false` when either could
/// not be read (no offset stored yet, a REST call that failed).
fn slot_not_ahead(pg: &Postgres, w: &Worker) -> bool {
    let Some((slot, resume)) = slot_then_offset(pg, w) else { return false };
    assert!(slot <= resume, "the slot was confirmed at {slot}, past the stored offset's {resume}");
    true
}

#[test]
fn a_postgres_source_rides_out_a_60_s_black_hole_of_its_database() {
    let (pg, proxy, dir, w) = start_source_behind_proxy();
    let data = dir.path().join("data");
    let writer = start_writer(&pg);
    std::thread::sleep(Duration::from_secs(3));

    // Nothing in or out for 60 s; the writer goes on (it reaches Postgres directly).
    let hole = std::time::Instant::now();
    proxy.set(Fault::BlackHole);
    let mut traces = Vec::new();
    let mut checks = 0;
    while hole.elapsed() < Duration::from_secs(60) {
        let (_, status) = w.get("/connectors/flt/status");
        if let Some(trace) = status["tasks"][0]["trace"].as_str() {
            // (seconds into the hole, state, the trace's first line)
            traces.push((hole.elapsed().as_secs(), status["tasks"][0]["state"].to_string(), trace.lines().next().unwrap_or("").to_owned()));
        }
        if slot_not_ahead(&pg, &w) {
            checks += 1;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    proxy.set(Fault::Pass);
    let recovered = std::time::Instant::now();
    assert!(
        traces.iter().any(|(_, _, t)| t.contains("no answer from Postgres")),
        "the lost database was never visible in the task's trace during the black hole: {traces:?}\nworker output:\n{}",
        w.output()
    );
    check_traces_gone(&w, "flt");
    let recovery = recovered.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let transactions = writer.finish();
    let records = check_topic(&pg, &w, &data);
    assert!(slot_not_ahead(&pg, &w), "the slot and the stored offset could not be read");
    sluice_tests::report_figures(json!({
        "schedule": "Postgres black-holed for 60 s (nothing in or out, new connections unanswered)",
        "faults": "1 black hole of 60 s", "destination": "embedded log (topic)",
        "written": ROWS as u64 + 2 * transactions, "delivered": records.len(), "lost": 0, "duplicated": duplicates(&records),
        "recovery_s": tenths(recovery.as_secs_f64()), "slot_checks": checks,
        "trace_from_s": traces[0].0, "trace_samples": traces.len(), "trace_state": traces[0].1, "trace": traces[0].2,
    }));
}

#[test]
fn the_warehouse_sink_applies_each_change_once_when_its_commits_lose_their_reply() {
    const CUTS: u64 = 6;
    let pg = Postgres::start();
    pg.sql("CREATE DATABASE wh");
    pg.sql("CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL)");
    // No key in the target: a change applied twice would be a second row.
    pg.psql().sql("wh", "CREATE TABLE items (id bigint, v int)");
    let proxy = FaultProxy::start(([127, 0, 0, 1], pg.port).into());
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
    let (code, body) = w.post("/connectors", &json!({"name": "src", "config": pg.source_config("amb", &[("snapshot.mode", "no_data")])}));
    assert_eq!(code, 201, "{body}");
    let url = format!("jdbc:postgresql://127.0.0.1:{}/wh", proxy.port);
    let sink = pg.sink_config(
        "wh",
        "",
        &[
            ("connection.url", &url),
            ("insert.mode", "insert"),
            ("primary.key.mode", "none"),
            ("delete.enabled", "false"),
            ("batch.size", "100"),
        ],
    );
    let (code, body) = w.post("/connectors", &json!({"name": "wh", "config": sink}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    wait_for_slot(&pg, &w, "amb");
    w.wait_running("wh", 1);

    let writer = SqlWriter::start(&pg, Duration::from_millis(5), |i| format!("INSERT INTO items VALUES ({}, {});\n", i + 1, i % 7));
    let watch = w.watch_status("wh");
    for cut in 1..=CUTS {
        // The next COMMIT reaches the server (a simple query ends in the text's NUL); its
        // reply is dropped and the connection cut.
        proxy.cut_after(b"COMMIT\0", 1);
        w.eventually(Duration::from_secs(60), "a commit whose reply was lost", || proxy.pattern_cuts() >= cut);
        std::thread::sleep(Duration::from_millis(1500));
    }
    let inserted = writer.finish();
    let traces = check_traces(&w, "wh", &watch.stop());
    pg.sql("INSERT INTO items VALUES (-1, 0)");
    w.eventually(Duration::from_secs(120), "the end marker in the warehouse", || {
        pg.psql().sql("wh", "SELECT count(*) FROM items WHERE id = -1") != "0"
    });

    let source = pg.sql("SELECT count(*) || ' ' || sum(id) || ' ' || sum(v) FROM items");
    let target = pg.psql().sql("wh", "SELECT count(*) || ' ' || sum(id) || ' ' || sum(v) FROM items");
    let duplicates = pg.psql().sql("wh", "SELECT count(*) - count(DISTINCT id) FROM items");
    assert_eq!(duplicates, "0", "changes applied twice after an ambiguous commit");
    assert_eq!(target, source, "the warehouse (count, sum of ids, sum of values) differs from the source");
    let (code, status) = w.get("/connectors/wh/status");
    assert_eq!((code, &status["tasks"][0]["state"]), (200, &json!("RUNNING")), "{status}");
    let log = sluice_tests::strip_ansi(&w.output());
    // The sink writes in the background (pipelined): a lost reply fails that write, and its
    // records are written again after the offsets are read back from the target.
    let retried = log.matches("a background write to the target failed; writing its records again").count();
    assert!(retried >= CUTS as usize, "each lost commit reply was seen and retried ({retried} retries in the log)");
    sluice_tests::report_figures(with(
        json!({
            "schedule": "warehouse connection cut between COMMIT and its reply",
            "faults": format!("{CUTS} ambiguous commits"), "destination": "warehouse (JDBC sink, insert mode)",
            "written": inserted + 1, "lost": 0, "duplicated": 0, "sink_retries": retried,
        }),
        traces,
    ));
}

#[test]
fn the_s3_sink_loses_nothing_when_uploads_are_slow_and_reset_mid_part() {
    const PAD: usize = 2_000;
    let pg = Postgres::start();
    pg.sql("CREATE TABLE items (id bigint PRIMARY KEY, pad text NOT NULL)");
    let moto = Moto::start("faults");
    let proxy = FaultProxy::start(([127, 0, 0, 1], moto.port).into());
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(
        dir.path(),
        &[("offset.flush.interval.ms", "200"), ("key.converter.schemas.enable", "false"), ("value.converter.schemas.enable", "false")],
    );
    let (code, body) = w.post("/connectors", &json!({"name": "src", "config": pg.source_config("s3f", &[("snapshot.mode", "no_data")])}));
    assert_eq!(code, 201, "{body}");
    // Objects of ~6 MB: multipart uploads of 5 MB parts, cut while a part is on its way.
    let sink = json!({
        "connector.class": "io.confluent.connect.s3.S3SinkConnector", "topics": "srv.public.items", "s3.bucket.name": "faults",
        "s3.region": "us-east-1", "store.url": format!("http://127.0.0.1:{}", proxy.port), "aws.access.key.id": "t",
        "aws.secret.access.key": "t", "format.class": "io.confluent.connect.s3.format.json.JsonFormat", "flush.size": "3000",
        "s3.part.size": "5242880", "timezone": "UTC", "behavior.on.null.values": "ignore",
    });
    let (code, body) = w.post("/connectors", &json!({"name": "s3", "config": sink}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("src", 1);
    wait_for_slot(&pg, &w, "s3f");
    w.wait_running("s3", 1);

    let writer = SqlWriter::start(&pg, Duration::from_millis(10), |i| {
        format!("INSERT INTO items SELECT g, repeat('x', {PAD}) FROM generate_series({}, {}) g;\n", i * 10 + 1, i * 10 + 10)
    });
    // Uploads at 3 MB/s, every connection cut every 2 s; then 10 s of slow answers.
    let watch = w.watch_status("s3");
    proxy.set(Fault::Throttle(3_000_000));
    for _ in 0..15 {
        std::thread::sleep(Duration::from_secs(2));
        proxy.reset_all();
    }
    proxy.set(Fault::Latency(Duration::from_millis(300)));
    std::thread::sleep(Duration::from_secs(10));
    proxy.set(Fault::Pass);
    let seen = watch.stop();
    let steps = writer.finish() as i64;
    // Objects rotate by record count only (a replay cuts them where the first try did, so
    // none is written twice): rows up to a multiple of flush.size complete the last one.
    let written = steps * 10;
    let rows = (written + 2_999) / 3_000 * 3_000;
    pg.sql(&format!("INSERT INTO items SELECT g, repeat('x', {PAD}) FROM generate_series({}, {rows}) g", written + 1));
    assert_eq!(pg.sql("SELECT count(*) FROM items"), rows.to_string(), "the writer's rows");

    let read = format!(
        "ids=[]\nfor p in s3.get_paginator('list_objects_v2').paginate(Bucket=BUCKET):\n  for o in p.get('Contents',[]):\n    for l in s3.get_object(Bucket=BUCKET,Key=o['Key'])['Body'].read().decode().splitlines():\n      ids.append(json.loads(l)['after']['id'])\nseen=set(ids)\nprint(json.dumps({{'rows':len(ids),'missing':[i for i in range(1,{rows}+1) if i not in seen][:10],'missing_count':sum(1 for i in range(1,{rows}+1) if i not in seen),'extra':len(seen-set(range(1,{rows}+1)))}}))"
    );
    let mut report = Json::Null;
    w.eventually(Duration::from_secs(180), "every row in S3", || {
        report = serde_json::from_str(&moto.py(&read)).expect("the reader's JSON");
        report["missing_count"] == 0
    });
    assert_eq!(report["extra"], 0, "{report}");
    let duplicates = report["rows"].as_i64().unwrap() - rows;
    assert_eq!(duplicates, 0, "rows written twice into S3: {report}");
    let traces = check_traces(&w, "s3", &seen);
    let connections = proxy.accepted();
    assert!(connections >= 10, "the sink opened {connections} connections: the cuts did not reach its uploads");
    let log = sluice_tests::strip_ansi(&w.output());
    let retried = log.matches("sink put failed").count();
    sluice_tests::report_figures(with(
        json!({
            "schedule": "S3 uploads throttled to 3 MB/s and cut every 2 s (multipart, 5 MB parts), then answers 300 ms late",
            "faults": "15 cuts, 10 s of latency", "destination": "S3 (JSON objects)",
            "written": rows, "lost": 0, "duplicated": duplicates, "connections": connections, "sink_retries": retried,
        }),
        traces,
    ));
}

/// Sends `signal` (STOP or CONT) to the test broker's process.
fn signal_broker(dir: &std::path::Path, signal: &str) {
    let pid = std::fs::read_to_string(dir.join("broker.pid")).expect("the broker's pid file");
    let ok = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.trim()).status().expect("kill").success();
    assert!(ok, "kill -{signal} {pid}");
}

/// A distributed worker on the broker at `bootstrap` running a file source and a file sink
/// through topic `lines`: (dir, worker, input, output).
fn distributed_file_pipeline(bootstrap: &str, group: &str) -> (tempfile::TempDir, Worker, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("out.txt");
    std::fs::write(&input, "").unwrap();
    let props: Vec<(String, String)> = [
        ("bootstrap.servers", bootstrap),
        ("group.id", group),
        ("config.storage.topic", &format!("{group}-configs")),
        ("offset.storage.topic", &format!("{group}-offsets")),
        ("status.storage.topic", &format!("{group}-status")),
        ("offset.flush.interval.ms", "200"),
        ("session.timeout.ms", "10000"),
        ("heartbeat.interval.ms", "2000"),
        ("consumer.fetch.max.wait.ms", "100"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let w = Worker::launch(&dir.path().join("worker"), Launch::Distributed { props });
    w.start_file_pipeline(&input, &output, "lines", &[]);
    (dir, w, input, output)
}

/// Waits until every line of `input` written so far is in `output`; how long that took.
fn wait_caught_up(w: &Worker, input: &std::path::Path, output: &std::path::Path) -> Duration {
    let resumed = std::time::Instant::now();
    let before = read_lines(input).len();
    w.eventually(Duration::from_secs(180), "the lines written during the fault in the output file", || {
        read_lines(output).into_iter().collect::<std::collections::BTreeSet<_>>().len() >= before
    });
    resumed.elapsed()
}

/// Waits for all `total` lines in `output`, checks each was delivered, and returns them.
fn check_lines(w: &Worker, output: &std::path::Path, total: usize) -> Vec<String> {
    w.eventually(Duration::from_secs(180), "every line in the output file", || {
        read_lines(output).into_iter().collect::<std::collections::BTreeSet<_>>().len() >= total
    });
    let out = read_lines(output);
    assert_first_deliveries(&out, total, "the output file");
    out
}

#[test]
fn a_distributed_worker_loses_nothing_while_its_broker_stalls_past_the_session_timeout() {
    const TOTAL: usize = 8_000;
    let root = tempfile::tempdir().unwrap();
    let broker_dir = root.path().join("broker");
    let broker = KafkaBroker::start(&broker_dir);
    let (_dir, w, input, output) = distributed_file_pipeline(&broker.bootstrap, "stall");

    // 100 lines every 0.5 s, for 40 s.
    let writer = LineWriter::start(&input, TOTAL, Duration::from_millis(500));
    std::thread::sleep(Duration::from_secs(5));
    let watch = w.watch_health();
    // The broker answers nothing for 25 s (its process stopped: a long pause), two and a
    // half session timeouts.
    signal_broker(&broker_dir, "STOP");
    let at_stop = read_lines(&output).len();
    std::thread::sleep(Duration::from_secs(25));
    let during = read_lines(&output).len() - at_stop;
    signal_broker(&broker_dir, "CONT");
    let (recovered, out, health) = after_broker_fault(&w, watch, writer, &input, &output, TOTAL);
    sluice_tests::report_figures(with(
        json!({
            "schedule": "Kafka broker stopped (SIGSTOP) for 25 s, past session.timeout.ms=10000, distributed mode",
            "faults": "1 broker stall of 25 s", "destination": "Kafka topic → FileStreamSink",
            "written": TOTAL, "delivered": out.len(), "lost": 0, "duplicated": out.len() - TOTAL,
            "recovery_s": tenths(recovered.as_secs_f64()), "delivered_during_stall": during,
        }),
        health,
    ));
}

/// Once the broker is back: how long the output took to catch up, every line delivered, the
/// worker seen unhealthy meanwhile and healthy again, both tasks RUNNING without a trace.
fn after_broker_fault(
    w: &Worker,
    watch: sluice_tests::StatusWatch,
    writer: LineWriter,
    input: &std::path::Path,
    output: &std::path::Path,
    total: usize,
) -> (Duration, Vec<String>, Json) {
    let recovered = wait_caught_up(w, input, output);
    let seen = watch.stop();
    writer.join();
    let out = check_lines(w, output, total);
    let health = check_health(w, &seen);
    check_traces_gone(w, "src");
    check_traces_gone(w, "sink");
    (recovered, out, health)
}

/// Waits for `connector`'s tasks to be RUNNING without a trace.
fn check_traces_gone(w: &Worker, connector: &str) {
    w.eventually(Duration::from_secs(120), "the tasks RUNNING without a trace after the faults", || {
        let (code, status) = w.get(&format!("/connectors/{connector}/status"));
        let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
        code == 200
            && status["connector"]["state"] == "RUNNING"
            && !tasks.is_empty()
            && tasks.iter().all(|t| t["state"] == "RUNNING" && t["trace"].is_null())
    });
}

#[test]
fn a_distributed_worker_loses_nothing_while_its_broker_connections_are_cut_and_black_holed() {
    const TOTAL: usize = 10_000;
    let root = tempfile::tempdir().unwrap();
    let broker = KafkaBroker::start(&root.path().join("broker"));
    let proxy = FaultProxy::for_kafka(broker.bootstrap.parse().expect("the broker's address"));
    let (_dir, w, input, output) = distributed_file_pipeline(&format!("127.0.0.1:{}", proxy.port), "cuts");
    let accepted_before = proxy.accepted();
    assert!(accepted_before >= 2, "the worker did not reach the broker through the proxy ({accepted_before} connections)");

    // 100 lines every 0.5 s, for 50 s.
    let writer = LineWriter::start(&input, TOTAL, Duration::from_millis(500));
    std::thread::sleep(Duration::from_secs(3));
    let log_before = w.output().len();
    // Every connection to the broker cut every 3 s, ten times. Nothing fails for the tasks
    // (the clients reconnect and go on), and the worker keeps its place in the group.
    for _ in 0..10 {
        std::thread::sleep(Duration::from_secs(3));
        proxy.reset_all();
    }
    let after_cuts = proxy.accepted();
    let cuts_log = sluice_tests::strip_ansi(&w.output()[log_before..]);
    let given_up = cuts_log.matches("giving up this worker's assignment").count();
    assert_eq!(given_up, 0, "cut connections made the worker give up its work:\n{cuts_log}");
    let kept = cuts_log.matches("keeping this worker's assignment").count();
    assert!(kept >= 5, "the cuts did not reach the group membership's connections ({kept} kept)");
    let watch = w.watch_health();
    // Then nothing in or out for 25 s, past session.timeout.ms (10 s).
    proxy.set(Fault::BlackHole);
    std::thread::sleep(Duration::from_secs(5));
    let held = read_lines(&output).len();
    std::thread::sleep(Duration::from_secs(20));
    // Every connection goes through the proxy (the broker's address in its answers is the
    // proxy's): nothing gets from the source file to the output file through the hole.
    let during = read_lines(&output).len() - held;
    assert_eq!(during, 0, "lines were delivered while the broker was black-holed: a connection went around the proxy");
    proxy.set(Fault::Pass);
    let (recovered, out, health) = after_broker_fault(&w, watch, writer, &input, &output, TOTAL);
    let reconnects = after_cuts - accepted_before;
    assert!(reconnects >= 10, "the worker reconnected after each cut ({reconnects} new connections)");
    sluice_tests::report_figures(with(
        json!({
            "schedule": "Kafka broker connections cut every 3 s, then black-holed for 25 s (past session.timeout.ms=10000), distributed mode",
            "faults": "10 cuts, 1 black hole of 25 s", "destination": "Kafka topic → FileStreamSink",
            "written": TOTAL, "delivered": out.len(), "lost": 0, "duplicated": out.len() - TOTAL,
            "recovery_s": tenths(recovered.as_secs_f64()), "reconnects": reconnects,
            "membership_kept_over_cuts": kept, "membership_given_up_over_cuts": given_up,
        }),
        health,
    ));
}
