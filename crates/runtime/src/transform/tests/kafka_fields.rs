//! Kafka's field-level transforms.

use sluice_api::{Schema, Struct, Value};

use super::*;
use crate::transform::java_text::decimal_bytes;

const K: &str = "org.apache.kafka.connect.transforms.";

fn class(simple: &str) -> String {
    format!("{K}{simple}")
}

fn i32s(v: i32) -> Value {
    Value::Int32(v)
}

// CastTest.castFieldsWithSchema: every supported pair, defaults cast too, bytes to base64,
// a decimal and a date to strings, an optional field left null.
#[test]
fn transform_cast_fields_with_schema() {
    let t = make(
        &class("Cast$Value"),
        &[("spec", "int8:int16,int16:int32,int32:int64,int64:boolean,float32:float64,float64:boolean,boolean:int8,string:int32,bigdecimal:string,date:string,optional:int32,bytes:string")],
    );
    let schema = Schema::struct_of([
        ("int8", Schema::int8().into_ref()),
        ("int16", Schema::int16().optional().into_ref()),
        ("int32", Schema::int32().with_default(i32s(2)).into_ref()),
        ("int64", Schema::int64().into_ref()),
        ("float32", Schema::float32().into_ref()),
        ("float64", Schema::float64().with_default(Value::Float64(-1.125)).into_ref()),
        ("boolean", Schema::boolean().into_ref()),
        ("string", Schema::string().into_ref()),
        ("bigdecimal", Schema::decimal(0).into_ref()),
        ("date", Schema::date().into_ref()),
        ("optional", Schema::float32().optional().into_ref()),
        ("timestamp", Schema::timestamp().into_ref()),
        ("bytes", Schema::bytes().into_ref()),
    ])
    .into_ref();
    let value = st(
        &schema,
        vec![
            Value::Int8(8),
            Value::Int16(16),
            i32s(32),
            Value::Int64(64),
            Value::Float32(32.0),
            Value::Float64(-64.0),
            Value::Boolean(true),
            s("42"),
            Value::Bytes(decimal_bytes(42)),
            i32s(1),
            Value::Null,
            Value::Int64(0),
            Value::Bytes(vec![0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10]),
        ],
    );
    let out = apply(&*t, record(Some((*schema).clone()), value));
    assert_eq!(
        value_of(&out),
        "struct{int8:int16,int16:int32?,int32:int64=2i64,int64:boolean,float32:float64,float64:boolean=true,boolean:int8,string:int32,bigdecimal:string,date:string,optional:int32?,timestamp:Timestamp,bytes:string} | \
         {int8=8i16,int16=16i32,int32=32i64,int64=true,float32=32.0f64,float64=true,boolean=1i8,string=42i32,bigdecimal=\"42\",date=\"1970-01-02\",optional=null,timestamp=0i64,bytes=\"/ty6mHZUMhA=\"}"
    );
}

// CastTest.castWholeRecordValueSchemalessString / castWholeRecordValueWithSchemaInt8 /
// castNullValueRecordWithSchema / castFieldsSchemaless; Java narrowing and number text.
#[test]
fn transform_cast_whole_values_and_schemaless() {
    let t = make(&class("Cast$Value"), &[("spec", "string")]);
    assert_eq!(value_of(&apply(&*t, record(None, i32s(42)))), r#"- | "42""#);
    assert_eq!(value_of(&apply(&*t, record(None, Value::Float64(1e20)))), r#"- | "1.0E20""#);
    assert_eq!(value_of(&apply(&*t, record(None, Value::Float32(2.5)))), r#"- | "2.5""#);
    let t = make(&class("Cast$Value"), &[("spec", "int8")]);
    assert_eq!(value_of(&apply(&*t, record(Some(Schema::int32()), i32s(42)))), "int8 | 42i8");
    assert_eq!(value_of(&apply(&*t, record(Some(Schema::int32()), i32s(300)))), "int8 | 44i8");
    assert_eq!(value_of(&apply(&*t, record(Some(Schema::float64()), Value::Float64(-1.9)))), "int8 | -1i8");
    assert_eq!(value_of(&apply(&*t, record(Some(Schema::int32().optional()), Value::Null))), "int32? | null");
    // Whole-value cast keeps the schema's name (copySchemaBasics), as Kafka does.
    let t = make(&class("Cast$Value"), &[("spec", "int64")]);
    assert_eq!(value_of(&apply(&*t, record(Some(Schema::timestamp()), Value::Int64(5)))), "Timestamp | 5i64");
    let t = make(&class("Cast$Key"), &[("spec", "boolean")]);
    assert_eq!(key_of(&apply(&*t, keyed(Some(Schema::float64()), Value::Float64(0.5), None, Value::Null))), "boolean | false");
    // castFieldsSchemaless: fields cast in place; a missing field becomes null (HashMap.put).
    let t = make(&class("Cast$Value"), &[("spec", "a:int16,b:string,c:float64,missing:int8")]);
    let out = apply(&*t, record(None, map(&[("a", i32s(1)), ("b", Value::Boolean(true)), ("c", s("1.5")), ("d", s("x"))])));
    assert_eq!(value_of(&out), r#"- | {"a":1i16,"b":"true","c":1.5f64,"d":"x","missing":null}"#);
}

// The brief's error form; CastTest.testConfigInvalidTargetType / testConfigMixWholeAndFieldTransformation /
// testUnsupportedTargetType; castFieldWithSchema of bytes to a number fails in Kafka too.
#[test]
fn transform_cast_errors() {
    let t = make(&class("Cast$Value"), &[("spec", "x:int32")]);
    let schema = Schema::struct_of([("x", Schema::string().into_ref())]).into_ref();
    assert_eq!(
        apply_err(&*t, record(Some((*schema).clone()), st(&schema, vec![s("abc")]))),
        "Cast: field `x` of type string cannot be cast to int32: 'abc' is not a number"
    );
    let t8 = make(&class("Cast$Value"), &[("spec", "int8")]);
    assert_eq!(
        apply_err(&*t8, record(None, s("300"))),
        "Cast: value of type string cannot be cast to int8: '300' is out of range for int8"
    );
    assert_eq!(value_of(&apply(&*t8, record(None, s("-12")))), "- | -12i8");
    let t = make(&class("Cast$Value"), &[("spec", "int32")]);
    assert_eq!(
        apply_err(&*t, record(Some(Schema::bytes()), Value::Bytes(vec![1]))),
        "Cast: value of type bytes cannot be cast to int32: bytes can only be cast to string"
    );
    assert_eq!(
        apply_err(&*t, record(None, Value::Array(vec![]))),
        "Cast: value of type array cannot be cast to int32: only primitive types can be cast"
    );
    assert!(config_error(&class("Cast$Value"), &[("spec", "foo:faketype")]).contains("invalid type found in casting spec: faketype"));
    assert!(config_error(&class("Cast$Value"), &[("spec", "int8,field:int16")]).contains("must be the only entry"));
    assert!(config_error(&class("Cast$Value"), &[("spec", "bytes")]).contains("cannot cast to bytes"));
    assert!(config_error(&class("Cast$Value"), &[("spec", "")]).contains("at least one field"));
}

// ExtractFieldTest: schemaless, nullSchemaless, withSchema, testNullWithSchema,
// nonExistentField*, and the V2 nested paths (schemalessAndNestedPath, withSchemaAndNestedPath).
#[test]
fn transform_extract_field() {
    let t = make(&class("ExtractField$Key"), &[("field", "magic")]);
    assert_eq!(key_of(&apply(&*t, keyed(None, map(&[("magic", i32s(42))]), None, Value::Null))), "- | 42i32");
    assert_eq!(key_of(&apply(&*t, keyed(None, Value::Null, None, Value::Null))), "- | null");
    assert_eq!(key_of(&apply(&*t, keyed(None, map(&[("other", i32s(1))]), None, Value::Null))), "- | null");
    let schema = Schema::struct_of([("magic", Schema::int32().into_ref())]).into_ref();
    let out = apply(&*t, keyed(Some((*schema).clone()), st(&schema, vec![i32s(42)]), None, Value::Null));
    assert_eq!(key_of(&out), "int32 | 42i32");
    let out = apply(&*t, keyed(Some((*schema).clone()), Value::Null, None, Value::Null));
    assert_eq!(key_of(&out), "int32 | null");
    let t2 = make(&class("ExtractField$Key"), &[("field", "nonexistent")]);
    assert_eq!(
        apply_err(&*t2, keyed(Some((*schema).clone()), st(&schema, vec![i32s(42)]), None, Value::Null)),
        "ExtractField: unknown field `nonexistent`"
    );

    let nested = make(&class("ExtractField$Value"), &[("field", "magic.foo"), ("field.syntax.version", "V2")]);
    let out = apply(&*nested, record(None, map(&[("magic", map(&[("foo", i32s(42))]))])));
    assert_eq!(value_of(&out), "- | 42i32");
    let inner = Schema::struct_of([("foo", Schema::int32().into_ref())]).into_ref();
    let outer = Schema::struct_of([("magic", inner.clone())]).into_ref();
    let out = apply(&*nested, record(Some((*outer).clone()), st(&outer, vec![st(&inner, vec![i32s(42)])])));
    assert_eq!(value_of(&out), "int32 | 42i32");
    // V1 reads the dotted name as one field.
    let v1 = make(&class("ExtractField$Value"), &[("field", "magic.foo")]);
    assert_eq!(value_of(&apply(&*v1, record(None, map(&[("magic.foo", i32s(7))])))), "- | 7i32");
    assert_eq!(apply_err(&*nested, record(Some((*schema).clone()), st(&schema, vec![i32s(1)]))), "ExtractField: unknown field `magic.foo`");
}

// FlattenTest.testNestedStruct / testNestedMapWithDelimiter / testOptionalAndDefaultValuesNested /
// tombstoneEvent*ShouldPassThrough / testSchemalessArray.
#[test]
fn transform_flatten() {
    let t = make(&class("Flatten$Value"), &[]);
    let two = Schema::struct_of([("int8", Schema::int8().into_ref()), ("string", Schema::string().into_ref())]).into_ref();
    let one = Schema::struct_of([("B", two.clone()), ("opt", Schema::int32().optional().into_ref())]).into_ref();
    let top = Schema::struct_of([("A", one.clone()), ("arr", Schema::array(Schema::int32().into_ref()).into_ref())]).into_ref();
    let v = st(&top, vec![st(&one, vec![st(&two, vec![Value::Int8(8), s("x")]), Value::Null]), Value::Array(vec![i32s(1)])]);
    let out = apply(&*t, record(Some((*top).clone()), v));
    assert_eq!(
        value_of(&out),
        r#"struct{A.B.int8:int8,A.B.string:string,A.opt:int32?,arr:array<int32>} | {A.B.int8=8i8,A.B.string="x",A.opt=null,arr=[1i32]}"#
    );

    let t = make(&class("Flatten$Value"), &[("delimiter", "#")]);
    let out = apply(
        &*t,
        record(None, map(&[("A", map(&[("B", map(&[("int", i32s(1))])), ("s", s("x"))])), ("list", Value::Array(vec![i32s(1)]))])),
    );
    assert_eq!(value_of(&out), r#"- | {"A#B#int":1i32,"A#s":"x","list":[1i32]}"#);

    // An optional parent makes its children optional; a parent's default fills a child's.
    let child = Schema::struct_of([("req", Schema::int32().into_ref())]).into_ref();
    let child_default = st(&child, vec![i32s(5)]);
    let parent = Schema::struct_of([("c", (*child).clone().optional().with_default(child_default).into_ref())]).into_ref();
    let out = apply(&*make(&class("Flatten$Value"), &[]), record(Some((*parent).clone()), st(&parent, vec![Value::Null])));
    assert_eq!(value_of(&out), "struct{c.req:int32?=5i32} | {c.req=null}");

    // FlattenTest.testOptionalAndDefaultValuesNested: an optional top-level struct with a
    // default makes every flattened field optional and passes its defaults down.
    let mut inner = Schema::struct_of([
        ("req_field", Schema::string().into_ref()),
        ("opt_field", Schema::string().optional().with_default(s("child_default")).into_ref()),
    ])
    .optional();
    let default = Struct::new(inner.clone().into_ref()).with("req_field", "req_default");
    inner.default = Some(Value::Struct(default));
    let inner = inner.into_ref();
    let out = apply(&*make(&class("Flatten$Value"), &[]), record(Some((*inner).clone()), Value::Struct(Struct::new(inner.clone()))));
    assert_eq!(
        value_of(&out),
        r#"struct{req_field:string?="req_default",opt_field:string?="child_default"} | {req_field=null,opt_field="child_default"}"#
    );

    assert_eq!(
        value_of(&apply(&*make(&class("Flatten$Value"), &[]), record(Some((*top).clone().optional()), Value::Null))),
        "struct{A:struct{B:struct{int8:int8,string:string},opt:int32?},arr:array<int32>}? | null"
    );
    assert_eq!(value_of(&apply(&*make(&class("Flatten$Value"), &[]), record(None, Value::Null))), "- | null");
    let with_map = Schema::struct_of([("m", Schema::map(Schema::string().into_ref(), Schema::int32().into_ref()).into_ref())]).into_ref();
    assert_eq!(
        apply_err(&*make(&class("Flatten$Value"), &[]), record(Some((*with_map).clone()), st(&with_map, vec![Value::Map(vec![])]))),
        "Flatten: map fields are not supported with a schema (field `m`)"
    );
}

// InsertFieldTest.copySchemaAndInsertConfiguredFields / schemalessInsertConfiguredFields /
// insertConfiguredFieldsIntoTombstoneEvent* / insertIntoNullKeyLeavesRecordUnchanged.
#[test]
fn transform_insert_field() {
    let cfg = [
        ("topic.field", "topic_field!"),
        ("partition.field", "partition_field"),
        ("timestamp.field", "timestamp_field?"),
        ("static.field", "instance_id"),
        ("static.value", "my-instance-id"),
    ];
    let t = make(&class("InsertField$Value"), &cfg);
    let schema = Schema::struct_of([("magic", Schema::int64().into_ref())]).named("name").with_version(1).with_doc("doc").into_ref();
    let out = apply(&*t, record(Some((*schema).clone()), st(&schema, vec![Value::Int64(42)])));
    assert_eq!(
        value_of(&out),
        r#"struct<name@1>{magic:int64,topic_field:string,partition_field:int32?,timestamp_field:Timestamp?,instance_id:string?} | {magic=42i64,topic_field="test",partition_field=0i32,timestamp_field=1483425000000i64,instance_id="my-instance-id"}"#
    );
    assert_eq!(out.value_schema.as_ref().unwrap().doc.as_deref(), Some("doc"));
    let out = apply(&*t, record(None, map(&[("magic", Value::Int64(42))])));
    assert_eq!(
        value_of(&out),
        r#"- | {"magic":42i64,"topic_field":"test","partition_field":0i32,"timestamp_field":1483425000000i64,"instance_id":"my-instance-id"}"#
    );
    assert_eq!(value_of(&apply(&*t, record(None, Value::Null))), "- | null");
    assert_eq!(value_of(&apply(&*t, record(Some((*schema).clone()), Value::Null))), "struct<name@1>{magic:int64} | null");
    let tk = make(&class("InsertField$Key"), &cfg);
    let out = apply(&*tk, keyed(None, Value::Null, None, map(&[])));
    assert_eq!(key_of(&out), "- | null");
    // offset.field needs a sink record.
    let off = make(&class("InsertField$Value"), &[("offset.field", "off")]);
    assert!(apply_err(&*off, record(None, map(&[]))).contains("offset.field"));
    let sink = TransformRecord::from(sluice_api::SinkRecord {
        topic: "t".into(),
        partition: 2,
        offset: 99,
        value: map(&[]),
        ..Default::default()
    });
    assert_eq!(value_of(&apply(&*off, sink)), r#"- | {"off":99i64}"#);
    assert!(config_error(&class("InsertField$Value"), &[]).contains("no field insertion configured"));
    assert!(config_error(&class("InsertField$Value"), &[("static.field", "x")]).contains("static.value"));
}

// MaskFieldTest.testSchemaless / testWithSchema / testSchemalessWithReplacement /
// testWithSchemaUnsupportedReplacementType / testReplacementTypeMismatch / testEmptyStringReplacementValue.
#[test]
fn transform_mask_field() {
    let t = make(&class("MaskField$Value"), &[("fields", "bool,byte,int,long,float,string,list,map,absent")]);
    let out = apply(
        &*t,
        record(
            None,
            map(&[
                ("magic", i32s(42)),
                ("bool", Value::Boolean(true)),
                ("byte", Value::Int8(42)),
                ("int", i32s(42)),
                ("long", Value::Int64(42)),
                ("float", Value::Float32(42.0)),
                ("string", s("55.121.20.20")),
                ("list", Value::Array(vec![s("one")])),
                ("map", map(&[("a", s("b"))])),
            ]),
        ),
    );
    assert_eq!(
        value_of(&out),
        r#"- | {"magic":42i32,"bool":false,"byte":0i8,"int":0i32,"long":0i64,"float":0.0f32,"string":"","list":[],"map":{},"absent":null}"#
    );

    let schema = Schema::struct_of([
        ("magic", Schema::int32().into_ref()),
        ("date", Schema::date().into_ref()),
        ("dec", Schema::decimal(2).into_ref()),
        ("string", Schema::string().into_ref()),
    ])
    .into_ref();
    let v = || st(&schema, vec![i32s(42), i32s(100), Value::Bytes(decimal_bytes(12345)), s("secret")]);
    let t = make(&class("MaskField$Value"), &[("fields", "date,dec,string")]);
    assert_eq!(
        value_of(&apply(&*t, record(Some((*schema).clone()), v()))),
        r#"struct{magic:int32,date:Date,dec:Decimal(2),string:string} | {magic=42i32,date=0i32,dec=0x00,string=""}"#
    );
    let t = make(&class("MaskField$Value"), &[("fields", "magic,dec,string"), ("replacement", "12")]);
    assert_eq!(
        value_of(&apply(&*t, record(Some((*schema).clone()), v()))),
        r#"struct{magic:int32,date:Date,dec:Decimal(2),string:string} | {magic=12i32,date=100i32,dec=0x04b0,string="12"}"#
    );
    let t = make(&class("MaskField$Value"), &[("fields", "date"), ("replacement", "12")]);
    assert!(apply_err(&*t, record(Some((*schema).clone()), v())).contains("with a custom replacement"));
    let t = make(&class("MaskField$Value"), &[("fields", "magic"), ("replacement", "foo")]);
    assert_eq!(
        apply_err(&*t, record(Some((*schema).clone()), v())),
        "MaskField: cannot mask field `magic`: replacement 'foo' is not a valid int32"
    );
    assert!(config_error(&class("MaskField$Value"), &[("fields", "a"), ("replacement", "")]).contains("replacement"));
    // A tombstone is an error, as Kafka's requireMap/requireStruct on null.
    assert!(apply_err(&*make(&class("MaskField$Value"), &[("fields", "a")]), record(None, Value::Null)).contains("found null"));
}

// ReplaceFieldTest.schemaless / withSchema / tombstone* / testReplaceNullWithDefaultConfigOnValue.
#[test]
fn transform_replace_field() {
    let t = make(&class("ReplaceField$Value"), &[("exclude", "dont"), ("renames", "abc:xyz,foo:bar")]);
    let out =
        apply(&*t, record(None, map(&[("dont", s("whatever")), ("abc", i32s(42)), ("foo", Value::Boolean(true)), ("etc", s("etc"))])));
    assert_eq!(value_of(&out), r#"- | {"xyz":42i32,"bar":true,"etc":"etc"}"#);
    let t = make(&class("ReplaceField$Value"), &[("include", "abc,foo"), ("renames", "abc:xyz,foo:bar")]);
    let schema = Schema::struct_of([
        ("dont", Schema::string().into_ref()),
        ("abc", Schema::int32().into_ref()),
        ("foo", Schema::boolean().into_ref()),
        ("etc", Schema::string().into_ref()),
    ])
    .into_ref();
    let out = apply(&*t, record(Some((*schema).clone()), st(&schema, vec![s("whatever"), i32s(42), Value::Boolean(true), s("etc")])));
    assert_eq!(value_of(&out), "struct{xyz:int32,bar:boolean} | {xyz=42i32,bar=true}");
    assert_eq!(value_of(&apply(&*t, record(None, Value::Null))), "- | null");
    assert_eq!(
        value_of(&apply(&*t, record(Some((*schema).clone()), Value::Null))),
        "struct{dont:string,abc:int32,foo:boolean,etc:string} | null"
    );
    let with_default = Schema::struct_of([("a", Schema::int32().optional().with_default(i32s(9)).into_ref())]).into_ref();
    let t = make(&class("ReplaceField$Value"), &[("renames", "a:b"), ("replace.null.with.default", "false")]);
    assert_eq!(
        value_of(&apply(&*t, record(Some((*with_default).clone()), st(&with_default, vec![Value::Null])))),
        "struct{b:int32?=9i32} | {b=null}"
    );
    assert!(config_error(&class("ReplaceField$Value"), &[("renames", "a:b:c")]).contains("invalid rename mapping"));
}

// TimestampConverterTest: 1970-01-02T00:00:01.234Z in every representation, with the test's
// pattern "yyyy MM dd HH mm ss SSS z"; unix precisions; schemaless inference.
#[test]
fn transform_timestamp_converter() {
    const MS: i64 = 86_401_234;
    const FMT: &str = "yyyy MM dd HH mm ss SSS z";
    let conv = |target: &str, extra: &[(&str, &str)]| {
        let mut p = vec![("target.type", target), ("format", FMT)];
        p.extend_from_slice(extra);
        make(&class("TimestampConverter$Value"), &p)
    };
    let ts = || record(Some(Schema::timestamp()), Value::Int64(MS));
    assert_eq!(value_of(&apply(&*conv("Date", &[]), ts())), "Date | 1i32");
    assert_eq!(value_of(&apply(&*conv("Time", &[]), ts())), "Time | 1234i32");
    assert_eq!(value_of(&apply(&*conv("unix", &[]), ts())), "int64 | 86401234i64");
    assert_eq!(value_of(&apply(&*conv("unix", &[("unix.precision", "seconds")]), ts())), "int64 | 86401i64");
    assert_eq!(value_of(&apply(&*conv("unix", &[("unix.precision", "microseconds")]), ts())), "int64 | 86401234000i64");
    assert_eq!(value_of(&apply(&*conv("string", &[]), ts())), r#"string | "1970 01 02 00 00 01 234 UTC""#);
    assert_eq!(
        value_of(&apply(&*conv("Timestamp", &[]), record(Some(Schema::string()), s("1970 01 02 00 00 01 234 UTC")))),
        "Timestamp | 86401234i64"
    );
    assert_eq!(
        value_of(&apply(
            &*conv("Timestamp", &[("unix.precision", "nanoseconds")]),
            record(Some(Schema::int64()), Value::Int64(86_401_234_567_890))
        )),
        "Timestamp | 86401234i64"
    );
    assert_eq!(value_of(&apply(&*conv("Timestamp", &[]), record(Some(Schema::date()), i32s(1)))), "Timestamp | 86400000i64");
    // Schemaless: a Long is unix, a String is parsed with the format.
    assert_eq!(value_of(&apply(&*conv("Date", &[]), record(None, Value::Int64(MS)))), "- | 1i32");
    assert_eq!(value_of(&apply(&*conv("unix", &[]), record(None, s("1970 01 02 00 00 01 234 UTC")))), "- | 86401234i64");
    // A field of a struct; optional fields stay optional; a null value passes (testWithSchemaNullFieldConversion).
    let t = make(&class("TimestampConverter$Value"), &[("field", "ts"), ("target.type", "unix")]);
    let schema = Schema::struct_of([("ts", Schema::timestamp().optional().into_ref()), ("other", Schema::string().into_ref())]).into_ref();
    let out = apply(&*t, record(Some((*schema).clone()), st(&schema, vec![Value::Int64(MS), s("x")])));
    assert_eq!(value_of(&out), r#"struct{ts:int64?,other:string} | {ts=86401234i64,other="x"}"#);
    let out = apply(&*t, record(Some((*schema).clone()), st(&schema, vec![Value::Null, s("x")])));
    assert_eq!(value_of(&out), r#"struct{ts:int64?,other:string} | {ts=null,other="x"}"#);
    assert_eq!(value_of(&apply(&*t, record(None, Value::Null))), "- | null");
    assert_eq!(value_of(&apply(&*t, record(None, map(&[("ts", Value::Int64(MS))])))), r#"- | {"ts":86401234i64}"#);
    // Errors: a string that does not match, a type that holds no timestamp, config.
    assert!(apply_err(&*conv("unix", &[]), record(Some(Schema::string()), s("not a date"))).contains("could not parse timestamp"));
    assert!(apply_err(&*conv("unix", &[]), record(Some(Schema::int32()), i32s(1))).contains("does not hold a timestamp"));
    assert!(config_error(&class("TimestampConverter$Value"), &[("target.type", "string")]).contains("needs a format"));
    assert!(config_error(&class("TimestampConverter$Value"), &[("target.type", "invalid")]).contains("target.type"));
    assert!(config_error(&class("TimestampConverter$Value"), &[("target.type", "unix"), ("unix.precision", "hours")])
        .contains("unix.precision"));
    assert!(config_error(&class("TimestampConverter$Value"), &[("target.type", "string"), ("format", "bad-pattern")]).contains("format"));
}
