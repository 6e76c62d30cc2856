//! `MaskField`: replaces the listed fields with the empty value of their type (0, false,
//! "", empty array or map, the epoch for dates and times, a zero decimal), or with a
//! configured `replacement` for numeric and string fields.

use sluice_api::schema::logical;
use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, Struct, Validator, Value};

use super::extract_field::replace_null_key;
use super::java_text::{decimal_bytes, parse_big_decimal};
use super::record::Side;
use super::require::{data_error, field_value, kind_of, map_get, map_put, require_map, require_struct};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Mask specified fields with a valid null value for the field type (i.e. 0, false, empty string, and so on).<p/>For numeric and string fields, an optional replacement value can be specified that is converted to the correct type.";
const NAME: &str = "MaskField";
const PURPOSE: &str = "mask fields";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new()
        .define(ConfigKey::new("fields", ConfigType::List, Importance::High, "Names of fields to mask."))
        .define(
            ConfigKey::new(
                "replacement",
                ConfigType::String,
                Importance::Low,
                "Custom value replacement, that will be applied to all 'fields' values (numeric or non-empty string values only).",
            )
            .default_value(""),
        )
        .define(replace_null_key())
}

struct MaskField {
    side: Side,
    fields: Vec<String>,
    replacement: Option<String>,
    replace_null_with_default: bool,
}

impl MaskField {
    /// The masked form of `v`; `schema` is the field's schema when the record has one.
    fn masked(&self, field: &str, v: &Value, schema: Option<&Schema>) -> ConnectResult<Value> {
        if v.is_null() {
            return Ok(Value::Null);
        }
        let name = schema.and_then(|s| s.name.as_deref());
        let temporal = matches!(name, Some(logical::DATE | logical::TIME | logical::TIMESTAMP));
        let decimal_scale = schema.and_then(Schema::decimal_scale);
        match &self.replacement {
            None => Ok(match v {
                Value::Boolean(_) => Value::Boolean(false),
                Value::Int8(_) => Value::Int8(0),
                Value::Int16(_) => Value::Int16(0),
                Value::Int32(_) => Value::Int32(0),
                Value::Int64(_) => Value::Int64(0),
                Value::Float32(_) => Value::Float32(0.0),
                Value::Float64(_) => Value::Float64(0.0),
                Value::String(_) => Value::String(String::new()),
                Value::Bytes(_) if decimal_scale.is_some() => Value::Bytes(decimal_bytes(0)),
                Value::Array(_) => Value::Array(Vec::new()),
                Value::Map(_) => Value::Map(Vec::new()),
                other => return Err(data_error(NAME, format_args!("cannot mask field `{field}` of type {}", kind_of(other)))),
            }),
            Some(r) => {
                let bad = || data_error(NAME, format_args!("cannot mask field `{field}`: replacement '{r}' is not a valid {}", kind_of(v)));
                if temporal {
                    return Err(data_error(
                        NAME,
                        format_args!("cannot mask field `{field}` of type {} with a custom replacement", name.unwrap_or_default()),
                    ));
                }
                Ok(match v {
                    Value::Int8(_) => Value::Int8(r.trim().parse().map_err(|_| bad())?),
                    Value::Int16(_) => Value::Int16(r.trim().parse().map_err(|_| bad())?),
                    Value::Int32(_) => Value::Int32(r.trim().parse().map_err(|_| bad())?),
                    Value::Int64(_) => Value::Int64(r.trim().parse().map_err(|_| bad())?),
                    Value::Float32(_) => Value::Float32(r.trim().parse().map_err(|_| bad())?),
                    Value::Float64(_) => Value::Float64(r.trim().parse().map_err(|_| bad())?),
                    Value::String(_) => Value::String(r.clone()),
                    Value::Bytes(_) if decimal_scale.is_some() => {
                        let scale = decimal_scale.unwrap_or(0);
                        let (unscaled, s) = parse_big_decimal(r.trim()).ok_or_else(bad)?;
                        Value::Bytes(decimal_bytes(rescale(unscaled, s, scale).ok_or_else(bad)?))
                    }
                    other => {
                        return Err(data_error(
                            NAME,
                            format_args!("cannot mask field `{field}` of type {} with a custom replacement", kind_of(other)),
                        ))
                    }
                })
            }
        }
    }
}

/// `unscaled × 10^-from` as an unscaled value at scale `to`, when exact.
fn rescale(unscaled: i128, from: i32, to: i32) -> Option<i128> {
    if to >= from {
        unscaled.checked_mul(10i128.checked_pow((to - from) as u32)?)
    } else {
        let p = 10i128.checked_pow((from - to) as u32)?;
        (unscaled % p == 0).then(|| unscaled / p)
    }
}

impl Transform for MaskField {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        let (schema, value) = self.side.take(&mut record);
        match schema {
            None => {
                let mut map = require_map(&value, NAME, PURPOSE)?.clone();
                for f in &self.fields {
                    let masked = self.masked(f, map_get(&map, f).unwrap_or(&Value::Null), None)?;
                    map_put(&mut map, f, masked);
                }
                self.side.set(&mut record, None, Value::Map(map));
            }
            Some(schema) => {
                let s = require_struct(&value, NAME, PURPOSE)?;
                let mut values = Vec::with_capacity(s.values().len());
                for f in &s.schema().fields {
                    let v = field_value(s, f, self.replace_null_with_default);
                    values.push(if self.fields.contains(&f.name) { self.masked(&f.name, &v, Some(&f.schema))? } else { v });
                }
                let out = Struct::from_values(s.schema().clone(), values);
                self.side.set(&mut record, Some(schema), Value::Struct(out));
            }
        }
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let fields = config.list("fields");
    if fields.is_empty() {
        return Err(ConnectError::config("fields", "empty list is not allowed: name at least one field"));
    }
    if props.get("replacement").is_some_and(|r| r.trim().is_empty()) {
        return Err(ConnectError::config("replacement", "String must be non-empty"));
    }
    let _ = Validator::NonEmpty;
    Ok(Box::new(MaskField {
        side,
        fields,
        replacement: config.string("replacement"),
        replace_null_with_default: config.boolean("replace.null.with.default"),
    }))
}
