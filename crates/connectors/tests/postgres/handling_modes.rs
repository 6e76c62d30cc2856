//! `binary.handling.mode`, `interval.handling.mode`, `hstore.handling.mode`,
//! `money.fraction.digits` and `unavailable.value.placeholder` against the real server, in
//! snapshot and stream, with the values Debezium's documentation gives.

use super::*;
use sluice_api::{Schema, SchemaRef};

fn after_schema(r: &SourceRecord) -> SchemaRef {
    r.value_schema.as_ref().unwrap().field("after").unwrap().schema.clone()
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

/// Starts a task on its own slot, reads the snapshot (`rows` records), runs `sql`, and
/// reads until `total` data records; stops the task.
async fn run(pg: &Pg, extra: &[(&str, &str)], rows: usize, sql: &str, total: usize) -> Vec<SourceRecord> {
    let db = pg.client("postgres").await;
    let mut task = start_task(&pg.props(extra), None).await.unwrap();
    let mut all = Vec::new();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| data(a).len() >= rows).await;
    db.batch_execute(sql).await.unwrap();
    drain(&mut task, &mut all, Duration::from_secs(30), |a| data(a).len() >= total).await;
    task.stop().await.unwrap();
    all.retain(|r| !r.value.is_null());
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handling_modes_shape_values_and_schemas_in_snapshot_and_stream() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    db.batch_execute(
        "CREATE EXTENSION hstore;
         CREATE TABLE modes (id int PRIMARY KEY, by bytea, bya bytea[], iv1 interval, iv2 interval, iv3 interval NOT NULL,
                             m money, h hstore);",
    )
    .await
    .unwrap();
    let row = "'\\xfbefff00', ARRAY['\\xfbefff00'::bytea, NULL], '1 year 2 mons 3 days 04:05:06.78', \
               '-1 years -2 mons +3 days -04:05:06.5', '00:00:00', '-1234.56', '\"a\"=>\"1\", \"b\"=>NULL'";
    db.batch_execute(&format!("INSERT INTO modes VALUES (1, {row})")).await.unwrap();

    // hex, ISO intervals, hstore as a map, money with three digits.
    let all = run(
        &pg,
        &[
            ("slot.name", "m1"),
            ("binary.handling.mode", "hex"),
            ("interval.handling.mode", "string"),
            ("hstore.handling.mode", "map"),
            ("money.fraction.digits", "3"),
        ],
        1,
        &format!("INSERT INTO modes VALUES (2, {row}); DELETE FROM modes WHERE id = 2;"),
        3,
    )
    .await;
    assert_eq!(all.iter().map(op).collect::<Vec<_>>(), vec!["r", "c", "d"]);
    for r in &all[..2] {
        let f = |n: &str| field(r, "after", n).clone();
        assert_eq!(f("by"), s("fbefff00"));
        assert_eq!(f("bya"), Value::Array(vec![s("fbefff00"), Value::Null]));
        // Debezium's documented example, and negative parts each with their sign.
        assert_eq!(f("iv1"), s("P1Y2M3DT4H5M6.78S"));
        assert_eq!(f("iv2"), s("P-1Y-2M3DT-4H-5M-6.5S"));
        assert_eq!(f("iv3"), s("P0Y0M0DT0H0M0S"));
        // -1234.560 at scale 3 = -1234560 = 0xED2980
        assert_eq!(f("m"), Value::Bytes(vec![0xed, 0x29, 0x80]));
        assert_eq!(f("h"), Value::Map(vec![(s("a"), s("1")), (s("b"), Value::Null)]));
    }
    // A delete's before holds the key only: a required interval gets Debezium's zero interval.
    assert_eq!(field(&all[2], "before", "iv3"), &s("P0Y0M0DT0H0M0S"));
    assert_eq!(field(&all[2], "before", "by"), &Value::Null);
    let after = after_schema(&all[0]);
    let schema = |n: &str| after.field(n).unwrap().schema.clone();
    assert_eq!(*schema("by"), Schema::string().optional());
    assert_eq!(*schema("bya"), Schema::array(Schema::string().optional().into_ref()).optional());
    assert_eq!(*schema("iv1"), Schema::string().named("io.debezium.time.Interval").with_version(1).optional());
    assert_eq!(*schema("iv3"), Schema::string().named("io.debezium.time.Interval").with_version(1));
    assert_eq!(*schema("h"), Schema::map(Schema::string().into_ref(), Schema::string().optional().into_ref()).optional());
    assert_eq!(schema("m").name.as_deref(), Some("org.apache.kafka.connect.data.Decimal"));
    assert_eq!(schema("m").parameter("scale"), Some("3"));

    // The two base64 alphabets: 0xfbefff is "++//" in one and "--__" in the other.
    for (i, (mode, encoded)) in [("base64", "++//AA=="), ("base64-url-safe", "--__AA==")].into_iter().enumerate() {
        let slot = format!("m{}", i + 2);
        let id = i + 3;
        let all = run(
            &pg,
            &[("slot.name", slot.as_str()), ("binary.handling.mode", mode)],
            1 + i,
            &format!("INSERT INTO modes VALUES ({id}, {row})"),
            2 + i,
        )
        .await;
        assert_eq!(all.iter().map(op).collect::<Vec<_>>(), [vec!["r"; 1 + i], vec!["c"]].concat(), "{mode}");
        for r in &all {
            assert_eq!(field(r, "after", "by"), &s(encoded), "{mode}");
            assert_eq!(field(r, "after", "bya"), &Value::Array(vec![s(encoded), Value::Null]), "{mode}");
            // The other keys keep Debezium's defaults.
            assert_eq!(field(r, "after", "iv1"), &Value::Int64(37_091_106_780_000), "{mode}");
            assert_eq!(field(r, "after", "h"), &s(r#"{"a":"1","b":null}"#), "{mode}");
        }
        assert_eq!(*after_schema(&all[0]).field("by").unwrap().schema, Schema::string().optional(), "{mode}");
    }
}

/// REPLICA IDENTITY DEFAULT: an update of another column leaves large values out of the
/// stream; each stands in as `unavailable.value.placeholder` in the form of its type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_value_placeholder_stands_for_unchanged_toasted_values() {
    let pg = Pg::start();
    let db = pg.client("postgres").await;
    let columns = ["t", "by", "bya", "ia", "la", "ua", "h", "j", "ta"];
    db.batch_execute(&format!(
        "CREATE EXTENSION hstore;
         CREATE TABLE toasty (id int PRIMARY KEY, n int, t text, by bytea, bya bytea[], ia int4[], la int8[], ua uuid[],
                              h hstore, j jsonb, ta text[]);
         {}
         INSERT INTO toasty SELECT 1, 1, repeat('x', 10000), decode(repeat('ab', 10000), 'hex'),
           ARRAY[decode(repeat('cd', 10000), 'hex')],
           ARRAY(SELECT g FROM generate_series(1, 5000) g), ARRAY(SELECT g::int8 FROM generate_series(1, 5000) g),
           ARRAY(SELECT md5(g::text)::uuid FROM generate_series(1, 1000) g),
           hstore(ARRAY(SELECT 'k' || g FROM generate_series(1, 2000) g), ARRAY(SELECT 'v' || g FROM generate_series(1, 2000) g)),
           (SELECT jsonb_agg(g) FROM generate_series(1, 3000) g),
           ARRAY(SELECT repeat('y', 10) FROM generate_series(1, 2000) g);",
        columns.iter().map(|c| format!("ALTER TABLE toasty ALTER COLUMN {c} SET STORAGE EXTERNAL;")).collect::<String>()
    ))
    .await
    .unwrap();

    // A placeholder in hex: octets "<?>", with bytea as bytes and hstore as JSON.
    let all = run(&pg, &[("slot.name", "t1"), ("unavailable.value.placeholder", "hex:3c3f3e")], 1, "UPDATE toasty SET n = 2", 2).await;
    assert_eq!(all.iter().map(op).collect::<Vec<_>>(), vec!["r", "u"]);
    let snap = |n: &str| field(&all[0], "after", n).clone();
    assert_eq!(snap("t"), s(&"x".repeat(10000)), "the snapshot has the real values");
    assert_eq!(snap("by"), Value::Bytes(vec![0xab; 10000]));
    assert!(matches!(snap("ia"), Value::Array(a) if a.len() == 5000 && a[4999] == Value::Int32(5000)));
    let u = |n: &str| field(&all[1], "after", n).clone();
    assert_eq!(u("n"), Value::Int32(2));
    assert_eq!(u("t"), s("<?>"));
    assert_eq!(u("by"), Value::Bytes(b"<?>".to_vec()));
    assert_eq!(u("bya"), Value::Array(vec![Value::Bytes(b"<?>".to_vec())]));
    // int4[] and int8[]: each octet of the placeholder as a number.
    assert_eq!(u("ia"), Value::Array(vec![Value::Int32(60), Value::Int32(63), Value::Int32(62)]));
    assert_eq!(u("la"), Value::Array(vec![Value::Int64(60), Value::Int64(63), Value::Int64(62)]));
    // uuid[]: Java's UUID.nameUUIDFromBytes of the octets.
    assert_eq!(u("ua"), Value::Array(vec![s("ebd16a7e-acd5-31d8-ac7f-7d73c4f3c38d")]));
    assert_eq!(u("h"), s(r#"{"<?>":"<?>"}"#));
    assert_eq!(u("j"), s("<?>"));
    assert_eq!(u("ta"), Value::Array(vec![s("<?>")]));
    assert_eq!(envelope(&all[1]).get("before"), Some(&Value::Null));

    // A plain placeholder, with bytea as hex strings and hstore as a map.
    let all = run(
        &pg,
        &[("slot.name", "t2"), ("unavailable.value.placeholder", "~u~"), ("binary.handling.mode", "hex"), ("hstore.handling.mode", "map")],
        1,
        "UPDATE toasty SET n = 3",
        2,
    )
    .await;
    assert_eq!(all.iter().map(op).collect::<Vec<_>>(), vec!["r", "u"]);
    assert_eq!(field(&all[0], "after", "by"), &s(&"ab".repeat(10000)));
    let u = |n: &str| field(&all[1], "after", n).clone();
    assert_eq!(u("n"), Value::Int32(3));
    assert_eq!(u("t"), s("~u~"));
    // Under hex the placeholder is not encoded (Debezium's shouldHandleToastedByteaColumnInHexMode).
    assert_eq!(u("by"), s("~u~"));
    assert_eq!(u("bya"), Value::Array(vec![s("~u~")]));
    assert_eq!(u("ia"), Value::Array(vec![Value::Int32(126), Value::Int32(117), Value::Int32(126)]));
    assert_eq!(u("ua"), Value::Array(vec![s("4a2549aa-4f93-3977-b181-f193fae7dba1")]));
    assert_eq!(u("h"), Value::Map(vec![(s("~u~"), s("~u~"))]));
    assert_eq!(u("j"), s("~u~"));

    // A bad placeholder is refused by name, at validation and at start.
    let props = pg.props(&[("slot.name", "t3"), ("unavailable.value.placeholder", "hex:3c3")]);
    let connector = (postgres::plugin().create)();
    let errors = connector.validate_extra(&props).await;
    assert!(errors.iter().any(|(k, m)| k == "unavailable.value.placeholder" && m.contains("hex:")), "{errors:?}");
    let err = start_task(&props, None).await.err().unwrap();
    assert!(err.to_string().contains("unavailable.value.placeholder"), "{err}");
}
