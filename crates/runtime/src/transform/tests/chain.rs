//! Chain parsing and application, from connector configuration keys.

use sluice_api::{ConnectError, Schema, Value};

use super::*;
use crate::transform::{enriched_config_def, validate, TransformChain};

fn chain(p: &[(&str, &str)]) -> TransformChain {
    TransformChain::from_connector_config(&props(p)).unwrap_or_else(|e| panic!("{e}"))
}

fn chain_err(p: &[(&str, &str)]) -> (String, String) {
    match TransformChain::from_connector_config(&props(p)) {
        Ok(c) => panic!("expected an error, built {c:?}"),
        Err(ConnectError::Config { key, message }) => (key, message),
        Err(other) => panic!("expected a config error, got {other}"),
    }
}

fn on_topic(topic: &str, value: Value) -> TransformRecord {
    let mut r = record(None, value);
    r.topic = topic.to_owned();
    r
}

// Kafka's connect.html, "Transformations": MakeMap + InsertSource on lines of a file.
#[test]
fn transform_chain_documented_hoist_and_insert_example() {
    let c = chain(&[
        ("transforms", "MakeMap, InsertSource"),
        ("transforms.MakeMap.type", "org.apache.kafka.connect.transforms.HoistField$Value"),
        ("transforms.MakeMap.field", "line"),
        ("transforms.InsertSource.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
        ("transforms.InsertSource.static.field", "data_source"),
        ("transforms.InsertSource.static.value", "test-file-source"),
    ]);
    assert_eq!(c.aliases(), ["MakeMap", "InsertSource"]);
    for line in ["foo", "bar", "hello world"] {
        let out = c.apply(record(Some(Schema::string()), s(line))).unwrap().unwrap();
        assert_eq!(
            value_of(&out),
            format!(r#"struct{{line:string,data_source:string?}} | {{line={line:?},data_source="test-file-source"}}"#)
        );
    }
}

// Kafka's connect.html, "Predicates": drop topic foo, ExtractField$Key on every topic but bar.
#[test]
fn transform_chain_documented_filter_and_negated_predicate_example() {
    let c = chain(&[
        ("transforms", "Filter,Extract"),
        ("transforms.Filter.type", "org.apache.kafka.connect.transforms.Filter"),
        ("transforms.Filter.predicate", "IsFoo"),
        ("transforms.Extract.type", "org.apache.kafka.connect.transforms.ExtractField$Key"),
        ("transforms.Extract.field", "other_field"),
        ("transforms.Extract.predicate", "IsBar"),
        ("transforms.Extract.negate", "true"),
        ("predicates", "IsFoo,IsBar"),
        ("predicates.IsFoo.type", "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
        ("predicates.IsFoo.pattern", "foo"),
        ("predicates.IsBar.type", "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
        ("predicates.IsBar.pattern", "bar"),
    ]);
    let with_key = |topic: &str| {
        let mut r = on_topic(topic, s("v"));
        r.key = map(&[("other_field", s("k")), ("x", s("y"))]);
        r
    };
    assert!(c.apply(with_key("foo")).unwrap().is_none());
    assert_eq!(key_of(&c.apply(with_key("bar")).unwrap().unwrap()), r#"- | {"other_field":"k","x":"y"}"#);
    assert_eq!(key_of(&c.apply(with_key("baz")).unwrap().unwrap()), r#"- | "k""#);
}

// InsertField + RegexRouter under a predicate: the shape of the brief's
// `transforms=InsertSource,Router` example (not in Kafka's docs in this form).
#[test]
fn transform_chain_insert_then_route_with_predicate() {
    let c = chain(&[
        ("transforms", "InsertSource,Router"),
        ("transforms.InsertSource.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
        ("transforms.InsertSource.static.field", "data_source"),
        ("transforms.InsertSource.static.value", "test-file-source"),
        ("transforms.Router.type", "org.apache.kafka.connect.transforms.RegexRouter"),
        ("transforms.Router.regex", "(.*)-raw"),
        ("transforms.Router.replacement", "$1-clean"),
        ("transforms.Router.predicate", "NotTombstone"),
        ("transforms.Router.negate", "true"),
        ("predicates", "NotTombstone"),
        ("predicates.NotTombstone.type", "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"),
    ]);
    let out = c.apply(on_topic("orders-raw", map(&[("id", Value::Int64(1))]))).unwrap().unwrap();
    assert_eq!((out.topic.as_str(), value_of(&out)), ("orders-clean", r#"- | {"id":1i64,"data_source":"test-file-source"}"#.to_owned()));
    // A tombstone passes InsertField unchanged and, negated predicate, is not routed.
    let out = c.apply(on_topic("orders-raw", Value::Null)).unwrap().unwrap();
    assert_eq!((out.topic.as_str(), value_of(&out)), ("orders-raw", "- | null".to_owned()));
}

#[test]
fn transform_chain_empty_and_aliases() {
    assert!(chain(&[]).is_empty());
    assert!(chain(&[("transforms", " ")]).is_empty());
    let c = chain(&[
        ("transforms", "a"),
        ("transforms.a.type", "RegexRouter"),
        ("transforms.a.regex", ".*"),
        ("transforms.a.replacement", "x"),
    ]);
    assert_eq!(c.len(), 1);
}

// ConnectorConfig's checks, each naming its key.
#[test]
fn transform_chain_errors_name_the_key() {
    let (key, msg) = chain_err(&[("transforms", "a")]);
    assert_eq!(key, "transforms.a.type");
    assert!(msg.contains("missing required configuration"), "{msg}");

    let (key, msg) = chain_err(&[("transforms", "a"), ("transforms.a.type", "com.example.Nope")]);
    assert_eq!(key, "transforms.a.type");
    assert!(
        msg.starts_with(
            "class com.example.Nope could not be found; available transformations are: org.apache.kafka.connect.transforms.Cast$Key,"
        ),
        "{msg}"
    );
    assert!(msg.contains("io.debezium.transforms.outbox.EventRouter"), "{msg}");

    let (key, msg) = chain_err(&[("transforms", "a"), ("transforms.a.type", "Filter"), ("transforms.a.predicate", "p")]);
    assert_eq!(key, "transforms.a.predicate");
    assert_eq!(msg, "predicate 'p' is not defined: add it to 'predicates' and set 'predicates.p.type'");

    let (key, msg) = chain_err(&[("transforms", "a"), ("transforms.a.type", "Filter"), ("transforms.a.negate", "true")]);
    assert_eq!(key, "transforms.a.negate");
    assert!(msg.contains("no 'transforms.a.predicate'"), "{msg}");

    let (key, _) = chain_err(&[("transforms", "a,a"), ("transforms.a.type", "Filter")]);
    assert_eq!(key, "transforms");

    let (key, msg) = chain_err(&[("transforms", "a"), ("transforms.a.type", "org.apache.kafka.connect.transforms.ExtractField$Value")]);
    assert_eq!(key, "transforms.a.field");
    assert!(msg.contains("Missing required configuration \"field\""), "{msg}");

    let (key, msg) = chain_err(&[
        ("transforms", "c"),
        ("transforms.c.type", "org.apache.kafka.connect.transforms.Cast$Value"),
        ("transforms.c.spec", "x:blob"),
    ]);
    assert_eq!((key.as_str(), msg.as_str()), ("transforms.c.spec", "invalid type found in casting spec: blob"));

    let (key, msg) =
        chain_err(&[("predicates", "p"), ("predicates.p.type", "org.apache.kafka.connect.transforms.predicates.TopicNameMatches")]);
    assert_eq!(key, "predicates.p.pattern");
    assert!(msg.contains("pattern"), "{msg}");

    let (key, msg) = chain_err(&[("predicates", "p"), ("predicates.p.type", "Nope")]);
    assert_eq!(key, "predicates.p.type");
    assert!(msg.contains("available predicates are: org.apache.kafka.connect.transforms.predicates.HasHeaderKey"), "{msg}");
}

#[test]
fn transform_chain_validate_reports_every_problem() {
    let errors = validate(&props(&[
        ("transforms", "a,b,c"),
        ("transforms.a.type", "Nope"),
        ("transforms.b.type", "org.apache.kafka.connect.transforms.RegexRouter"),
        ("transforms.c.type", "Filter"),
        ("transforms.c.predicate", "missing"),
    ]));
    let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["transforms.a.type", "transforms.b.regex", "transforms.b.replacement", "transforms.c.predicate"]);
    assert!(validate(&props(&[("transforms", "f"), ("transforms.f.type", "Filter")])).is_empty());
}

#[test]
fn transform_chain_enriched_keys_per_alias() {
    let def = enriched_config_def(&props(&[
        ("transforms", "r,x"),
        ("transforms.r.type", "org.apache.kafka.connect.transforms.RegexRouter"),
        ("transforms.x.type", "Unknown"),
        ("predicates", "p"),
        ("predicates.p.type", "HasHeaderKey"),
    ]));
    let names: Vec<&str> = def.keys().iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "transforms.r.type",
            "transforms.r.predicate",
            "transforms.r.negate",
            "transforms.r.regex",
            "transforms.r.replacement",
            "transforms.x.type",
            "transforms.x.predicate",
            "transforms.x.negate",
            "predicates.p.type",
            "predicates.p.name",
        ]
    );
    assert_eq!(def.key("transforms.r.regex").unwrap().group.as_deref(), Some("Transforms: r"));
}

// A failing stage names itself and keeps the transform's error as the cause.
#[test]
fn transform_chain_failure_names_the_stage() {
    let c = chain(&[("transforms", "tr"), ("transforms.tr.type", "TimestampRouter")]);
    let mut r = on_topic("t", Value::Null);
    r.timestamp = None;
    let err = c.apply(r).unwrap_err();
    assert_eq!(
        err.trace(),
        "ConnectException: transformation tr (org.apache.kafka.connect.transforms.TimestampRouter) failed\nCaused by: TimestampRouter: the record for topic t has no timestamp"
    );
}
