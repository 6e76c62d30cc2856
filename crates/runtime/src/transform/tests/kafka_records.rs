//! Kafka's record-level transforms and the predicates.

use sluice_api::{Schema, Value};

use super::*;
use crate::transform::predicate_plugin;

const K: &str = "org.apache.kafka.connect.transforms.";

fn class(simple: &str) -> String {
    format!("{K}{simple}")
}

fn with_headers(pairs: &[(&str, &str)]) -> TransformRecord {
    let mut r = record(None, map(&[]));
    for (k, v) in pairs {
        r.headers.add(*k, Some(Schema::string().into_ref()), s(v));
    }
    r
}

// DropHeadersTest.dropExistingHeader / dropExistingHeaderWithMultipleValues / dropNonExistingHeader.
#[test]
fn transform_drop_headers() {
    let t = make(&class("DropHeaders"), &[("headers", "dropped")]);
    let out = apply(&*t, with_headers(&[("existing", "a"), ("dropped", "b"), ("dropped", "c")]));
    assert_eq!(headers_of(&out.headers), r#"existing:string="a""#);
    let out = apply(&*t, with_headers(&[("existing", "a")]));
    assert_eq!(headers_of(&out.headers), r#"existing:string="a""#);
    // DropHeadersTest.configRejectsEmptyList
    assert!(config_error(&class("DropHeaders"), &[("headers", "")]).contains("headers"));
}

// Filter.java: every record is dropped, tombstones included.
#[test]
fn transform_filter_drops_everything() {
    let t = make(&class("Filter"), &[]);
    assert!(try_apply(&*t, record(None, map(&[]))).unwrap().is_none());
    assert!(try_apply(&*t, record(None, Value::Null)).unwrap().is_none());
}

// InsertHeaderTest: a new header is appended after existing ones (same key too); "1" is an
// int8 header (insertionWithByteHeader).
#[test]
fn transform_insert_header() {
    let t = make(&class("InsertHeader"), &[("header", "inserted"), ("value.literal", "inserted-value")]);
    let out = apply(&*t, with_headers(&[("existing", "existing-value")]));
    assert_eq!(headers_of(&out.headers), r#"existing:string="existing-value" inserted:string="inserted-value""#);
    let t = make(&class("InsertHeader"), &[("header", "existing"), ("value.literal", "inserted-value")]);
    let out = apply(&*t, with_headers(&[("existing", "preexisting-value")]));
    assert_eq!(headers_of(&out.headers), r#"existing:string="preexisting-value" existing:string="inserted-value""#);
    let t = make(&class("InsertHeader"), &[("header", "inserted"), ("value.literal", "1")]);
    let out = apply(&*t, with_headers(&[]));
    assert_eq!(headers_of(&out.headers), "inserted:int8=1i8");
    // A tombstone gets the header too; the value stays null.
    let out = apply(&*t, record(None, Value::Null));
    assert_eq!((headers_of(&out.headers), value_of(&out)), ("inserted:int8=1i8".to_owned(), "- | null".to_owned()));
    // configRejectsNullHeaderKey / configRejectsNullHeaderValue
    assert!(config_error(&class("InsertHeader"), &[("value.literal", "1")]).contains("header"));
    assert!(config_error(&class("InsertHeader"), &[("header", "h")]).contains("value.literal"));
}

// RegexRouterTest: staticReplacement, doesntMatch, identity, addPrefix, addSuffix, slice.
#[test]
fn transform_regex_router() {
    let route = |regex: &str, replacement: &str, topic: &str| {
        let t = make(&class("RegexRouter"), &[("regex", regex), ("replacement", replacement)]);
        let mut r = record(None, Value::Null);
        r.topic = topic.to_owned();
        apply(&*t, r).topic
    };
    assert_eq!(route("foo", "bar", "foo"), "bar");
    assert_eq!(route("foo", "bar", "orig"), "orig");
    assert_eq!(route("(.*)", "$1", "orig"), "orig");
    assert_eq!(route("(.*)", "prefix-$1", "orig"), "prefix-orig");
    assert_eq!(route("(.*)", "$1-suffix", "orig"), "orig-suffix");
    assert_eq!(route("(.*)-(\\d\\d\\d\\d\\d\\d\\d\\d)", "$1", "index-20160117"), "index");
    // Java's replacement syntax: a partial match does not route; `$10` is group 1 then '0'
    // when there is no group 10; `\$` is a literal dollar; named groups.
    assert_eq!(route("foo", "bar", "foobar"), "foobar");
    assert_eq!(route("(a)", "$10", "a"), "a0");
    assert_eq!(route("(a)", "\\$1", "a"), "$1");
    assert_eq!(route("(?<name>.*)\\.public\\.(.*)", "${name}_$2", "db.public.orders"), "db_orders");
    assert!(config_error(&class("RegexRouter"), &[("regex", "(unclosed"), ("replacement", "x")]).contains("regex"));
    assert!(config_error(&class("RegexRouter"), &[("regex", "(a)"), ("replacement", "$2")]).contains("replacement"));
}

// TimestampRouterTest.defaultConfiguration: topic "test" at 2017-01-03 -> "test-20170103".
#[test]
fn transform_timestamp_router() {
    let t = make(&class("TimestampRouter"), &[]);
    assert_eq!(apply(&*t, record(None, Value::Null)).topic, "test-20170103");
    let t = make(&class("TimestampRouter"), &[("topic.format", "${timestamp}.${topic}"), ("timestamp.format", "yyyy-MM")]);
    assert_eq!(apply(&*t, record(None, Value::Null)).topic, "2017-01.test");
    let mut r = record(None, Value::Null);
    r.timestamp = None;
    assert_eq!(apply_err(&*t, r), "TimestampRouter: the record for topic test has no timestamp");
}

// SetSchemaMetadataTest: schemaNameUpdate, schemaVersionUpdate, schemaNameAndVersionUpdateWithStruct,
// valueSchemaRequired, ignoreRecordWithNullValue, updateSchemaOfNonStruct.
#[test]
fn transform_set_schema_metadata() {
    let t = make(&class("SetSchemaMetadata$Value"), &[("schema.name", "foo"), ("schema.version", "42")]);
    let schema = Schema::struct_of([("stringField", Schema::string().into_ref()), ("intField", Schema::int32().into_ref())]).into_ref();
    let r = record(Some((*schema).clone()), st(&schema, vec![s("value"), Value::Int32(1)]));
    assert_eq!(value_of(&apply(&*t, r)), r#"struct<foo@42>{stringField:string,intField:int32} | {stringField="value",intField=1i32}"#);
    let t = make(&class("SetSchemaMetadata$Value"), &[("schema.version", "42")]);
    assert_eq!(value_of(&apply(&*t, record(Some(Schema::int32()), Value::Int32(3)))), "int32<@42> | 3i32");
    // Schemaless with a value: the schema is required.
    assert_eq!(apply_err(&*t, record(None, s("x"))), "SetSchemaMetadata: a schema is required for updating schema metadata");
    // No schema and no value: passes through.
    assert_eq!(value_of(&apply(&*t, record(None, Value::Null))), "- | null");
    // Keyed variant touches only the key.
    let t = make(&class("SetSchemaMetadata$Key"), &[("schema.name", "k")]);
    let out = apply(&*t, keyed(Some(Schema::string()), s("id"), Some(Schema::int32()), Value::Int32(1)));
    assert_eq!((key_of(&out), value_of(&out)), (r#"string<k> | "id""#.to_owned(), "int32 | 1i32".to_owned()));
    assert!(config_error(&class("SetSchemaMetadata$Value"), &[]).contains("neither schema name nor version"));
}

// HoistFieldTest.schemaless / withSchema; a tombstone with a schema becomes a struct whose field is null.
#[test]
fn transform_hoist_field() {
    let t = make(&class("HoistField$Key"), &[("field", "magic")]);
    let out = apply(&*t, keyed(None, Value::Int32(42), None, Value::Null));
    assert_eq!(key_of(&out), r#"- | {"magic":42i32}"#);
    let out = apply(&*t, keyed(Some(Schema::int32()), Value::Int32(42), None, Value::Null));
    assert_eq!(key_of(&out), "struct{magic:int32} | {magic=42i32}");
    // The documented example from Kafka's connect.html: HoistField$Value field=line.
    let t = make(&class("HoistField$Value"), &[("field", "line")]);
    assert_eq!(value_of(&apply(&*t, record(Some(Schema::string()), s("foo")))), r#"struct{line:string} | {line="foo"}"#);
    assert_eq!(value_of(&apply(&*t, record(Some(Schema::string().optional()), Value::Null))), "struct{line:string?} | {line=null}");
}

// ValueToKeyTest.schemaless / withSchema / nonExistingField; a tombstone is an error as in
// Kafka (requireMap / requireStruct on null).
#[test]
fn transform_value_to_key() {
    let t = make(&class("ValueToKey"), &[("fields", "a,b")]);
    let out = apply(&*t, record(None, map(&[("a", Value::Int32(1)), ("b", Value::Int32(2)), ("c", Value::Int32(3))])));
    assert_eq!(key_of(&out), r#"- | {"a":1i32,"b":2i32}"#);
    let schema =
        Schema::struct_of([("a", Schema::int32().into_ref()), ("b", Schema::int32().into_ref()), ("c", Schema::int32().into_ref())])
            .into_ref();
    let out = apply(&*t, record(Some((*schema).clone()), st(&schema, vec![Value::Int32(1), Value::Int32(2), Value::Int32(3)])));
    assert_eq!(key_of(&out), "struct{a:int32,b:int32} | {a=1i32,b=2i32}");
    assert_eq!(value_of(&out), "struct{a:int32,b:int32,c:int32} | {a=1i32,b=2i32,c=3i32}");
    let t = make(&class("ValueToKey"), &[("fields", "not_exist")]);
    assert_eq!(
        apply_err(&*t, record(Some((*schema).clone()), st(&schema, vec![Value::Int32(1), Value::Int32(2), Value::Int32(3)]))),
        "ValueToKey: field `not_exist` does not exist in the value schema"
    );
    assert_eq!(
        apply_err(&*t, record(None, Value::Null)),
        "ValueToKey: only map values are supported without a schema for copying fields from value to key, found null"
    );
    // ValueToKeyTest.testReplaceNullWithDefaultConfig: a null field with a default gives the
    // default unless replace.null.with.default=false.
    let schema = Schema::struct_of([("a", Schema::int32().optional().with_default(Value::Int32(7)).into_ref())]).into_ref();
    let r = || record(Some((*schema).clone()), st(&schema, vec![Value::Null]));
    assert_eq!(key_of(&apply(&*make(&class("ValueToKey"), &[("fields", "a")]), r())), "struct{a:int32?=7i32} | {a=7i32}");
    assert_eq!(
        key_of(&apply(&*make(&class("ValueToKey"), &[("fields", "a"), ("replace.null.with.default", "false")]), r())),
        "struct{a:int32?=7i32} | {a=null}"
    );
}

// HeaderFromTest: copy and move, with and without schema; config errors for mismatched lists.
#[test]
fn transform_header_from() {
    let schema = Schema::struct_of([("field1", Schema::string().into_ref()), ("field2", Schema::int32().into_ref())]).into_ref();
    let value = || st(&schema, vec![s("a"), Value::Int32(2)]);
    let copy = make(&class("HeaderFrom$Value"), &[("fields", "field1,field2"), ("headers", "h1,h2"), ("operation", "copy")]);
    let out = apply(&*copy, record(Some((*schema).clone()), value()));
    assert_eq!(headers_of(&out.headers), r#"h1:string="a" h2:int32=2i32"#);
    assert_eq!(value_of(&out), r#"struct{field1:string,field2:int32} | {field1="a",field2=2i32}"#);
    let mv = make(&class("HeaderFrom$Value"), &[("fields", "field1"), ("headers", "h1"), ("operation", "move")]);
    let out = apply(&*mv, record(Some((*schema).clone()), value()));
    assert_eq!(headers_of(&out.headers), r#"h1:string="a""#);
    assert_eq!(value_of(&out), "struct{field2:int32} | {field2=2i32}");
    let out = apply(&*mv, record(None, map(&[("field1", s("a")), ("field2", Value::Int32(2))])));
    assert_eq!(headers_of(&out.headers), r#"h1:-="a""#);
    assert_eq!(value_of(&out), r#"- | {"field2":2i32}"#);
    // A field missing from the schema is an error (Kafka fails on it too).
    let missing = make(&class("HeaderFrom$Value"), &[("fields", "nope"), ("headers", "h"), ("operation", "copy")]);
    assert_eq!(apply_err(&*missing, record(Some((*schema).clone()), value())), "HeaderFrom: field `nope` is not in the schema");
    assert!(config_error(&class("HeaderFrom$Value"), &[("fields", "a,b"), ("headers", "h"), ("operation", "copy")])
        .contains("same number of elements"));
    assert!(config_error(&class("HeaderFrom$Value"), &[("fields", "a"), ("headers", "h"), ("operation", "cut")]).contains("operation"));
}

// HasHeaderKeyTest / TopicNameMatchesTest / RecordIsTombstone.java.
#[test]
fn transform_predicates() {
    let make_p = |class: &str, p: &[(&str, &str)]| (predicate_plugin(class).unwrap().create)(&props(p));
    let has = make_p("org.apache.kafka.connect.transforms.predicates.HasHeaderKey", &[("name", "foo")]).unwrap();
    assert!(has.test(&with_headers(&[("foo", "x")])));
    assert!(has.test(&with_headers(&[("bar", "x"), ("foo", "y")])));
    assert!(!has.test(&with_headers(&[("bar", "x")])));
    assert!(!has.test(&with_headers(&[])));
    assert!(make_p("org.apache.kafka.connect.transforms.predicates.HasHeaderKey", &[("name", "")]).is_err());
    assert!(make_p("org.apache.kafka.connect.transforms.predicates.HasHeaderKey", &[]).is_err());

    let topic = make_p("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", &[("pattern", "my-prefix-.*")]).unwrap();
    let on = |t: &str| {
        let mut r = record(None, Value::Null);
        r.topic = t.to_owned();
        r
    };
    assert!(topic.test(&on("my-prefix-")));
    assert!(topic.test(&on("my-prefix-foo")));
    assert!(!topic.test(&on("x-my-prefix-")));
    assert!(!topic.test(&on("")));
    let err = make_p("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", &[("pattern", "[")]).err().unwrap().to_string();
    assert!(err.starts_with("invalid value for configuration pattern:"), "{err}");

    let tomb = make_p("org.apache.kafka.connect.transforms.predicates.RecordIsTombstone", &[]).unwrap();
    assert!(tomb.test(&record(None, Value::Null)));
    assert!(!tomb.test(&record(None, map(&[]))));
}
