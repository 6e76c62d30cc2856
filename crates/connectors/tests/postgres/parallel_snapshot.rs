//! `snapshot.max.threads`: several tables read at once, each on a session of its own that
//! joined the same snapshot; per-table key order, one `first` and one `last`, and resuming
//! every table where it stood after a crash.

use super::*;
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

fn marker(r: &SourceRecord) -> String {
    envelope(r).get("source").and_then(Value::as_struct).unwrap().get("snapshot").and_then(Value::as_str).unwrap().to_owned()
}

/// A snapshot marker of a record neither first nor last of the whole snapshot.
fn in_between(m: &str) -> bool {
    matches!(m, "true" | "first_in_data_collection" | "last_in_data_collection")
}

fn table_of(r: &SourceRecord) -> &str {
    r.topic.strip_prefix("srv.public.").unwrap()
}

fn int(r: &SourceRecord, name: &str) -> i64 {
    field(r, "after", name).as_i64().unwrap()
}

fn reads(records: &[SourceRecord]) -> Vec<&SourceRecord> {
    data(records).into_iter().filter(|r| op(r) == "r").collect()
}

/// The ids each table's `r` records carry, in output order.
fn ids_by_table<'a>(records: impl IntoIterator<Item = &'a SourceRecord>) -> BTreeMap<String, Vec<i64>> {
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in records {
        out.entry(table_of(r).to_owned()).or_default().push(int(r, "id"));
    }
    out
}

fn open_tables(offset: &SourceOffset) -> Vec<String> {
    offset["snapshot_open_tables"].as_array().unwrap().iter().map(|o| o["table"][1].as_str().unwrap().to_owned()).collect()
}

fn is_last(r: &SourceRecord) -> bool {
    r.source_offset.get("last_snapshot_record") == Some(&json!(true))
}

/// Client sessions (other than this one) inside a transaction, by their last statement:
/// the snapshot's sessions.
async fn sessions_in_a_transaction(db: &tokio_postgres::Client) -> Vec<String> {
    db.query(
        "SELECT state || ': ' || query FROM pg_stat_activity WHERE backend_type = 'client backend' AND xact_start IS NOT NULL AND pid <> pg_backend_pid()",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// Writes ids from `from` on, one transaction per id writing it to every table of
/// `tables`, while the caller goes on, until [`Writer::finish`].
struct Writer {
    handle: tokio::task::JoinHandle<i64>,
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Writer {
    async fn start(pg: &Pg, tables: &'static [&'static str], from: i64) -> Self {
        let w = pg.client("postgres").await;
        let (done, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (seen, stopped) = (done.clone(), stop.clone());
        let handle = tokio::spawn(async move {
            let mut id = from;
            while !stopped.load(SeqCst) {
                let inserts: String = tables.iter().map(|t| format!("INSERT INTO {t} (id) VALUES ({id});")).collect();
                w.batch_execute(&format!("BEGIN;{inserts}COMMIT;")).await.unwrap();
                seen.fetch_add(1, SeqCst);
                id += 1;
            }
            id - from
        });
        Self { handle, done, stop }
    }

    /// Waits until `more` transactions more than now committed.
    async fn wait_for(&self, more: usize) {
        let target = self.done.load(SeqCst) + more;
        while self.done.load(SeqCst) < target {
            assert!(!self.handle.is_finished(), "the writer failed");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Stops; the number of ids written.
    async fn finish(self) -> i64 {
        self.stop.store(true, SeqCst);
        self.handle.await.unwrap()
    }
}

/// The ids at or after `from` each table's records carry: one snapshot sees a prefix of
/// the writer's transactions, the same in every table.
fn written(ids: &BTreeMap<String, Vec<i64>>, t: &str, from: i64) -> Vec<i64> {
    ids.get(t).map(|v| v.iter().copied().filter(|i| *i >= from).collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tables_are_read_at_once_on_the_exported_snapshot() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE TABLE a (id int PRIMARY KEY, v text NOT NULL DEFAULT 'new'); INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 1500) g;
         CREATE TABLE b (k text DEFAULT 'w', id int, PRIMARY KEY (k, id)); INSERT INTO b SELECT chr(97 + g % 3), g FROM generate_series(1, 400) g;
         CREATE TABLE c (id bigint PRIMARY KEY); INSERT INTO c SELECT generate_series(1, 1200);
         CREATE TABLE d_nopk (id int); INSERT INTO d_nopk SELECT generate_series(1, 60);
         CREATE TABLE e_empty (id int PRIMARY KEY);",
    )
    .await
    .unwrap();
    let props =
        pg.props(&[("slot.name", "s_par1"), ("snapshot.max.threads", "3"), ("snapshot.fetch.size", "50"), ("max.batch.size", "64")]);
    // One transaction after another writes the same new id to a, b and c, before, while
    // and after the snapshot's sessions open their transactions.
    const NEW: i64 = 100_000;
    let writes = Writer::start(&pg, &["a", "b", "c"], NEW).await;
    writes.wait_for(20).await;
    let mut task = start_task(&props, None).await.unwrap();
    writes.wait_for(20).await;
    let total = writes.finish().await;
    let sessions = sessions_in_a_transaction(&db).await;
    assert_eq!(sessions.len(), 3, "three sessions joined the snapshot: {sessions:?}");

    let mut all = Vec::new();
    let until = Instant::now() + Duration::from_secs(60);
    let new_rows = |a: &[SourceRecord]| data(a).into_iter().filter(|r| int(r, "id") >= NEW).count();
    while new_rows(&all) < 3 * total as usize {
        assert!(Instant::now() < until, "timed out after {} records", all.len());
        all.extend(task.poll_data().await.unwrap());
    }
    // (Another session's statement may be running for a moment; a snapshot transaction
    // left open would stay.)
    let until = Instant::now() + Duration::from_secs(5);
    let mut sessions = sessions_in_a_transaction(&db).await;
    while !sessions.is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        sessions = sessions_in_a_transaction(&db).await;
    }
    assert!(sessions.is_empty(), "every snapshot transaction ended: {sessions:?}");
    task.stop().await.unwrap();

    let reads = reads(&all);
    let ids = ids_by_table(reads.iter().copied());
    // All three tables were read at one snapshot: the same prefix of the writer's
    // transactions; the rest arrives through the stream, each once.
    let seen = written(&ids, "a", NEW);
    assert!(seen.len() >= 20, "the writes before the start are in the snapshot: {seen:?}");
    assert!(seen.len() as i64 <= total - 20, "the writes after the start are not in the snapshot");
    assert_eq!(seen, (NEW..NEW + seen.len() as i64).collect::<Vec<_>>());
    assert_eq!((written(&ids, "b", NEW), written(&ids, "c", NEW)), (seen.clone(), seen.clone()), "one snapshot for every table");
    let base = |n: i64| -> Vec<i64> { (1..=n).chain(NEW..NEW + seen.len() as i64).collect() };
    assert_eq!(ids["a"], base(1500), "every row of a once, in key order");
    assert_eq!(ids["c"], base(1200));
    assert_eq!(ids["d_nopk"].len(), 60);
    assert!(!ids.contains_key("e_empty"));
    let b_keys: Vec<(String, i64)> =
        reads.iter().filter(|r| table_of(r) == "b").map(|r| (field(r, "after", "k").as_str().unwrap().to_owned(), int(r, "id"))).collect();
    let mut want = b_keys.clone();
    want.sort();
    assert_eq!((b_keys.len(), &b_keys), (400 + seen.len(), &want), "b in (k, id) order");
    assert_eq!(reads.len(), 1500 + 400 + 1200 + 60 + 3 * seen.len());

    // One first, one last, over the whole snapshot; the snapshot comes before the stream.
    let markers: Vec<String> = reads.iter().map(|r| marker(r)).collect();
    assert_eq!(markers[0], "first");
    assert_eq!(markers[markers.len() - 1], "last");
    assert!(markers[1..markers.len() - 1].iter().all(|m| in_between(m)), "{markers:?}");
    // Every other table's first record is marked as such (Debezium 3's markers).
    let mut seen_tables = std::collections::BTreeSet::new();
    for r in &reads {
        if seen_tables.insert(table_of(r).to_owned()) && seen_tables.len() > 1 {
            assert_eq!(marker(r), "first_in_data_collection", "the first record of {}", table_of(r));
        }
    }
    assert_eq!(reads.iter().filter(|r| is_last(r)).count(), 1);
    assert!(is_last(reads[reads.len() - 1]));
    let streamed: Vec<(String, i64)> =
        data(&all).into_iter().filter(|r| op(r) != "r").map(|r| (table_of(r).to_owned(), int(r, "id"))).collect();
    let want: Vec<(String, i64)> =
        (NEW + seen.len() as i64..NEW + total).flat_map(|id| ["a", "b", "c"].map(|t| (t.to_owned(), id))).collect();
    assert_eq!(streamed, want);
    let first_streamed = data(&all).iter().position(|r| op(r) != "r").unwrap();
    assert_eq!(first_streamed, reads.len());

    // Read at once: offsets showed three tables open (a session reads one table at a time)
    // and the tables interleave in the output.
    let switches = reads.windows(2).filter(|w| w[0].topic != w[1].topic).count();
    assert!(switches > 3, "the tables' records interleave ({switches} switches; one table after the other: 3)");
    assert!(reads.iter().any(|r| open_tables(&r.source_offset).len() == 3));
    // Tables start in order: the newest started never goes back.
    let through: Vec<&str> = reads.iter().map(|r| r.source_offset["snapshot_table"][1].as_str().unwrap()).collect();
    assert!(through.windows(2).all(|w| w[0] <= w[1]), "{through:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_parallel_snapshot_resumes_every_table_where_it_stood() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a SELECT generate_series(1, 1000);
         CREATE TABLE b (id int PRIMARY KEY); INSERT INTO b SELECT generate_series(1, 60);
         CREATE TABLE c (id int PRIMARY KEY); INSERT INTO c SELECT generate_series(1, 1000);
         CREATE TABLE n_nopk (id int); INSERT INTO n_nopk SELECT generate_series(1, 40);
         CREATE TABLE z (id int PRIMARY KEY); INSERT INTO z SELECT generate_series(1, 500);",
    )
    .await
    .unwrap();
    let all_ids: BTreeMap<String, Vec<i64>> = [("a", 1000), ("b", 60), ("c", 1000), ("n_nopk", 40), ("z", 500)]
        .iter()
        .map(|(t, n)| (t.to_string(), (1..=*n).collect()))
        .collect();
    let props = |threads: &str| {
        pg.props(&[("slot.name", "s_par2"), ("snapshot.max.threads", threads), ("snapshot.fetch.size", "20"), ("max.batch.size", "32")])
    };

    // Run 1: dies once a table is finished while others are open; the runtime had made
    // the records up to `cut` durable.
    let mut task = start_task(&props("3"), None).await.unwrap();
    let mut first = Vec::new();
    let is_cut = |r: &SourceRecord| {
        let through = r.source_offset["snapshot_table"][1].as_str().unwrap().to_owned();
        let open = open_tables(&r.source_offset);
        let finished = all_ids.keys().filter(|t| **t <= through && !open.contains(t)).count();
        open.len() >= 2 && finished >= 1
    };
    drain(&mut task, &mut first, Duration::from_secs(30), |a| a.iter().filter(|r| is_cut(r)).nth(20).is_some()).await;
    let cut = first.iter().filter(|r| is_cut(r)).nth(20).map(|r| first.iter().position(|x| std::ptr::eq(x, r)).unwrap()).unwrap();
    let durable = &first[..=cut];
    let committed = durable[cut].source_offset.clone();
    drop(task); // no stop: as if the worker died
    let through = committed["snapshot_table"][1].as_str().unwrap().to_owned();
    let open = open_tables(&committed);
    let status = |t: &str| {
        if open.iter().any(|o| o == t) {
            "open"
        } else if *t <= *through {
            "finished"
        } else {
            "not started"
        }
    };
    let before = ids_by_table(durable.iter());
    for (t, ids) in &before {
        if status(t) == "finished" {
            assert_eq!(ids, &all_ids[t], "a finished table's records are all durable");
        }
    }
    // Each open table's key in the offset is its last durable record's.
    for o in committed["snapshot_open_tables"].as_array().unwrap() {
        let t = o["table"][1].as_str().unwrap();
        let last = before.get(t).and_then(|ids| ids.last());
        match t {
            "n_nopk" => assert_eq!(o["key"], Json::Null),
            _ => assert_eq!(o["key"], last.map_or(Json::Null, |k| json!([k.to_string()])), "{t}"),
        }
    }
    assert!(durable.iter().skip(1).all(|r| in_between(&marker(r))) && marker(&durable[0]) == "first");

    // Run 2 (3 sessions) and run 3 (1 session) from the same durable offset. While each
    // starts, a writer adds ids to a, c and z, one transaction per id: the run reads one
    // prefix of those transactions in every table it reads (one snapshot), and the
    // earlier run's writes in full.
    let mut earlier: Vec<i64> = Vec::new();
    for (run, threads) in [(1, "3"), (2, "1")] {
        let from = 100_000 * (run + 1);
        let writes = Writer::start(&pg, &["a", "c", "z"], from).await;
        writes.wait_for(10).await;
        // A dropped run's sessions may hold the slot for a moment.
        let mut task = start_task_retrying(&props(threads), Some(committed.clone())).await;
        writes.wait_for(10).await;
        let total = writes.finish().await;
        let mut second = Vec::new();
        drain(&mut task, &mut second, Duration::from_secs(60), |a| a.iter().any(is_last)).await;
        task.stop().await.unwrap();
        let reads = reads(&second);
        let after = ids_by_table(reads.iter().copied());
        let mut prefixes = Vec::new();
        for (t, ids) in &all_ids {
            let mut got = after.get(t).cloned().unwrap_or_default();
            got.retain(|i| *i < 100_000);
            let had = before.get(t).cloned().unwrap_or_default();
            match (status(t), t.as_str()) {
                ("finished", _) => assert!(!after.contains_key(t), "threads={threads}: finished table {t} read again"),
                (_, "n_nopk") => assert_eq!(got.len(), 40, "threads={threads}: an open or unstarted table without key is read whole"),
                _ => {
                    let mut joined = had.clone();
                    joined.extend(&got);
                    assert_eq!(
                        &joined,
                        ids,
                        "threads={threads}: {t} ({}) continues after its durable key, nothing lost or repeated",
                        status(t)
                    );
                    if t != "b" {
                        let old = after[t].iter().copied().filter(|i| (100_000..from).contains(i)).collect::<Vec<_>>();
                        assert_eq!(old, earlier, "threads={threads}: {t} holds the earlier run's writes");
                        prefixes.push((t.clone(), written(&after, t, from)));
                    }
                }
            }
        }
        assert!(prefixes.len() >= 2, "two tables or more read in run {run}: {prefixes:?}");
        let seen = &prefixes[0].1;
        assert!(seen.len() >= 10 && *seen == (from..from + seen.len() as i64).collect::<Vec<_>>(), "{seen:?}");
        assert!(
            prefixes.iter().all(|(_, p)| p == seen),
            "threads={threads}: one snapshot for every table: {:?}",
            prefixes.iter().map(|(t, p)| (t, p.len())).collect::<Vec<_>>()
        );
        assert!(seen.len() < total as usize, "threads={threads}: the writes after the start are not in the snapshot");
        earlier.extend(from..from + total);
        let markers: Vec<String> = reads.iter().map(|r| marker(r)).collect();
        assert!(!markers.contains(&"first".to_owned()), "threads={threads}: a resumed snapshot has no second 'first'");
        assert_eq!(markers.iter().filter(|m| *m == "last").count(), 1);
        assert_eq!(markers.last().map(String::as_str), Some("last"));
    }
}
