//! `org.apache.kafka.connect.converters.ByteArrayConverter`: bytes pass through unchanged.
//!
//! Reading gives an optional bytes schema. Writing accepts bytes (or null) with no schema or
//! a bytes schema, and refuses anything else, with Kafka's messages.

use sluice_api::{ConfigDef, ConnectError, ConnectResult, Props, Schema, SchemaRef, SchemaType, Value};

use super::{converter_type_key, type_name, value_type_name, with_type, Converter, ConverterType, HeaderConverter};

pub const CLASS: &str = "org.apache.kafka.connect.converters.ByteArrayConverter";

/// Kafka's ByteArrayConverter.
#[derive(Debug, Clone)]
pub struct ByteArrayConverter {
    schema: SchemaRef,
}

impl Default for ByteArrayConverter {
    fn default() -> Self {
        Self { schema: Schema::bytes().optional().into_ref() }
    }
}

impl ByteArrayConverter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn config_def() -> ConfigDef {
        ConfigDef::new().define(converter_type_key())
    }

    /// Validates the properties (there is nothing to configure but `converter.type`).
    pub fn from_props(props: &Props, converter_type: ConverterType) -> ConnectResult<Self> {
        Self::config_def().parse(&with_type(props, converter_type))?;
        Ok(Self::new())
    }

    fn write(&self, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        if let Some(s) = schema.filter(|s| s.kind != SchemaType::Bytes) {
            return Err(ConnectError::fatal(format!("Invalid schema type for ByteArrayConverter: {}", type_name(s.kind))));
        }
        match value {
            Value::Null => Ok(None),
            Value::Bytes(b) => Ok(Some(b.clone())),
            other => {
                Err(ConnectError::fatal(format!("ByteArrayConverter is not compatible with objects of type {}", value_type_name(other))))
            }
        }
    }

    fn read(&self, bytes: Option<&[u8]>) -> (Option<SchemaRef>, Value) {
        (Some(self.schema.clone()), bytes.map_or(Value::Null, |b| Value::Bytes(b.to_vec())))
    }
}

impl Converter for ByteArrayConverter {
    fn from_connect(&self, _topic: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        self.write(schema, value)
    }

    fn to_connect(&self, _topic: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        Ok(self.read(bytes))
    }
}

impl HeaderConverter for ByteArrayConverter {
    fn from_connect_header(&self, _topic: &str, _key: &str, schema: Option<&SchemaRef>, value: &Value) -> ConnectResult<Option<Vec<u8>>> {
        self.write(schema, value)
    }

    fn to_connect_header(&self, _topic: &str, _key: &str, bytes: Option<&[u8]>) -> ConnectResult<(Option<SchemaRef>, Value)> {
        Ok(self.read(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_pass_through() {
        let c = ByteArrayConverter::new();
        let schema = Schema::bytes().into_ref();
        assert_eq!(c.from_connect("t", Some(&schema), &Value::Bytes(vec![0, 1, 255])).unwrap(), Some(vec![0, 1, 255]));
        assert_eq!(c.from_connect("t", None, &Value::Bytes(vec![])).unwrap(), Some(vec![]));
        assert_eq!(c.from_connect("t", None, &Value::Null).unwrap(), None);
        let (schema, value) = c.to_connect("t", Some(&[7, 8])).unwrap();
        assert_eq!(schema.as_deref(), Some(&Schema::bytes().optional()));
        assert_eq!(value, Value::Bytes(vec![7, 8]));
        assert_eq!(c.to_connect("t", None).unwrap().1, Value::Null);
    }

    #[test]
    fn refuses_other_schemas_and_values() {
        let c = ByteArrayConverter::new();
        let err = c.from_connect("t", Some(&Schema::string().into_ref()), &Value::from("x")).unwrap_err();
        assert_eq!(err.to_string(), "Invalid schema type for ByteArrayConverter: STRING");
        let err = c.from_connect("t", None, &Value::Int32(1)).unwrap_err();
        assert_eq!(err.to_string(), "ByteArrayConverter is not compatible with objects of type INT32");
    }
}
