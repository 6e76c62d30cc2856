//! `org.apache.kafka.connect.storage.SimpleHeaderConverter`, the worker's default header
//! converter: each header value is written as its UTF-8 text form and read back with its
//! type inferred from the text (see [`values`] for both directions and where they differ
//! from Kafka).
//!
//! Header bytes that are not UTF-8 are returned unchanged with a bytes schema (Kafka's
//! fallback for a value it cannot parse). Kafka would first decode them with replacement
//! characters and parse the damaged text.

mod values;

use sluice_api::{ConfigDef, ConnectError, ConnectResult, Schema, SchemaRef, Value};

use super::HeaderConverter;

pub const CLASS: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";

/// Kafka's SimpleHeaderConverter. It has no configuration.
#[derive(Debug, Clone, Default)]
pub struct SimpleHeaderConverter;

impl SimpleHeaderConverter {
    pub fn new() -> Self {
        Self
    }

    /// Empty, as in Kafka (not even `converter.type`).
    pub fn config_def() -> ConfigDef {
        ConfigDef::new()
    }
}

impl HeaderConverter for SimpleHeaderConverter {
    fn from_connect_header(&self, topic: &str, key: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        if value.is_null() {
            return Ok(None);
        }
        values::convert_to_string(schema.map(|s| &**s), value)
            .map(|s| Some(s.into_bytes()))
            .map_err(|e| ConnectError::fatal(format!("Failed to serialize value for header '{key}' on topic '{topic}': {e}")))
    }

    fn to_connect_header(&self, topic: &str, key: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        let Some(bytes) = bytes else {
            return Ok((None, Value::Null));
        };
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(values::parse_string(text)),
            Err(_) => {
                tracing::debug!(topic, header = key, "header value is not UTF-8; keeping it as bytes");
                Ok((Some(Schema::bytes().into_ref()), Value::Bytes(bytes.to_vec())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::SchemaType;

    fn write(schema: Option<Schema>, value: Value) -> String {
        let schema = schema.map(Schema::into_ref);
        String::from_utf8(SimpleHeaderConverter.from_connect_header("t", "h", schema.as_ref(), &value).unwrap().unwrap()).unwrap()
    }

    fn read(text: &str) -> (Option<SchemaRef>, Value) {
        SimpleHeaderConverter.to_connect_header("t", "h", Some(text.as_bytes())).unwrap()
    }

    /// (schema, value) written, the text, and the (schema, value) it reads back as.
    type Case = (Option<Schema>, Value, &'static str, Option<Schema>, Value);

    /// Written text and the schema/value it reads back as, following Kafka's
    /// `SimpleHeaderConverterTest` and `Values`.
    #[test]
    fn header_vectors() {
        let cases: Vec<Case> = vec![
            (Some(Schema::string()), Value::from("foo"), "foo", Some(Schema::string()), Value::from("foo")),
            (Some(Schema::string()), Value::from(""), "", Some(Schema::string()), Value::from("")),
            (Some(Schema::boolean()), Value::Boolean(true), "true", Some(Schema::boolean()), Value::Boolean(true)),
            (Some(Schema::int8()), Value::Int8(-2), "-2", Some(Schema::int8()), Value::Int8(-2)),
            (Some(Schema::int16()), Value::Int16(1000), "1000", Some(Schema::int16()), Value::Int16(1000)),
            (Some(Schema::int32()), Value::Int32(100_000), "100000", Some(Schema::int32()), Value::Int32(100_000)),
            (Some(Schema::int64()), Value::Int64(1 << 40), "1099511627776", Some(Schema::int64()), Value::Int64(1 << 40)),
            // Small ints come back as the smallest type that holds them.
            (Some(Schema::int64()), Value::Int64(5), "5", Some(Schema::int8()), Value::Int8(5)),
            (Some(Schema::float32()), Value::Float32(1.5), "1.5", Some(Schema::float32()), Value::Float32(1.5)),
            // A double reads back as a float32 when it fits one, as in Kafka.
            (Some(Schema::float64()), Value::Float64(0.5), "0.5", Some(Schema::float32()), Value::Float32(0.5)),
            (Some(Schema::float64()), Value::Float64(1e300), "1.0E300", Some(Schema::float64()), Value::Float64(1e300)),
            (Some(Schema::date()), Value::Int32(18_131), "2019-08-23", Some(Schema::date()), Value::Int32(18_131)),
            (Some(Schema::time()), Value::Int32(52_494_346), "14:34:54.346Z", Some(Schema::time()), Value::Int32(52_494_346)),
            (
                Some(Schema::timestamp()),
                Value::Int64(1_566_570_894_346),
                "2019-08-23T14:34:54.346Z",
                Some(Schema::timestamp()),
                Value::Int64(1_566_570_894_346),
            ),
            (
                Some(Schema::array(Schema::int32().into_ref())),
                Value::Array(vec![Value::Int32(1), Value::Int32(2)]),
                "[1,2]",
                Some(Schema::array(Schema::int8().into_ref())),
                Value::Array(vec![Value::Int8(1), Value::Int8(2)]),
            ),
            (
                Some(Schema::map(Schema::string().into_ref(), Schema::string().into_ref())),
                Value::Map(vec![(Value::from("foo"), Value::from("123")), (Value::from("bar"), Value::from("baz"))]),
                "{\"foo\":\"123\",\"bar\":\"baz\"}",
                Some(Schema::map(Schema::string().into_ref(), Schema::string().into_ref())),
                Value::Map(vec![(Value::from("foo"), Value::from("123")), (Value::from("bar"), Value::from("baz"))]),
            ),
            (None, Value::from("null"), "null", None, Value::Null),
        ];
        for (schema, value, text, back_schema, back_value) in cases {
            assert_eq!(write(schema, value.clone()), text, "{value:?}");
            let (s, v) = read(text);
            assert_eq!(s.as_deref(), back_schema.as_ref(), "{text}");
            assert_eq!(v, back_value, "{text}");
        }
    }

    #[test]
    fn nulls_and_non_utf8() {
        let c = SimpleHeaderConverter;
        assert_eq!(c.from_connect_header("t", "h", Some(&Schema::string().optional().into_ref()), &Value::Null).unwrap(), None);
        assert_eq!(c.to_connect_header("t", "h", None).unwrap(), (None, Value::Null));
        let (schema, value) = c.to_connect_header("t", "h", Some(&[0xFF, 0x00])).unwrap();
        assert_eq!(schema.map(|s| s.kind), Some(SchemaType::Bytes));
        assert_eq!(value, Value::Bytes(vec![0xFF, 0x00]));
    }

    #[test]
    fn bad_decimal_schema_is_reported() {
        let schema = Schema::bytes().named(sluice_api::schema::logical::DECIMAL).into_ref();
        let err = SimpleHeaderConverter.from_connect_header("orders", "amount", Some(&schema), &Value::Bytes(vec![1])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Failed to serialize value for header 'amount' on topic 'orders': Invalid Decimal schema: scale parameter not found."
        );
    }
}
