//! `HoistField`: wraps the key or value in a struct (with a schema) or a map (without) under
//! one field.

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectResult, Importance, Props, Schema, Struct, Value};

use super::record::Side;
use super::require::SchemaCache;
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str =
    "Wrap data using the specified field name in a Struct when schema present, or a Map in the case of schemaless data.";

pub(crate) fn config_def() -> ConfigDef {
    ConfigDef::new().define(ConfigKey::new(
        "field",
        ConfigType::String,
        Importance::Medium,
        "Field name for the single field that will be created in the resulting Struct or Map.",
    ))
}

struct HoistField {
    side: Side,
    field: String,
    cache: SchemaCache,
}

impl Transform for HoistField {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        let (schema, value) = self.side.take(&mut record);
        match schema {
            None => self.side.set(&mut record, None, Value::Map(vec![(Value::String(self.field.clone()), value)])),
            Some(schema) => {
                let hoisted = self.cache.get_or_build(&schema, || Ok(Schema::struct_of([(self.field.clone(), schema.clone())])))?;
                let value = Value::Struct(Struct::from_values(hoisted.clone(), vec![value]));
                self.side.set(&mut record, Some(hoisted), value);
            }
        }
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    config_def().parse(props)?;
    Ok(Box::new(HoistField { side, field: props["field"].clone(), cache: SchemaCache::default() }))
}
