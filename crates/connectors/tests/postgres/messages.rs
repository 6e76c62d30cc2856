//! Logical decoding messages (`pg_logical_emit_message`) against the real server: the records
//! Debezium 3.6 writes to `<topic.prefix>.message` (recorded in
//! `tests/golden/postgres/default/`), the prefix filter, transaction metadata, and restarts
//! from each record's offset.

use super::*;

fn source_field<'a>(r: &'a SourceRecord, name: &str) -> &'a Value {
    envelope(r).get("source").and_then(Value::as_struct).and_then(|s| s.get(name)).unwrap_or(&Value::Null)
}

/// `topic:what` per record: a row's id, or a message's prefix and content.
fn shape(records: &[SourceRecord]) -> Vec<String> {
    records
        .iter()
        .filter(|r| !r.value.is_null())
        .map(|r| match r.topic.as_str() {
            "srv.message" => {
                let m = envelope(r).get("message").and_then(Value::as_struct).unwrap();
                let content = match m.get("content") {
                    Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                    other => format!("{other:?}"),
                };
                format!("message:{}={content}", m.get("prefix").and_then(Value::as_str).unwrap())
            }
            topic => format!("{topic}:{}", field(r, "after", "id").as_i64().unwrap()),
        })
        .collect()
}

const WORKLOAD: &str = "BEGIN; INSERT INTO m VALUES (1); SELECT pg_logical_emit_message(true, 'pfx', 'hello'); COMMIT;
    SELECT pg_logical_emit_message(false, 'pfx', 'hello non-transactional');
    SELECT pg_logical_emit_message(false, 'skip.me', 'filtered');
    BEGIN; SELECT pg_logical_emit_message(true, 'skip.too', 'filtered'); INSERT INTO m VALUES (2); COMMIT;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logical_decoding_messages_are_debeziums_records_and_resume_after_each() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE m (id int PRIMARY KEY)").await.unwrap();
    // One record per batch, so that every record carries its position.
    let props = pg.props(&[
        ("slot.name", "s_msg"),
        ("snapshot.mode", "no_data"),
        ("max.batch.size", "1"),
        ("message.prefix.exclude.list", "skip\\..*"),
    ]);
    let mut task = start_task(&props, None).await.unwrap();
    db.batch_execute(WORKLOAD).await.unwrap();
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| data(a).len() >= 4).await;
    task.stop().await.unwrap();
    let expected = ["srv.public.m:1", "message:pfx=hello", "message:pfx=hello non-transactional", "srv.public.m:2"];
    assert_eq!(shape(&all), expected);

    // As Debezium 3.6.3 writes them (tests/golden/postgres/default/noschemas/golden.message.jsonl).
    let (insert, tx_msg, msg, insert2) = (&all[0], &all[1], &all[2], &all[3]);
    for r in [tx_msg, msg] {
        assert_eq!(r.topic, "srv.message");
        let key = r.key.as_struct().unwrap();
        assert_eq!(key.get("prefix"), Some(&Value::String("pfx".into())));
        assert_eq!(r.key_schema.as_ref().unwrap().name.as_deref(), Some("io.debezium.connector.postgresql.MessageKey"));
        let schema = r.value_schema.as_ref().unwrap();
        assert_eq!(schema.name.as_deref(), Some("io.debezium.connector.postgresql.MessageValue"));
        let fields: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(fields, ["op", "ts_ms", "source", "transaction", "message"]);
        assert_eq!(envelope(r).get("op"), Some(&Value::String("m".into())));
        assert_eq!(source_field(r, "schema"), &Value::String(String::new()));
        assert_eq!(source_field(r, "table"), &Value::String(String::new()));
        assert_eq!(envelope(r).get("transaction"), Some(&Value::Null));
    }
    // A transactional message belongs to its transaction: its txId, its commit time, and the
    // sequence of a change in it.
    assert_eq!(source_field(tx_msg, "txId"), source_field(insert, "txId"));
    assert_eq!(source_field(tx_msg, "ts_ms"), source_field(insert, "ts_ms"));
    let tx_lsn = source_field(tx_msg, "lsn").as_i64().unwrap();
    assert!(tx_lsn > source_field(insert, "lsn").as_i64().unwrap());
    assert_eq!(sequence(tx_msg), [None, Some(tx_lsn.to_string())], "no commit yet after a fresh start");
    // A non-transactional one has no txId, carries the last transaction's commit time, and is
    // its own last commit, also for the changes after it.
    let lsn = source_field(msg, "lsn").as_i64().unwrap();
    assert_eq!(source_field(msg, "txId"), &Value::Null);
    assert_eq!(source_field(msg, "ts_ms"), source_field(insert, "ts_ms"));
    assert_eq!(sequence(msg), [Some(lsn.to_string()), Some(lsn.to_string())]);
    assert_eq!(sequence(insert2)[0], Some(lsn.to_string()));

    // Restarted from each record's offset, the stream goes on exactly after it.
    for (i, record) in all.iter().enumerate().take(3) {
        let mut task = start_task_retrying(&props, Some(record.source_offset.clone())).await;
        let mut again = Vec::new();
        drain(&mut task, &mut again, Duration::from_secs(30), |a| data(a).len() >= 3 - i).await;
        // Nothing more arrives: a short wait for stray duplicates.
        let until = Instant::now() + Duration::from_millis(600);
        while Instant::now() < until {
            again.extend(task.poll_data().await.expect("poll"));
        }
        task.stop().await.unwrap();
        assert_eq!(shape(&again), expected[i + 1..], "restart after record {i}: {:?}", record.source_offset);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_follow_binary_handling_mode_and_count_in_transaction_metadata() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute("CREATE TABLE m (id int PRIMARY KEY)").await.unwrap();
    let props = pg.props(&[
        ("slot.name", "s_msg_tx"),
        ("snapshot.mode", "no_data"),
        ("binary.handling.mode", "hex"),
        ("provide.transaction.metadata", "true"),
        ("message.prefix.include.list", "pfx"),
    ]);
    let mut task = start_task(&props, None).await.unwrap();
    db.batch_execute(WORKLOAD).await.unwrap();
    let mut all = Vec::new();
    let ends = |a: &[SourceRecord]| a.iter().filter(|r| r.topic == "srv.transaction" && status(r) == "END").count();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| ends(a) == 2).await;
    task.stop().await.unwrap();
    let messages: Vec<&SourceRecord> = all.iter().filter(|r| r.topic == "srv.message").collect();
    assert_eq!(messages.len(), 2, "the prefixes the include list does not name are left out");
    let content = |r: &SourceRecord| envelope(r).get("message").and_then(Value::as_struct).unwrap().get("content").cloned();
    assert_eq!(content(messages[0]), Some(Value::String("68656c6c6f".into())), "hex, as Debezium's binary-hex recording");
    // The transactional message is the transaction's second event, under Debezium's
    // collection name for messages; the END counts it.
    let block = envelope(messages[0]).get("transaction").and_then(Value::as_struct).expect("a transaction block");
    assert_eq!(block.get("total_order"), Some(&Value::Int64(2)));
    assert_eq!(block.get("data_collection_order"), Some(&Value::Int64(1)));
    let end = all.iter().find(|r| r.topic == "srv.transaction" && status(r) == "END").unwrap();
    let collections = end.value.as_struct().unwrap().get("data_collections").cloned().unwrap();
    let Value::Array(collections) = collections else { panic!("{collections:?}") };
    let names: Vec<(String, i64)> = collections
        .iter()
        .map(|c| {
            let c = c.as_struct().unwrap();
            (c.get("data_collection").and_then(Value::as_str).unwrap().to_owned(), c.get("event_count").and_then(Value::as_i64).unwrap())
        })
        .collect();
    assert_eq!(names, [("public.m".to_owned(), 1), ("LOGICAL_DECODING_MESSAGE".to_owned(), 1)]);
    assert_eq!(envelope(messages[1]).get("transaction"), Some(&Value::Null), "a non-transactional message is in no transaction");
}
