//! Debezium's `JsonSchemaData`: a schema and a value for a JSON document, for the outbox
//! router's `table.expand.json.payload`.

use serde_json::Value as Json;
use sluice_api::{ConnectResult, Schema, SchemaType, Struct, Value};

use crate::transform::require::{data_error, push_field};

const NAME: &str = "EventRouter";

#[derive(Debug, Clone, Copy)]
pub(crate) struct JsonExpansion {
    /// `table.json.payload.null.behavior=optional_bytes`: keep null fields as optional bytes.
    pub(crate) null_as_optional_bytes: bool,
    /// `table.json.payload.empty.array.behavior=optional_string`: keep empty arrays.
    pub(crate) empty_array_as_optional_string: bool,
}

impl JsonExpansion {
    /// The schema Debezium derives for `node`; `None` for a field it leaves out.
    pub(crate) fn schema(&self, key: Option<&str>, node: &Json) -> ConnectResult<Option<Schema>> {
        Ok(Some(match node {
            Json::String(_) => Schema::string().optional(),
            Json::Bool(_) => Schema::boolean().optional(),
            Json::Number(n) => match n.as_i64() {
                Some(i) if i32::try_from(i).is_ok() => Schema::int32().optional(),
                Some(_) => Schema::int64().optional(),
                None => Schema::float64().optional(),
            },
            Json::Array(items) => {
                if items.is_empty() {
                    if self.empty_array_as_optional_string {
                        return Ok(Some(Schema::array(Schema::string().optional().into_ref()).optional()));
                    }
                    return Ok(None);
                }
                Schema::array(self.element_schema(key, items)?.into_ref()).optional()
            }
            Json::Object(map) => {
                let mut s = Schema::of(SchemaType::Struct).optional();
                s.name = key.map(str::to_owned);
                for (name, v) in map {
                    let field_key = match key {
                        Some(k) if !k.trim().is_empty() => format!("{k}.{name}"),
                        _ => name.clone(),
                    };
                    if let Some(fs) = self.schema(Some(&field_key), v)? {
                        if s.field(name).is_none() {
                            push_field(&mut s, name.clone(), fs.into_ref());
                        }
                    }
                }
                s
            }
            Json::Null => {
                if self.null_as_optional_bytes {
                    Schema::bytes().optional()
                } else {
                    return Ok(None);
                }
            }
        }))
    }

    fn element_schema(&self, key: Option<&str>, items: &[Json]) -> ConnectResult<Schema> {
        let mut sample: Option<&Json> = None;
        for item in items.iter().filter(|i| !i.is_null()) {
            match sample {
                None => sample = Some(item),
                Some(first) => {
                    if std::mem::discriminant(first) != std::mem::discriminant(item) {
                        return Err(data_error(NAME, format_args!("field is not a homogenous array ({first} x {item})")));
                    }
                    if first.is_number() && self.schema(None, first)? != self.schema(None, item)? {
                        return Err(data_error(
                            NAME,
                            format_args!("field is not a homogenous array ({first} x {item}): different number types"),
                        ));
                    }
                }
            }
        }
        let Some(sample) = sample else { return Err(data_error(NAME, "array has no member to derive a schema from")) };
        if sample.is_object() {
            let mut merged: Option<Schema> = None;
            for item in items.iter().filter(|i| i.is_object()) {
                let s = self.schema(key, item)?.expect("objects always have a schema");
                merged = Some(match merged {
                    None => s,
                    Some(mut left) => {
                        for f in &s.fields {
                            match left.fields.iter().position(|l| l.name == f.name) {
                                None => push_field(&mut left, f.name.clone(), f.schema.clone()),
                                Some(i) => {
                                    if left.fields[i].schema != f.schema
                                        && left.fields[i].schema.kind == SchemaType::Bytes
                                        && f.schema.kind != SchemaType::Bytes
                                    {
                                        left.fields[i].schema = f.schema.clone();
                                    }
                                }
                            }
                        }
                        left
                    }
                });
            }
            Ok(merged.expect("at least one object"))
        } else {
            self.schema(None, sample)?.ok_or_else(|| data_error(NAME, format_args!("array '{sample}' has an unrecognized member schema")))
        }
    }

    /// The value of `node` under `schema` (a struct schema for the top-level document).
    pub(crate) fn value(node: &Json, schema: &Schema) -> Value {
        match (node, schema.kind) {
            (Json::Object(map), SchemaType::Struct) => {
                let values =
                    schema.fields.iter().map(|f| map.get(&f.name).map(|v| Self::value(v, &f.schema)).unwrap_or(Value::Null)).collect();
                Value::Struct(Struct::from_values(schema.clone().into_ref(), values))
            }
            (Json::Array(items), SchemaType::Array) => {
                let element = schema.value_schema.clone().unwrap_or_else(|| Schema::string().optional().into_ref());
                Value::Array(items.iter().map(|i| Self::value(i, &element)).collect())
            }
            (Json::String(s), _) => Value::String(s.clone()),
            (Json::Bool(b), _) => Value::Boolean(*b),
            (Json::Number(n), SchemaType::Float64) => Value::Float64(n.as_f64().unwrap_or(f64::NAN)),
            (Json::Number(n), _) => match n.as_i64() {
                Some(i) => i32::try_from(i).map(Value::Int32).unwrap_or(Value::Int64(i)),
                None => Value::Float64(n.as_f64().unwrap_or(f64::NAN)),
            },
            _ => Value::Null,
        }
    }
}
