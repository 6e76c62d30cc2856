//! `Flatten`: lifts nested struct (or map) fields to the top level, naming them by joining
//! the path with `delimiter`. Arrays are left alone; with a schema, map fields are an error.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectResult, Importance, Props, Schema, SchemaRef, SchemaType, Struct, Value};

use super::record::Side;
use super::require::{copy_basics, data_error, field_value, map_put, push_field, require_map, require_struct_or_null, SchemaCache};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Flatten a nested data structure, generating names for each field by concatenating the field names at each level with a configurable delimiter character. Applies to Struct when schema present, or a Map in the case of schemaless data. Array fields and their contents are not modified. The default delimiter is '.'.";
const NAME: &str = "Flatten";
const PURPOSE: &str = "flattening";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new().define(
        ConfigKey::new(
            "delimiter",
            ConfigType::String,
            Importance::Medium,
            "Delimiter to insert between field names from the input record when generating field names for the output record",
        )
        .default_value("."),
    )
}

struct Flatten {
    side: Side,
    delimiter: String,
    cache: SchemaCache,
}

impl Flatten {
    fn name(&self, prefix: &str, field: &str) -> String {
        if prefix.is_empty() {
            field.to_owned()
        } else {
            format!("{prefix}{}{field}", self.delimiter)
        }
    }

    fn flatten_map(&self, m: &[(Value, Value)], prefix: &str, out: &mut Vec<(Value, Value)>) -> ConnectResult<()> {
        for (k, v) in m {
            let key = k.as_str().ok_or_else(|| {
                data_error(NAME, format_args!("map keys must be strings for {PURPOSE}, found {}", super::require::kind_of(k)))
            })?;
            let name = self.name(prefix, key);
            match v {
                Value::Map(inner) => self.flatten_map(inner, &name, out)?,
                Value::Struct(_) => {
                    return Err(data_error(NAME, format_args!("struct values are not supported without a schema (field `{name}`)")))
                }
                other => map_put(out, &name, other.clone()),
            }
        }
        Ok(())
    }

    fn flatten_schema(
        &self,
        schema: &Schema,
        prefix: &str,
        out: &mut Schema,
        optional: bool,
        parent_default: Option<&Struct>,
    ) -> ConnectResult<()> {
        for f in &schema.fields {
            let name = self.name(prefix, &f.name);
            let field_optional = optional || f.schema.optional;
            let default = f.schema.default.clone().or_else(|| parent_default.map(|d| field_value(d, f, true)).filter(|v| !v.is_null()));
            match f.schema.kind {
                SchemaType::Struct => {
                    let nested_default = match &default {
                        Some(Value::Struct(s)) => Some(s.clone()),
                        _ => None,
                    };
                    self.flatten_schema(&f.schema, &name, out, field_optional, nested_default.as_ref())?;
                }
                SchemaType::Map => {
                    return Err(data_error(NAME, format_args!("map fields are not supported with a schema (field `{name}`)")))
                }
                kind => {
                    let mut s = copy_basics(&f.schema, kind);
                    s.optional = field_optional;
                    s.default = default;
                    push_field(out, name, s.into_ref());
                }
            }
        }
        Ok(())
    }

    fn flatten_struct(&self, s: &Struct, values: &mut Vec<Value>) {
        for f in &s.schema().fields {
            match f.schema.kind {
                SchemaType::Struct => match &s.values()[f.index] {
                    Value::Struct(inner) => self.flatten_struct(inner, values),
                    _ => values.extend(std::iter::repeat_n(Value::Null, leaf_count(&f.schema))),
                },
                _ => values.push(field_value(s, f, true)),
            }
        }
    }
}

fn leaf_count(s: &Schema) -> usize {
    s.fields.iter().map(|f| if f.schema.kind == SchemaType::Struct { leaf_count(&f.schema) } else { 1 }).sum()
}

impl Transform for Flatten {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        if self.side.value(&record).is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = self.side.take(&mut record);
        match schema {
            None => {
                let m = require_map(&value, NAME, PURPOSE)?;
                let mut out = Vec::new();
                self.flatten_map(m, "", &mut out)?;
                self.side.set(&mut record, None, Value::Map(out));
            }
            Some(schema) => {
                let s = require_struct_or_null(&value, NAME, PURPOSE)?;
                let flat: SchemaRef = self.cache.get_or_build(&schema, || {
                    let mut out = copy_basics(&schema, SchemaType::Struct);
                    let default = match &schema.default {
                        Some(Value::Struct(d)) => Some(d.clone()),
                        _ => None,
                    };
                    self.flatten_schema(&schema, "", &mut out, schema.optional, default.as_ref())?;
                    Ok(out)
                })?;
                let out = match s {
                    None => Value::Null,
                    Some(s) => {
                        let mut values = Vec::with_capacity(flat.fields.len());
                        self.flatten_struct(s, &mut values);
                        Value::Struct(Struct::from_values(flat.clone(), values))
                    }
                };
                self.side.set(&mut record, Some(flat), out);
            }
        }
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    config_def().parse(props)?;
    let delimiter = props.get("delimiter").cloned().unwrap_or_else(|| ".".to_owned());
    Ok(Box::new(Flatten { side, delimiter, cache: SchemaCache::default() }))
}
