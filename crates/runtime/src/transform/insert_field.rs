//! `InsertField`: adds fields from the record's metadata (topic, partition, offset,
//! timestamp) or a static string. A null key or value passes through.

use sluice_api::{
    ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, SchemaRef, SchemaType, Struct, Value,
};

use super::extract_field::replace_null_key;
use super::record::Side;
use super::require::{copy_basics, data_error, field_value, map_put, push_field, require_map, require_struct, SchemaCache};
use super::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Insert field(s) using attributes from the record metadata or a configured static value.";
const NAME: &str = "InsertField";
const PURPOSE: &str = "field insertion";
const OPTIONALITY: &str = "Suffix with <code>!</code> to make this a required field, or <code>?</code> to keep it optional (the default).";

pub(crate) fn config_def() -> ConfigDef {
    let key = |name: &str, doc: String| ConfigKey::new(name, ConfigType::String, Importance::Medium, &doc).default_value("");
    ConfigDef::new()
        .define(key("topic.field", format!("Field name for Kafka topic. {OPTIONALITY}")))
        .define(key("partition.field", format!("Field name for Kafka partition. {OPTIONALITY}")))
        .define(key("offset.field", format!("Field name for Kafka offset - only applicable to sink connectors.<br/>{OPTIONALITY}")))
        .define(key("timestamp.field", format!("Field name for record timestamp. {OPTIONALITY}")))
        .define(key("static.field", format!("Field name for static data field. {OPTIONALITY}")))
        .define(key("static.value", "Static field value, if field name configured.".to_owned()))
        .define(replace_null_key())
}

#[derive(Debug, Clone)]
struct Spec {
    name: String,
    optional: bool,
}

impl Spec {
    fn parse(raw: Option<&String>) -> Option<Self> {
        let raw = raw.filter(|s| !s.is_empty())?;
        Some(if let Some(n) = raw.strip_suffix('?') {
            Spec { name: n.to_owned(), optional: true }
        } else if let Some(n) = raw.strip_suffix('!') {
            Spec { name: n.to_owned(), optional: false }
        } else {
            Spec { name: raw.clone(), optional: true }
        })
    }

    fn schema(&self, base: Schema) -> SchemaRef {
        if self.optional { base.optional() } else { base }.into_ref()
    }
}

pub(crate) struct InsertField {
    side: Side,
    topic: Option<Spec>,
    partition: Option<Spec>,
    offset: Option<Spec>,
    timestamp: Option<Spec>,
    static_field: Option<Spec>,
    static_value: Option<String>,
    replace_null_with_default: bool,
    cache: SchemaCache,
}

impl InsertField {
    /// A static string field inserted into the value, as Debezium's `__deleted` delegate.
    pub(crate) fn static_value(field: &str, value: &str, replace_null_with_default: bool) -> Self {
        Self {
            side: Side::Value,
            topic: None,
            partition: None,
            offset: None,
            timestamp: None,
            static_field: Some(Spec { name: field.to_owned(), optional: true }),
            static_value: Some(value.to_owned()),
            replace_null_with_default,
            cache: SchemaCache::default(),
        }
    }

    fn updated_schema(&self, schema: &Schema) -> ConnectResult<Schema> {
        let mut out = copy_basics(schema, SchemaType::Struct);
        for f in &schema.fields {
            push_field(&mut out, f.name.clone(), f.schema.clone());
        }
        let inserted = [
            (&self.topic, Schema::string()),
            (&self.partition, Schema::int32()),
            (&self.offset, Schema::int64()),
            (&self.timestamp, Schema::timestamp()),
            (&self.static_field, Schema::string()),
        ];
        for (spec, base) in inserted {
            if let Some(spec) = spec {
                if out.field(&spec.name).is_some() {
                    return Err(data_error(
                        NAME,
                        format_args!("cannot insert field `{}`: the schema already has a field of that name", spec.name),
                    ));
                }
                push_field(&mut out, spec.name.clone(), spec.schema(base));
            }
        }
        Ok(out)
    }

    /// The values to insert, in schema order.
    fn inserted(&self, record: &TransformRecord) -> ConnectResult<Vec<(&str, Value)>> {
        let mut out = Vec::new();
        if let Some(s) = &self.topic {
            out.push((s.name.as_str(), Value::String(record.topic.clone())));
        }
        if let Some(s) = &self.partition {
            if let Some(p) = record.partition {
                out.push((s.name.as_str(), Value::Int32(p)));
            }
        }
        if let Some(s) = &self.offset {
            let offset = record.kafka_offset().ok_or_else(|| {
                data_error(NAME, format_args!("`offset.field` needs a record read by a sink task; this record comes from a source task"))
            })?;
            out.push((s.name.as_str(), Value::Int64(offset)));
        }
        if let Some(s) = &self.timestamp {
            if let Some(ts) = record.timestamp {
                out.push((s.name.as_str(), Value::Int64(ts)));
            }
        }
        if let (Some(s), Some(v)) = (&self.static_field, &self.static_value) {
            out.push((s.name.as_str(), Value::String(v.clone())));
        }
        Ok(out)
    }

    pub(crate) fn insert(&self, record: &mut TransformRecord) -> ConnectResult<()> {
        if self.side.value(record).is_null() {
            return Ok(());
        }
        let inserted = self.inserted(record)?;
        let (schema, value) = self.side.take(record);
        match schema {
            None => {
                let mut map = require_map(&value, NAME, PURPOSE)?.clone();
                for (k, v) in inserted {
                    map_put(&mut map, k, v);
                }
                self.side.set(record, None, Value::Map(map));
            }
            Some(_) => {
                let s = require_struct(&value, NAME, PURPOSE)?;
                let updated = self.cache.get_or_build(s.schema(), || self.updated_schema(s.schema()))?;
                let mut values: Vec<Value> = s.schema().fields.iter().map(|f| field_value(s, f, self.replace_null_with_default)).collect();
                values.resize(updated.fields.len(), Value::Null);
                let mut out = Struct::from_values(updated.clone(), values);
                for (k, v) in inserted {
                    out.put(k, v);
                }
                self.side.set(record, Some(updated), Value::Struct(out));
            }
        }
        Ok(())
    }
}

impl Transform for InsertField {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        self.insert(&mut record)?;
        Ok(Some(record))
    }
}

pub(crate) fn create(props: &Props, side: Side) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let t = InsertField {
        side,
        topic: Spec::parse(props.get("topic.field")),
        partition: Spec::parse(props.get("partition.field")),
        offset: Spec::parse(props.get("offset.field")),
        timestamp: Spec::parse(props.get("timestamp.field")),
        static_field: Spec::parse(props.get("static.field")),
        static_value: props.get("static.value").cloned(),
        replace_null_with_default: config.boolean("replace.null.with.default"),
        cache: SchemaCache::default(),
    };
    if t.topic.is_none() && t.partition.is_none() && t.offset.is_none() && t.timestamp.is_none() && t.static_field.is_none() {
        return Err(ConnectError::config(
            "topic.field",
            "no field insertion configured: set at least one of topic.field, partition.field, offset.field, timestamp.field, static.field",
        ));
    }
    if let (Some(f), None) = (&t.static_field, &t.static_value) {
        return Err(ConnectError::config("static.value", format!("no value specified for static field `{}`", f.name)));
    }
    Ok(Box::new(t))
}
