//! A partitioned table through the real binary and a real PostgreSQL with
//! `publish.via.partition.root=true`: the publication publishes changes under the root's
//! identity, so the snapshot and every change of every partition (a row moving between
//! partitions included) reach the root table's topic, and no partition has a topic.

use std::time::Duration;

use sluice_tests::{eventually, json, Json, Postgres, Worker};

const ROOT_TOPIC: &str = "srv.public.events";

fn records(w: &Worker, topic: &str) -> Vec<Json> {
    sluice_tests::consume_topic(&w.dir.join("data"), topic).into_iter().filter(|r| !r["value"].is_null()).collect()
}

/// (op, id, region) of each change on the root's topic.
fn changes(w: &Worker) -> Vec<(String, i64, String)> {
    records(w, ROOT_TOPIC)
        .iter()
        .map(|r| {
            let v = &r["value"];
            let op = v["op"].as_str().unwrap().to_owned();
            let row = if op == "d" { &v["before"] } else { &v["after"] };
            (op, row["id"].as_i64().unwrap(), row["region"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn with_publish_via_partition_root_every_partitions_changes_reach_the_roots_topic() {
    let pg = Postgres::start();
    pg.sql(
        "CREATE TABLE events (id int NOT NULL, region text NOT NULL, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
         CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
         CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us');
         INSERT INTO events VALUES (1, 'eu', 0), (2, 'us', 0)",
    );
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(
        dir.path(),
        &[("offset.flush.interval.ms", "200"), ("key.converter.schemas.enable", "false"), ("value.converter.schemas.enable", "false")],
    );
    let config = pg.source_config("parts_slot", &[("table.include.list", "public.events"), ("publish.via.partition.root", "true")]);
    let (code, body) = w.post("/connectors", &json!({"name": "pg", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("pg", 1);
    eventually(Duration::from_secs(60), "the snapshot of both partitions", || changes(&w).iter().filter(|(op, ..)| op == "r").count() == 2);
    assert_eq!(
        pg.sql("SELECT pubviaroot FROM pg_publication WHERE pubname = 'dbz_publication'"),
        "t",
        "the publication publishes through the root"
    );

    pg.sql(
        "INSERT INTO events VALUES (3, 'eu', 0), (4, 'us', 0);
         UPDATE events SET v = 1 WHERE id = 3;
         UPDATE events SET region = 'us' WHERE id = 1;
         DELETE FROM events WHERE id = 2",
    );
    let want: Vec<(String, i64, String)> = [("c", 3, "eu"), ("c", 4, "us"), ("u", 3, "eu"), ("d", 1, "eu"), ("c", 1, "us"), ("d", 2, "us")]
        .iter()
        .map(|(op, id, region)| ((*op).to_owned(), *id, (*region).to_owned()))
        .collect();
    eventually(Duration::from_secs(30), "the streamed changes on the root's topic", || {
        changes(&w).into_iter().filter(|(op, ..)| op != "r").collect::<Vec<_>>() == want
    });
    let all = records(&w, ROOT_TOPIC);
    assert!(all.iter().all(|r| r["value"]["source"]["table"] == "events"), "source.table is the root's name");
    for leaf in ["srv.public.events_eu", "srv.public.events_us"] {
        assert!(records(&w, leaf).is_empty(), "nothing on the partition's topic {leaf}");
    }

    // Without it the partitions' changes arrive under their own names, which this include
    // list leaves out: said at start, not passed over in silence.
    let mut config = pg.source_config("parts_slot2", &[("table.include.list", "public.events")]);
    config["publication.name"] = json!("parts_pub2");
    config["topic.prefix"] = json!("plain");
    let (code, body) = w.post("/connectors", &json!({"name": "plain", "config": config}));
    assert_eq!(code, 201, "{body}");
    w.wait_running("plain", 1);
    eventually(Duration::from_secs(30), "the warning about the partitions left out", || {
        let out = sluice_tests::strip_ansi(&w.output());
        out.lines().any(|l| l.contains("partitions whose changes are not captured") && l.contains("public.events_eu (of public.events)"))
    });
}
