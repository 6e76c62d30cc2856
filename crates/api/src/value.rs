//! Values of the Connect data model. Logical types keep their physical representation
//! (a Date is `Int32` days, a Decimal is `Bytes`); the schema says how to read them.

use crate::schema::SchemaRef;

#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Boolean(bool),
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float32(f32),
    Float64(f64),
    String(String),
    Bytes(Vec<u8>),
    Array(Vec<Value>),
    /// Entries in insertion order; keys may be any value when a schema says so.
    Map(Vec<(Value, Value)>),
    Struct(Struct),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int8(v) => Some(v.into()),
            Value::Int16(v) => Some(v.into()),
            Value::Int32(v) => Some(v.into()),
            Value::Int64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_struct(&self) -> Option<&Struct> {
        match self {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

/// A struct value: one value per field of its schema, in field order.
#[derive(Debug, Clone, PartialEq)]
pub struct Struct {
    schema: SchemaRef,
    values: Vec<Value>,
}

impl Struct {
    /// A struct with every field null (or its default).
    pub fn new(schema: SchemaRef) -> Self {
        let values = schema.fields.iter().map(|f| f.schema.default.clone().unwrap_or(Value::Null)).collect();
        Self { schema, values }
    }

    /// A struct from values already in field order.
    ///
    /// # Panics
    /// When the number of values differs from the number of fields.
    pub fn from_values(schema: SchemaRef, values: Vec<Value>) -> Self {
        assert_eq!(schema.fields.len(), values.len(), "struct value count must match its schema");
        Self { schema, values }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn values(&self) -> &[Value] {
        &self.values
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schema.field(name).map(|f| &self.values[f.index])
    }

    /// Sets a field by name; returns false when the schema has no such field.
    pub fn put(&mut self, name: &str, value: Value) -> bool {
        match self.schema.field(name) {
            Some(f) => {
                let i = f.index;
                self.values[i] = value;
                true
            }
            None => false,
        }
    }

    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        let ok = self.put(name, value.into());
        debug_assert!(ok, "no field {name}");
        self
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int32(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int64(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Boolean(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    #[test]
    fn struct_put_and_get_by_name() {
        let schema = Schema::struct_of([("a", Schema::int32().into_ref()), ("b", Schema::string().into_ref())]).into_ref();
        let s = Struct::new(schema).with("a", 5).with("b", "x");
        assert_eq!(s.get("a"), Some(&Value::Int32(5)));
        assert_eq!(s.get("b").and_then(Value::as_str), Some("x"));
        assert_eq!(s.get("c"), None);
    }
}
