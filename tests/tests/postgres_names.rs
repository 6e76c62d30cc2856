//! `schema.name.adjustment.mode` and `field.name.adjustment.mode` through the real binary and a
//! real PostgreSQL: a table and a column whose names Avro does not allow get the names
//! Debezium's Avro adjusters give them (the rules are checked against Debezium 3.6.3 in
//! `crates/connectors/src/postgres/names.rs`); the topic keeps the table's own name.

use std::time::Duration;

use sluice_tests::{eventually, json, Json, Postgres, Worker};

#[test]
fn avro_name_adjustment_renames_schemas_and_fields_as_debezium_does() {
    let pg = Postgres::start();
    pg.sql(r#"CREATE TABLE "my-table" (id int PRIMARY KEY, "1st col" text); INSERT INTO "my-table" VALUES (1, 'a')"#);
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
    for (name, mode, prefix) in [("avro", "avro", "a"), ("unicode", "avro_unicode", "u"), ("none", "none", "n")] {
        let mut config = pg.source_config(&format!("names_{name}"), &[("table.include.list", "public.my-table")]);
        config["topic.prefix"] = json!(prefix);
        config["publication.name"] = json!(format!("names_{name}"));
        config["schema.name.adjustment.mode"] = json!(mode);
        config["field.name.adjustment.mode"] = json!(mode);
        let (code, body) = w.post("/connectors", &json!({"name": name, "config": config}));
        assert_eq!(code, 201, "{body}");
    }
    let record = |topic: &str| -> Option<Json> { sluice_tests::consume_topic(&w.dir.join("data"), topic).into_iter().next() };
    let mut seen = Vec::new();
    for (prefix, envelope, key, field) in [
        ("a", "a.public.my_table.Envelope", "a.public.my_table.Key", "_1st_col"),
        ("u", "u.public.my_u002dtable.Envelope", "u.public.my_u002dtable.Key", "_u0031st_u0020col"),
        ("n", "n.public.my-table.Envelope", "n.public.my-table.Key", "1st col"),
    ] {
        let topic = format!("{prefix}.public.my-table");
        eventually(Duration::from_secs(60), "the snapshot record", || record(&topic).is_some());
        let r = record(&topic).unwrap();
        assert_eq!(r["value"]["schema"]["name"], envelope, "{r}");
        assert_eq!(r["key"]["schema"]["name"], key, "{r}");
        assert_eq!(r["value"]["payload"]["after"][field], "a", "{r}");
        seen.push(r["value"]["payload"]["after"].clone());
    }
    assert_eq!(seen[0], json!({"id": 1, "_1st_col": "a"}));
}

/// `topic.naming.strategy` and `topic.delimiter` as Debezium 3.6.3's Postgres connector applies
/// them (observed with the real connector, `topic.prefix=srv`, `topic.delimiter=_`): the
/// default strategy names `srv_public_items`, `DefaultTopicNamingStrategy` leaves the schema
/// out (`srv_items`), the transaction and heartbeat topics take the delimiter, and the
/// logical-message topic keeps `srv.message`.
#[test]
fn topic_naming_strategies_and_the_delimiter_name_topics_as_debezium_does() {
    let pg = Postgres::start();
    pg.sql("CREATE TABLE items (id int PRIMARY KEY, v int); INSERT INTO items VALUES (1, 1)");
    let dir = tempfile::tempdir().unwrap();
    let w = Worker::start(dir.path(), &[("offset.flush.interval.ms", "200")]);
    for (name, strategy, prefix) in
        [("schema", "io.debezium.schema.SchemaTopicNamingStrategy", "s"), ("default", "io.debezium.schema.DefaultTopicNamingStrategy", "d")]
    {
        let mut config = pg.source_config(&format!("naming_{name}"), &[("table.include.list", "public.items")]);
        for (k, v) in [
            ("topic.prefix", prefix.to_owned()),
            ("publication.name", format!("naming_{name}")),
            ("topic.naming.strategy", strategy.to_owned()),
            ("topic.delimiter", "_".to_owned()),
            ("provide.transaction.metadata", "true".to_owned()),
            ("heartbeat.interval.ms", "500".to_owned()),
        ] {
            config[k] = json!(v);
        }
        let (code, body) = w.post("/connectors", &json!({"name": name, "config": config}));
        assert_eq!(code, 201, "{body}");
        w.wait_running(name, 1);
    }
    std::thread::sleep(Duration::from_secs(1));
    pg.sql("SELECT pg_logical_emit_message(true, 'p', 'x'); INSERT INTO items VALUES (2, 2)");
    let topics = || -> Vec<String> {
        let data = w.dir.join("data");
        let (code, out, err) = Worker::cli(&["topics", "list", "--data-dir", data.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        out.lines().map(|l| l.split_whitespace().next().unwrap_or_default().to_owned()).collect()
    };
    let want = [
        "s_public_items",
        "s_transaction",
        "__debezium-heartbeat_s",
        "s.message",
        "d_items",
        "d_transaction",
        "__debezium-heartbeat_d",
        "d.message",
    ];
    eventually(Duration::from_secs(30), "every topic named as Debezium names it", || {
        want.iter().all(|t| topics().iter().any(|have| have == t))
    });
    let all = topics();
    assert!(!all.iter().any(|t| t.contains("public.items") || t == "d_public_items"), "no topic named otherwise: {all:?}");
}
