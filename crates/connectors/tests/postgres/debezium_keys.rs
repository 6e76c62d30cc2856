//! Debezium keys that change what the connector does against the real server:
//! `snapshot.locking.mode` and `topic.heartbeat.prefix`.

use super::*;

/// Whether some session holds an ACCESS SHARE lock on `table` (other than the asking one).
async fn share_locked(db: &tokio_postgres::Client, table: &str) -> bool {
    let sql = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
               WHERE c.relname = $1 AND l.mode = 'AccessShareLock' AND l.granted AND l.pid <> pg_backend_pid()";
    db.query_one(sql, &[&table]).await.unwrap().get::<_, i64>(0) > 0
}

/// With `shared`, the snapshot holds ACCESS SHARE locks on every table it captures from its
/// start to its end, so a table's structure cannot change before it is read (DDL waits, and
/// gives up after its lock_timeout); with `none` (the default) a table is locked only while
/// it is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_locking_holds_every_captured_table_until_the_snapshot_ends() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a SELECT generate_series(1, 200);
         CREATE TABLE b (id int PRIMARY KEY); INSERT INTO b SELECT generate_series(1, 5);",
    )
    .await
    .unwrap();
    for (mode, slot) in [("shared", "s_lock_shared"), ("none", "s_lock_none")] {
        // Small batches: the snapshot of a is still under way after the first poll, b unread.
        let props = pg.props(&[("slot.name", slot), ("snapshot.locking.mode", mode), ("max.batch.size", "10"), ("snapshot.fetch.size", "10")]);
        let mut task = start_task(&props, None).await.unwrap();
        let mut all = Vec::new();
        drain(&mut task, &mut all, Duration::from_secs(30), |a| !a.is_empty()).await;
        assert!(all.iter().all(|r| r.topic == "srv.public.a"), "b is not read yet");
        assert_eq!(share_locked(&db, "b").await, mode == "shared", "snapshot.locking.mode={mode}: table b locked before it is read");
        if mode == "shared" {
            let err = db.batch_execute("SET lock_timeout = 200; ALTER TABLE b ADD COLUMN c int").await.unwrap_err();
            let message = err.as_db_error().map(|d| d.message().to_owned()).unwrap_or_else(|| err.to_string());
            assert!(message.contains("lock timeout"), "{message}");
            db.batch_execute("RESET lock_timeout").await.unwrap();
        }
        drain(&mut task, &mut all, Duration::from_secs(30), |a| a.iter().filter(|r| r.topic == "srv.public.b").count() == 5).await;
        // The snapshot is over once its last record was handed out: the locks go with it.
        let until = Instant::now() + Duration::from_secs(10);
        while share_locked(&db, "b").await {
            assert!(Instant::now() < until, "snapshot.locking.mode={mode}: b still locked after the snapshot");
            all.extend(task.poll_data().await.expect("poll"));
        }
        task.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_go_to_the_topic_heartbeat_prefix() {
    let pg = Pg::start();
    let props = pg.props(&[
        ("slot.name", "s_hb_prefix"),
        ("snapshot.mode", "no_data"),
        ("heartbeat.interval.ms", "100"),
        ("topic.heartbeat.prefix", "beats"),
    ]);
    let mut task = start_task(&props, None).await.unwrap();
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| !a.is_empty()).await;
    task.stop().await.unwrap();
    assert_eq!(all[0].topic, "beats.srv");
}
