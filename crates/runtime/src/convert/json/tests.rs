//! Reading (Kafka's `*ToConnect` vectors), round trips for every schema type, error
//! messages and configuration.

use std::sync::Arc;

use sluice_api::schema::logical;
use sluice_api::{ConnectError, Props, Schema, SchemaRef, SchemaType, Struct, Value};

use super::{JsonConverter, DESERIALIZATION_FAILED_MESSAGE, ENVELOPE_REQUIRED_MESSAGE};
use crate::convert::{Converter, ConverterType};

fn props(pairs: &[(&str, &str)]) -> Props {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn json(pairs: &[(&str, &str)]) -> JsonConverter {
    JsonConverter::from_props(&props(pairs), ConverterType::Value).unwrap()
}

fn read(c: &JsonConverter, text: &str) -> (Option<SchemaRef>, Value) {
    c.to_connect("topic", Some(text.as_bytes())).unwrap_or_else(|e| panic!("{text}: {}", e.trace()))
}

fn read_err(c: &JsonConverter, text: &str) -> ConnectError {
    match c.to_connect("topic", Some(text.as_bytes())) {
        Ok(v) => panic!("{text} read as {v:?}"),
        Err(e) => e,
    }
}

fn some(s: Schema) -> Option<SchemaRef> {
    Some(s.into_ref())
}

/// The `*ToConnect` tests of Kafka's JsonConverterTest, input text verbatim.
#[test]
fn kafka_to_connect_vectors() {
    let c = json(&[]);
    let cases: Vec<(&str, Option<SchemaRef>, Value)> = vec![
        // testConnectSchemaMetadataTranslation
        (r#"{ "schema": { "type": "boolean" }, "payload": true }"#, some(Schema::boolean()), Value::Boolean(true)),
        (r#"{ "schema": { "type": "boolean", "optional": true }, "payload": null }"#, some(Schema::boolean().optional()), Value::Null),
        (
            r#"{ "schema": { "type": "boolean", "default": true }, "payload": null }"#,
            some(Schema::boolean().with_default(Value::Boolean(true))),
            Value::Boolean(true),
        ),
        (
            r#"{ "schema": { "type": "boolean", "optional": false, "name": "bool", "version": 2, "doc": "the documentation", "parameters": { "foo": "bar" }}, "payload": true }"#,
            some(Schema::boolean().named("bool").with_version(2).with_doc("the documentation").with_parameter("foo", "bar")),
            Value::Boolean(true),
        ),
        // booleanToConnect, byteToConnect, shortToConnect, intToConnect, longToConnect
        (r#"{ "schema": { "type": "boolean" }, "payload": false }"#, some(Schema::boolean()), Value::Boolean(false)),
        (r#"{ "schema": { "type": "int8" }, "payload": 12 }"#, some(Schema::int8()), Value::Int8(12)),
        (r#"{ "schema": { "type": "int16" }, "payload": 12 }"#, some(Schema::int16()), Value::Int16(12)),
        (r#"{ "schema": { "type": "int32" }, "payload": 12 }"#, some(Schema::int32()), Value::Int32(12)),
        (r#"{ "schema": { "type": "int64" }, "payload": 4398046511104 }"#, some(Schema::int64()), Value::Int64(4_398_046_511_104)),
        // numberWithLeadingZerosToConnect
        (r#"{ "schema": { "type": "int8" }, "payload": 0012 }"#, some(Schema::int8()), Value::Int8(12)),
        (r#"{ "schema": { "type": "int16" }, "payload": 000123 }"#, some(Schema::int16()), Value::Int16(123)),
        (r#"{ "schema": { "type": "int32" }, "payload": 000012345 }"#, some(Schema::int32()), Value::Int32(12345)),
        (r#"{ "schema": { "type": "int64" }, "payload": 00000123456789 }"#, some(Schema::int64()), Value::Int64(123_456_789)),
        // floatToConnect, doubleToConnect, bytesToConnect, stringToConnect
        (r#"{ "schema": { "type": "float" }, "payload": 12.34 }"#, some(Schema::float32()), Value::Float32(12.34)),
        (r#"{ "schema": { "type": "double" }, "payload": 12.34 }"#, some(Schema::float64()), Value::Float64(12.34)),
        (
            r#"{ "schema": { "type": "bytes" }, "payload": "dGVzdC1zdHJpbmc=" }"#,
            some(Schema::bytes()),
            Value::Bytes(b"test-string".to_vec()),
        ),
        (r#"{ "schema": { "type": "string" }, "payload": "foo-bar-baz" }"#, some(Schema::string()), Value::from("foo-bar-baz")),
        // arrayToConnect, mapToConnectStringKeys, mapToConnectNonStringKeys
        (
            r#"{ "schema": { "type": "array", "items": { "type" : "int32" } }, "payload": [1, 2, 3] }"#,
            some(Schema::array(Schema::int32().into_ref())),
            Value::Array(vec![Value::Int32(1), Value::Int32(2), Value::Int32(3)]),
        ),
        (
            r#"{ "schema": { "type": "map", "keys": { "type" : "string" }, "values": { "type" : "int32" } }, "payload": { "key1": 12, "key2": 15} }"#,
            some(Schema::map(Schema::string().into_ref(), Schema::int32().into_ref())),
            Value::Map(vec![(Value::from("key1"), Value::Int32(12)), (Value::from("key2"), Value::Int32(15))]),
        ),
        (
            r#"{ "schema": { "type": "map", "keys": { "type" : "int32" }, "values": { "type" : "int32" } }, "payload": [ [1, 12], [2, 15] ] }"#,
            some(Schema::map(Schema::int32().into_ref(), Schema::int32().into_ref())),
            Value::Map(vec![(Value::Int32(1), Value::Int32(12)), (Value::Int32(2), Value::Int32(15))]),
        ),
        // nullSchemaPrimitiveToConnect
        (r#"{ "schema": null, "payload": null }"#, None, Value::Null),
        (r#"{ "schema": null, "payload": true }"#, None, Value::Boolean(true)),
        (r#"{ "schema": null, "payload": 12 }"#, None, Value::Int64(12)),
        (r#"{ "schema": null, "payload": 12.24 }"#, None, Value::Float64(12.24)),
        (r#"{ "schema": null, "payload": "a string" }"#, None, Value::from("a string")),
        (r#"{ "schema": null, "payload": [1, "2", 3] }"#, None, Value::Array(vec![Value::Int64(1), Value::from("2"), Value::Int64(3)])),
        (
            r#"{ "schema": null, "payload": { "field1": 1, "field2": 2} }"#,
            None,
            Value::Map(vec![(Value::from("field1"), Value::Int64(1)), (Value::from("field2"), Value::Int64(2))]),
        ),
        // decimalToConnect, decimalToConnectOptional, ...WithDefaultValue, numericDecimal...
        (
            r#"{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": { "scale": "2" } }, "payload": "AJw=" }"#,
            some(Schema::decimal(2)),
            Value::Bytes(vec![0x00, 0x9C]),
        ),
        (
            r#"{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "optional": true, "parameters": { "scale": "2" } }, "payload": null }"#,
            some(Schema::decimal(2).optional()),
            Value::Null,
        ),
        (
            r#"{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "default": "AJw=", "parameters": { "scale": "2" } }, "payload": null }"#,
            some(Schema::decimal(2).with_default(Value::Bytes(vec![0x00, 0x9C]))),
            Value::Bytes(vec![0x00, 0x9C]),
        ),
        (
            r#"{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": { "scale": "2" } }, "payload": 1.56 }"#,
            some(Schema::decimal(2)),
            Value::Bytes(vec![0x00, 0x9C]),
        ),
        (
            r#"{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": { "scale": "4" } }, "payload": 1.5600 }"#,
            some(Schema::decimal(4)),
            Value::Bytes(vec![0x3C, 0xF0]),
        ),
        // highPrecisionNumericDecimalToConnect: 123456789123456789 = 0x01B69B4BACD05F15
        (
            r#"{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": { "scale": "17" } }, "payload": 1.23456789123456789 }"#,
            some(Schema::decimal(17)),
            Value::Bytes(vec![0x01, 0xB6, 0x9B, 0x4B, 0xAC, 0xD0, 0x5F, 0x15]),
        ),
        // dateToConnect, timeToConnect, timestampToConnect and their optional/default forms
        (
            r#"{ "schema": { "type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1 }, "payload": 10000 }"#,
            some(Schema::date()),
            Value::Int32(10_000),
        ),
        (
            r#"{ "schema": { "type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1, "optional": true, "default": 0 }, "payload": null }"#,
            some(Schema::date().optional().with_default(Value::Int32(0))),
            Value::Int32(0),
        ),
        (
            r#"{ "schema": { "type": "int32", "name": "org.apache.kafka.connect.data.Time", "version": 1 }, "payload": 14400000 }"#,
            some(Schema::time()),
            Value::Int32(14_400_000),
        ),
        (
            r#"{ "schema": { "type": "int32", "name": "org.apache.kafka.connect.data.Time", "version": 1, "optional": true }, "payload": null }"#,
            some(Schema::time().optional()),
            Value::Null,
        ),
        (
            r#"{ "schema": { "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1 }, "payload": 4000000000 }"#,
            some(Schema::timestamp()),
            Value::Int64(4_000_000_000),
        ),
        (
            r#"{ "schema": { "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,  "optional": true, "default": 42 }, "payload": null }"#,
            some(Schema::timestamp().optional().with_default(Value::Int64(42))),
            Value::Int64(42),
        ),
    ];
    for (text, schema, value) in cases {
        assert_eq!(read(&c, text), (schema, value), "{text}");
    }
}

#[test]
fn kafka_struct_vectors() {
    let c = json(&[]);
    // structToConnect
    let schema = Schema::struct_of([("field1", Schema::boolean().into_ref()), ("field2", Schema::string().into_ref())]).into_ref();
    let (s, v) = read(
        &c,
        r#"{ "schema": { "type": "struct", "fields": [{ "field": "field1", "type": "boolean" }, { "field": "field2", "type": "string" }] }, "payload": { "field1": true, "field2": "string" } }"#,
    );
    assert_eq!(s.as_ref(), Some(&schema));
    assert_eq!(v, Value::Struct(Struct::new(schema).with("field1", true).with("field2", "string")));
    // structWithOptionalFieldToConnect
    let schema =
        Schema::struct_of([("optional", Schema::string().optional().into_ref()), ("required", Schema::string().into_ref())]).into_ref();
    let (s, v) = read(
        &c,
        r#"{ "schema": { "type": "struct", "fields": [{ "field":"optional", "type": "string", "optional": true }, {  "field": "required", "type": "string" }] }, "payload": { "required": "required" } }"#,
    );
    assert_eq!(s.as_ref(), Some(&schema));
    assert_eq!(v, Value::Struct(Struct::new(schema).with("required", "required")));
    // deserializeFieldNullToDefault / deserializeFieldNullToNull, deserializeNullToDefault / ...ToNull
    let text = r#"{"schema":{"type":"struct","fields":[{"field":"field1","type":"string","optional":true,"default":"default"}],"optional":false},"payload":{"field1":null}}"#;
    assert_eq!(read(&c, text).1.as_struct().and_then(|s| s.get("field1")).cloned(), Some(Value::from("default")));
    let keep = json(&[("replace.null.with.default", "false")]);
    assert_eq!(read(&keep, text).1.as_struct().and_then(|s| s.get("field1")).cloned(), Some(Value::Null));
    let text = r#"{"schema":{"type":"string","optional":true,"default":"default"},"payload":null}"#;
    assert_eq!(read(&c, text).1, Value::from("default"));
    assert_eq!(read(&keep, text).1, Value::Null);
}

#[test]
fn null_and_empty_input() {
    for c in [json(&[]), json(&[("schemas.enable", "false")])] {
        // nullToConnect, emptyBytesToConnect (and, unlike Kafka, empty with schemas on)
        assert_eq!(c.to_connect("topic", None).unwrap(), (None, Value::Null));
        assert_eq!(c.to_connect("topic", Some(b"")).unwrap(), (None, Value::Null));
        assert_eq!(c.to_connect("topic", Some(b"  \n")).unwrap(), (None, Value::Null));
    }
    let c = json(&[("schemas.enable", "false")]);
    // noSchemaToConnect, schemalessWithEmptyFieldValueToConnect
    assert_eq!(read(&c, "true"), (None, Value::Boolean(true)));
    assert_eq!(
        read(&c, r#"{ "a": "", "b": null}"#).1,
        Value::Map(vec![(Value::from("a"), Value::from("")), (Value::from("b"), Value::Null)])
    );
}

fn round_trip_cases() -> Vec<(Schema, Value)> {
    let inner =
        Schema::struct_of([("x", Schema::int16().into_ref()), ("tags", Schema::array(Schema::string().into_ref()).optional().into_ref())])
            .named("com.example.Inner")
            .with_version(2)
            .with_doc("an inner struct")
            .with_parameter("p", "q")
            .into_ref();
    let outer = Schema::struct_of([
        ("inner", inner.clone()),
        ("maybe", inner.clone().as_ref().clone().optional().into_ref()),
        ("when", Schema::timestamp().into_ref()),
        ("amount", Schema::decimal(3).optional().into_ref()),
    ])
    .into_ref();
    let inner_value =
        Struct::new(inner.clone()).with("x", Value::Int16(-5)).with("tags", Value::Array(vec![Value::from("a"), Value::from("b")]));
    let outer_value =
        Struct::from_values(outer.clone(), vec![Value::Struct(inner_value), Value::Null, Value::Int64(-1), Value::Bytes(vec![0xFF, 0x38])]);
    vec![
        (Schema::boolean(), Value::Boolean(false)),
        (Schema::int8(), Value::Int8(i8::MIN)),
        (Schema::int16(), Value::Int16(i16::MAX)),
        (Schema::int32(), Value::Int32(i32::MIN)),
        (Schema::int64(), Value::Int64(i64::MAX)),
        (Schema::float32(), Value::Float32(3.4028235e38)),
        (Schema::float32(), Value::Float32(f32::from_bits(1))),
        (Schema::float32(), Value::Float32(f32::INFINITY)),
        (Schema::float64(), Value::Float64(0.1 + 0.2)),
        (Schema::float64(), Value::Float64(f64::from_bits(1))),
        (Schema::float64(), Value::Float64(-1e-300)),
        (Schema::float64(), Value::Float64(f64::NEG_INFINITY)),
        (Schema::string(), Value::from("snow ☃ \u{0} \"quoted\"")),
        (Schema::bytes(), Value::Bytes(vec![])),
        (Schema::bytes(), Value::Bytes((0..=255).collect())),
        (Schema::array(Schema::int64().optional().into_ref()), Value::Array(vec![Value::Int64(1), Value::Null])),
        (Schema::map(Schema::string().into_ref(), Schema::float64().into_ref()), Value::Map(vec![(Value::from("k"), Value::Float64(1.5))])),
        (
            Schema::map(Schema::array(Schema::int8().into_ref()).into_ref(), Schema::string().optional().into_ref()),
            Value::Map(vec![(Value::Array(vec![Value::Int8(1)]), Value::Null), (Value::Array(vec![]), Value::from("v"))]),
        ),
        (Schema::decimal(2), Value::Bytes(vec![0x80])),
        (
            Schema::decimal(0),
            Value::Bytes(vec![0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
        ),
        (Schema::decimal(-3), Value::Bytes(vec![0x01, 0x00])),
        (Schema::date(), Value::Int32(-719_162)),
        (Schema::time(), Value::Int32(86_399_999)),
        (Schema::timestamp(), Value::Int64(1_566_570_894_346)),
        (Schema::string().optional(), Value::Null),
        (Schema::int32().with_default(Value::Int32(7)), Value::Int32(8)),
        (outer.as_ref().clone(), Value::Struct(outer_value)),
    ]
}

#[test]
fn every_schema_type_round_trips() {
    for numeric in ["BASE64", "NUMERIC"] {
        let c = json(&[("decimal.format", numeric)]);
        for (schema, value) in round_trip_cases() {
            let schema = schema.into_ref();
            let bytes = c.from_connect("topic", Some(&schema), &value).unwrap_or_else(|e| panic!("{value:?}: {e}"));
            let text = String::from_utf8(bytes.clone().unwrap()).unwrap();
            let (back_schema, back) = c.to_connect("topic", bytes.as_deref()).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(back_schema.as_ref(), Some(&schema), "{text}");
            assert_eq!(back, value, "{numeric}: {text}");
        }
    }
}

#[test]
fn schemaless_values_round_trip() {
    let c = json(&[("schemas.enable", "false")]);
    let values = [
        Value::Boolean(true),
        Value::Int64(-42),
        Value::Float64(2.5e-8),
        Value::from("x"),
        Value::Array(vec![Value::Int64(1), Value::Null, Value::from("y")]),
        Value::Map(vec![(Value::from("a"), Value::Map(vec![(Value::from("b"), Value::Array(vec![]))]))]),
    ];
    for value in values {
        let bytes = c.from_connect("topic", None, &value).unwrap();
        assert_eq!(c.to_connect("topic", bytes.as_deref()).unwrap(), (None, value));
    }
}

#[test]
fn malformed_json_is_a_fatal_error_with_the_cause() {
    let c = json(&[]);
    let err = read_err(&c, "{\"schema\": {\"type\": \"int32\"}, \"payload\": 1");
    assert!(matches!(err, ConnectError::Fatal { .. }));
    assert_eq!(err.to_string(), DESERIALIZATION_FAILED_MESSAGE);
    // The input is 42 characters long; it ends before the closing brace.
    assert_eq!(
        err.trace(),
        "ConnectException: Converting byte[] to Kafka Connect data failed due to serialization error\n\
         Caused by: unexpected end of input, expected ',' or '}' in an object at line 1, column 43"
    );
    let err = read_err(&json(&[("schemas.enable", "false")]), "{'a': 1}");
    assert!(
        err.trace().contains("Caused by: unexpected character ''', expected a double-quoted field name at line 1, column 2"),
        "{}",
        err.trace()
    );
}

#[test]
fn missing_envelope_has_kafkas_message() {
    let c = json(&[]);
    for text in ["true", "[1]", r#"{"payload": 1}"#, r#"{"schema": null}"#, r#"{"schema": null, "payload": 1, "extra": 2}"#] {
        let err = read_err(&c, text);
        assert_eq!(err.to_string(), ENVELOPE_REQUIRED_MESSAGE, "{text}");
    }
    assert_eq!(
        ENVELOPE_REQUIRED_MESSAGE,
        "JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not contain additional fields. \
         If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter configuration."
    );
    // A repeated member is still one member (Jackson keeps the last).
    assert_eq!(read(&c, r#"{"schema": null, "payload": 1, "payload": 2}"#), (None, Value::Int64(2)));
}

#[test]
fn read_errors_say_what_is_wrong_and_where() {
    let c = json(&[]);
    let cases = [
        (r#"{"schema":{"type":"int32"},"payload":"12"}"#, "Invalid value for INT32 schema: expected a JSON integer but found STRING"),
        (r#"{"schema":{"type":"int8"},"payload":300}"#, "Number 300 is out of range for INT8"),
        (r#"{"schema":{"type":"int32"},"payload":1.5}"#, "Expected an integer for INT32 but found 1.5"),
        (r#"{"schema":{"type":"int32"},"payload":null}"#, "Invalid null value for required INT32 field"),
        (r#"{"schema":{"type":"boolean"},"payload":1}"#, "Invalid value for BOOLEAN schema: expected a JSON boolean but found NUMBER"),
        (r#"{"schema":{"type":"bytes"},"payload":"**"}"#, "Invalid bytes field: not base64"),
        (r#"{"schema":{"type":"struct","fields":[]},"payload":[]}"#, "Structs should be encoded as JSON objects, but found ARRAY"),
        (
            r#"{"schema":{"type":"map","keys":{"type":"int8"},"values":{"type":"int8"}},"payload":{"1":2}}"#,
            "Maps with non-string fields should be encoded as JSON array of tuples, but found OBJECT",
        ),
        (
            r#"{"schema":{"type":"map","keys":{"type":"int8"},"values":{"type":"int8"}},"payload":[[1,2,3]]}"#,
            "Found invalid map entry, expected length 2 but found :3 (at [0])",
        ),
        (
            r#"{"schema":{"type":"map","keys":{"type":"string"},"values":{"type":"int8"}},"payload":[]}"#,
            "Maps with string fields should be encoded as JSON objects, but found ARRAY",
        ),
        (r#"{"schema":{"type":"array"},"payload":[]}"#, "Array schema did not specify the element type"),
        (r#"{"schema":{"type":"map","keys":{"type":"string"}},"payload":{}}"#, "Map schema did not specify the value type"),
        (r#"{"schema":{"type":"struct"},"payload":{}}"#, "Struct schema's \"fields\" argument is not an array."),
        (r#"{"schema":{"type":"struct","fields":[{"type":"int8"}]},"payload":{}}"#, "Struct schema's field name not specified properly"),
        (r#"{"schema":{"type":"uint8"},"payload":1}"#, "Unknown schema type: uint8"),
        (r#"{"schema":{"optional":true},"payload":1}"#, "Schema must contain 'type' field"),
        (r#"{"schema":{"type":"int8","parameters":{"a":1}},"payload":1}"#, "Schema parameters must have string values."),
        (
            r#"{"schema":{"type":"int8","default":"x"},"payload":1}"#,
            "Invalid default value: Invalid value for INT8 schema: expected a JSON integer but found STRING",
        ),
        (
            r#"{"schema":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"1"}},"payload":1.25}"#,
            "Cannot read 1.25 as a Decimal with scale 1: it has more fractional digits than scale 1 allows",
        ),
        (
            r#"{"schema":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal"},"payload":"AA=="}"#,
            "Invalid Decimal schema: scale parameter not found.",
        ),
        (
            r#"{"schema":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"1"}},"payload":true}"#,
            "Invalid type for Decimal, underlying representation should be numeric or bytes but was BOOLEAN",
        ),
        (
            r#"{"schema":{"type":"int32","name":"org.apache.kafka.connect.data.Date"},"payload":1.0}"#,
            "Invalid type for Date, underlying representation should be integer but was NUMBER",
        ),
        (
            r#"{"schema":{"type":"int32","name":"org.apache.kafka.connect.data.Time"},"payload":86400001}"#,
            "Time values must use number of milliseconds greater than 0 and less than 86400000",
        ),
        (
            r#"{"schema":{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp"},"payload":"2020"}"#,
            "Invalid type for Timestamp, underlying representation should be integral but was STRING",
        ),
        (
            r#"{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[{"field":"id","type":"int32"}]}]},"payload":{"after":{"id":"x"}}}"#,
            "Invalid value for INT32 schema: expected a JSON integer but found STRING (at after.id)",
        ),
        (
            r#"{"schema":{"type":"array","items":{"type":"map","keys":{"type":"string"},"values":{"type":"boolean"}}},"payload":[{"a":true},{"b":1}]}"#,
            "Invalid value for BOOLEAN schema: expected a JSON boolean but found NUMBER (at [1][\"b\"])",
        ),
        (r#"{"schema":null,"payload":123456789012345678901234567890}"#, "Number 123456789012345678901234567890 is out of range for INT64"),
    ];
    for (text, message) in cases {
        let err = read_err(&c, text);
        assert!(matches!(err, ConnectError::Fatal { .. }), "{text}");
        assert!(err.to_string().starts_with(message), "{text}\n  got:  {err}\n  want: {message}");
    }
}

#[test]
fn write_errors_say_what_is_wrong() {
    let c = json(&[]);
    let write_err = |schema: Schema, value: Value| c.from_connect("topic", Some(&schema.into_ref()), &value).unwrap_err().to_string();
    // mismatchSchemaJson
    assert_eq!(write_err(Schema::float64(), Value::Boolean(true)), "Invalid type for FLOAT64: BOOLEAN");
    assert_eq!(write_err(Schema::int32(), Value::Null), "Conversion error: null value for field that is required and has no default value");
    assert_eq!(
        write_err(Schema::time(), Value::Int32(-1)),
        "Kafka Connect Time type should not have any date fields set to non-zero values."
    );
    assert_eq!(write_err(Schema::decimal(2), Value::Int32(1)), "Invalid type for Decimal: expected BYTES but was INT32");
    let unscaled = Schema::bytes().named(logical::DECIMAL);
    assert_eq!(write_err(unscaled, Value::Bytes(vec![1])), "Invalid Decimal schema: scale parameter not found.");
    let one = Schema::struct_of([("a", Schema::int32().into_ref())]).into_ref();
    let other = Schema::struct_of([("b", Schema::int32().into_ref())]);
    let value = Value::Struct(Struct::new(one.clone()).with("a", 1));
    assert_eq!(write_err(other, value.clone()), "Mismatching schema: the struct value's own schema differs from the schema given for it");
    let nested = Schema::struct_of([("inner", one.clone())]).into_ref();
    let bad = Value::Struct(Struct::from_values(nested.clone(), vec![Value::Struct(Struct::from_values(one, vec![Value::from("x")]))]));
    assert_eq!(write_err(nested.as_ref().clone(), bad), "Invalid type for INT32: STRING (at inner.a)");
    let schemaless = json(&[("schemas.enable", "false")]).from_connect("topic", None, &value).unwrap_err();
    assert_eq!(schemaless.to_string(), "Mismatching schema: a struct value must be given with its schema (got no schema)");
}

#[test]
fn configuration() {
    let def = JsonConverter::config_def();
    let names: Vec<&str> = def.keys().iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["converter.type", "schemas.enable", "schemas.cache.size", "decimal.format", "replace.null.with.default"]);
    let c = json(&[("schemas.enable", "FALSE"), ("decimal.format", "numeric"), ("schemas.cache.size", "5"), ("converter.type", "header")]);
    assert!(!c.config().schemas_enable);
    assert_eq!(c.config().decimal_format, super::DecimalFormat::Numeric);
    assert_eq!(c.config().schemas_cache_size, 5);
    // The caller's role wins over a converter.type property, as in Kafka's configure(configs, isKey).
    assert_eq!(c.config().converter_type, ConverterType::Value);
    let err = JsonConverter::from_props(&props(&[("decimal.format", "HEX")]), ConverterType::Key).err().unwrap();
    assert!(matches!(err, ConnectError::Config { .. }));
    assert_eq!(err.to_string(), "invalid value for configuration decimal.format: Invalid value HEX for configuration decimal.format: String must be one of: BASE64, NUMERIC");
    let err = JsonConverter::from_props(&props(&[("schemas.enable", "yes")]), ConverterType::Key).err().unwrap();
    assert!(err.to_string().contains("schemas.enable"), "{err}");
}

#[test]
fn schemas_are_cached_by_identity_and_text() {
    let c = json(&[]);
    let schema = Schema::int32().optional().into_ref();
    for _ in 0..3 {
        c.from_connect("topic", Some(&schema), &Value::Int32(1)).unwrap();
    }
    assert_eq!(c.written_schemas.len(), 1);
    let text = r#"{"schema":{"type":"int32","optional":true},"payload":1}"#;
    let first = read(&c, text).0.unwrap();
    let second = read(&c, text).0.unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &second));
    read(&c, r#"{"schema":{"type":"int32", "optional":true},"payload":1}"#);
    assert_eq!(c.read_schemas.len(), 2);
    // No caching at size zero, and still correct.
    let uncached = json(&[("schemas.cache.size", "0")]);
    assert_eq!(read(&uncached, text).1, Value::Int32(1));
    assert_eq!(uncached.read_schemas.len(), 0);
    assert_eq!(schema.kind, SchemaType::Int32);
}

/// Records that repeat the last schema byte for byte skip its parsing; every other shape
/// reads (and fails) exactly as through the full path.
#[test]
fn a_repeated_schema_reads_like_the_full_path() {
    let schema = r#"{"type":"struct","fields":[{"field":"id","type":"int32"},{"field":"d","type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}}]}"#;
    let cases = [
        format!(r#"{{"schema":{schema},"payload":{{"id":1,"d":"AOE="}}}}"#),
        format!(" {{ \"schema\" : {schema} ,\n \"payload\" : {{\"id\":2,\"d\":null}} }} "),
        format!(r#"{{"schema":{schema},"payload":{{"id":3,"d":"AOE="}},"payload":{{"id":4,"d":null}}}}"#),
        format!(r#"{{"schema":{schema},"payload":{{"id":5}},"extra":1}}"#),
        format!(r#"{{"schema":{schema},"payload":{{"id":"x"}}}}"#),
        format!(r#"{{"schema":{schema},"payload":{{"id":6,"d":"AOE="}}"#),
        format!(r#"{{"schema":{schema}}}"#),
        format!(r#"{{"schema":{},"payload":true}}"#, r#"{"type":"boolean"}"#),
        format!(r#"{{"schema":{schema},"payload":{{"id":7,"d":"AOE="}}}}"#),
    ];
    let warm = json(&[]);
    read(&warm, &cases[0]);
    for text in &cases {
        let cold = json(&[]).to_connect("topic", Some(text.as_bytes()));
        let hot = warm.to_connect("topic", Some(text.as_bytes()));
        match (cold, hot) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
            (Err(a), Err(b)) => assert_eq!(a.trace(), b.trace(), "{text}"),
            (a, b) => panic!("{text}: {a:?} vs {b:?}"),
        }
        // The warm converter's last schema may have changed; warm it again.
        read(&warm, &cases[0]);
    }
    let (s, v) = read(&warm, &cases[0]);
    assert!(Arc::ptr_eq(s.as_ref().unwrap(), read(&warm, &cases[8]).0.as_ref().unwrap()), "one schema object for one schema text");
    assert_eq!(v.as_struct().unwrap().get("id"), Some(&Value::Int32(1)));
}

#[test]
fn integers_read_alike_whether_short_long_or_written_as_decimals() {
    let c = json(&[]);
    let int64 = |text: &str| read(&c, &format!(r#"{{"schema":{{"type":"int64"}},"payload":{text}}}"#)).1;
    let cases = [
        ("0", 0),
        ("-0", 0),
        ("0012", 12),
        ("-7", -7),
        ("999999999999999999", 999_999_999_999_999_999),
        ("-999999999999999999", -999_999_999_999_999_999),
        ("9223372036854775807", i64::MAX),
        ("-9223372036854775808", i64::MIN),
        ("42.0", 42),
        ("-42.000", -42),
    ];
    for (text, want) in cases {
        assert_eq!(int64(text), Value::Int64(want), "{text}");
    }
    let err = read_err(&c, r#"{"schema":{"type":"int64"},"payload":9223372036854775808}"#).to_string();
    assert!(err.contains("Number 9223372036854775808 is out of range for INT64"), "{err}");
    let err = read_err(&c, r#"{"schema":{"type":"int32"},"payload":2147483648}"#).to_string();
    assert!(err.contains("Number 2147483648 is out of range for INT32"), "{err}");
}

/// Mutations of valid records (characters flipped, cut, repeated, inserted), read with
/// schemas on and off: each read gives a value or an error, never a panic, and whatever
/// reads back writes again without one. A fixed seed keeps the run reproducible
/// (`SLUICE_FUZZ_SEED` picks another); a panic names the input.
#[test]
fn mutated_records_never_panic() {
    let seeds = [
        r#"{"schema":{"type":"struct","fields":[{"field":"id","type":"int32"},{"field":"name","type":"string","optional":true},{"field":"tags","type":"array","items":{"type":"string"}},{"field":"attrs","type":"map","keys":{"type":"string"},"values":{"type":"int64"}},{"field":"price","type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}},{"field":"at","type":"int64","name":"org.apache.kafka.connect.data.Timestamp"},{"field":"day","type":"int32","name":"org.apache.kafka.connect.data.Date"},{"field":"raw","type":"bytes","optional":true}],"optional":false,"name":"shop.Order"},"payload":{"id":7,"name":"é","tags":["a","b"],"attrs":{"x":1},"price":"AJA=","at":1700000000000,"day":19000,"raw":"AQID"}}"#,
        r#"{"schema":{"type":"array","items":{"type":"map","keys":{"type":"int32"},"values":{"type":"float64"}}},"payload":[[[1,2.5],[3,-0.0]]]}"#,
        r#"{"schema":{"type":"float32","optional":true,"default":1.5},"payload":null}"#,
        r#"{"schema":{"type":"boolean"},"payload":true}"#,
        r#"{"a":[1,2,{"b":null}],"c":"d\u00e9","e":1e308,"f":-9223372036854775808}"#,
        r#"[true,false,null,"x",0.1]"#,
    ];
    let with = json(&[("converter.type", "value"), ("schemas.enable", "true"), ("decimal.format", "NUMERIC")]);
    let without = json(&[("converter.type", "value"), ("schemas.enable", "false")]);
    let inserts = ['{', '}', '[', ']', '"', ':', ',', '-', '0', '9', 'e', '.', '\\', 'n', 'é', ' '];
    let mut rng = fastrand::Rng::with_seed(std::env::var("SLUICE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x15));
    for _ in 0..40_000 {
        let mut chars: Vec<char> = seeds[rng.usize(..seeds.len())].chars().collect();
        for _ in 0..rng.usize(1..4) {
            let at = rng.usize(..=chars.len());
            match rng.u8(..4) {
                0 if at < chars.len() => chars[at] = inserts[rng.usize(..inserts.len())],
                1 => chars.truncate(at),
                2 => {
                    let piece: Vec<char> = chars[at..].to_vec();
                    chars.extend(piece);
                }
                _ => chars.insert(at, inserts[rng.usize(..inserts.len())]),
            }
        }
        let text: String = chars.into_iter().collect();
        for c in [&with, &without] {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if let Ok((schema, value)) = c.to_connect("topic", Some(text.as_bytes())) {
                    let _ = c.from_connect("topic", schema.as_ref(), &value);
                }
            }));
            assert!(outcome.is_ok(), "JsonConverter panicked on {text:?}");
        }
    }
}
