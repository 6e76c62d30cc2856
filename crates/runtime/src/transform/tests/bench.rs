//! A microbenchmark of a three-stage chain over 1M records shaped like the datagen bench
//! (struct {id:int64, ts:int64, payload:string(64)}). Run it in release mode:
//! `cargo test -p sluice-runtime --release --lib transform::tests::bench -- --ignored --nocapture`.

use std::time::Instant;

use sluice_api::{Schema, Value};

use super::*;
use crate::transform::TransformChain;

#[test]
#[ignore = "microbenchmark: run in release mode with --ignored --nocapture"]
fn transform_bench_three_stage_chain() {
    const N: usize = 1_000_000;
    let chain = TransformChain::from_connector_config(&props(&[
        ("transforms", "insert,rename,route"),
        ("transforms.insert.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
        ("transforms.insert.static.field", "source"),
        ("transforms.insert.static.value", "bench"),
        ("transforms.rename.type", "org.apache.kafka.connect.transforms.ReplaceField$Value"),
        ("transforms.rename.renames", "payload:body"),
        ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter"),
        ("transforms.route.regex", "bench-(.*)"),
        ("transforms.route.replacement", "routed-$1"),
    ]))
    .unwrap();
    let schema = Schema::struct_of([
        ("id", Schema::int64().into_ref()),
        ("ts", Schema::int64().into_ref()),
        ("payload", Schema::string().into_ref()),
    ])
    .into_ref();
    let payload = "x".repeat(64);
    let records: Vec<TransformRecord> = (0..N)
        .map(|i| {
            let mut r = record(None, st(&schema, vec![Value::Int64(i as i64), Value::Int64(1_700_000_000_000 + i as i64), s(&payload)]));
            r.value_schema = Some(schema.clone());
            r.topic = "bench-topic".into();
            r
        })
        .collect();
    let start = Instant::now();
    let mut kept = 0usize;
    for r in records {
        let out = chain.apply(r).unwrap().unwrap();
        kept += usize::from(out.topic.len() == "routed-topic".len());
    }
    let elapsed = start.elapsed();
    assert_eq!(kept, N);
    println!(
        "transform chain (InsertField$Value + ReplaceField$Value + RegexRouter): {N} records in {elapsed:?}, {:.0} records/s",
        N as f64 / elapsed.as_secs_f64()
    );
}
