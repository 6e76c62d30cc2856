//! `io.debezium.transforms.ExtractNewRecordState`: replaces a change event envelope with
//! the row state (`after`, or `before` for a rewritten delete), and handles deletes and
//! tombstones as `delete.tombstone.handling.mode` says:
//!
//! | mode                     | delete event                         | tombstone |
//! |--------------------------|--------------------------------------|-----------|
//! | `drop`                   | dropped                              | dropped   |
//! | `tombstone` (default)    | null value (schema of `after`)       | dropped   |
//! | `rewrite`                | `before` + `__deleted: "true"`       | dropped   |
//! | `rewrite-with-tombstone` | `before` + `__deleted: "true"`       | kept      |
//! | `delete-to-tombstone`    | null value, null schema              | dropped   |
//!
//! In the rewrite modes creates and updates get `__deleted: "false"`. When the mode is not
//! set but the deprecated `drop.tombstones` (default true) or `delete.handling.mode`
//! (`drop` default, `rewrite`, `none`) is, those decide, as Debezium did before 3.x.

use sluice_api::{
    ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, SchemaType, Struct, Validator, Value,
};

use super::is_envelope;
use crate::transform::extract_field::ExtractField;
use crate::transform::insert_field::InsertField;
use crate::transform::record::Side;
use crate::transform::replace_field::ReplaceField;
use crate::transform::require::{copy_basics, push_field, require_struct};
use crate::transform::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Extracts the new record state from a Debezium change event envelope, with configurable handling of delete events and tombstones, and optional metadata fields and headers.";
const NAME: &str = "ExtractNewRecordState";
const DELETED_FIELD: &str = "__deleted";

pub(crate) fn config_def() -> ConfigDef {
    let s = |name: &str, doc: &str| ConfigKey::new(name, ConfigType::String, Importance::Medium, doc);
    ConfigDef::new()
        .define(
            s("delete.tombstone.handling.mode", "How to handle delete records and tombstones: drop, tombstone (default), rewrite, rewrite-with-tombstone, delete-to-tombstone.")
                .default_value(""),
        )
        .define(ConfigKey::new("drop.tombstones", ConfigType::Boolean, Importance::Low, "Deprecated: use delete.tombstone.handling.mode. Whether tombstones are dropped.").default_value("true"))
        .define(
            s("delete.handling.mode", "Deprecated: use delete.tombstone.handling.mode. How delete records are handled: drop, rewrite or none.")
                .default_value("drop")
                .validator(Validator::one_of(&["drop", "rewrite", "none"])),
        )
        .define(s("route.by.field", "The column which determines how the events will be routed, the value will replace the topic name.").default_value(""))
        .define(s("add.fields.prefix", "Adds this prefix to each field listed.").default_value("__"))
        .define(
            ConfigKey::new("add.fields", ConfigType::List, Importance::Low, "Adds each field listed, prefixed with __ (or __<struct>_ if the struct is specified). Example: 'version,connector,source.ts_ms' would add __version, __connector and __source_ts_ms fields. Optionally one can also map new field name like version:VERSION,connector:CONNECTOR,source.ts_ms:EVENT_TIMESTAMP.")
                .default_value(""),
        )
        .define(s("add.headers.prefix", "Adds this prefix listed to each header.").default_value("__"))
        .define(ConfigKey::new("add.headers", ConfigType::List, Importance::Low, "Adds each field listed to the header, __ (or __<struct>_ if the struct is specified).").default_value(""))
        .define(
            ConfigKey::new("replace.null.with.default", ConfigType::Boolean, Importance::Low, "When this option is enabled, null field values are replaced by source-defined defaults when rewriting the record.")
                .default_value("true"),
        )
        .define(s("drop.fields.header.name", "Specifies the name of a header that contains a list of fields to be removed from the event value.").default_value(""))
        .define(
            ConfigKey::new("drop.fields.from.key", ConfigType::Boolean, Importance::Low, "Specifies whether to apply the drop fields behavior to the event key as well as the value.")
                .default_value("false"),
        )
        .define(
            ConfigKey::new("drop.fields.keep.schema.compatible", ConfigType::Boolean, Importance::Low, "true: only optional fields are dropped, leaving schemas compatible; false: dropped fields are removed regardless of optionality.")
                .default_value("true"),
        )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Drop,
    Tombstone,
    Rewrite,
    RewriteWithTombstone,
    DeleteToTombstone,
    /// The deprecated pair of keys.
    Legacy {
        drop_tombstones: bool,
        deletes: LegacyDeletes,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LegacyDeletes {
    Drop,
    Rewrite,
    None,
}

impl Mode {
    fn rewrites(self) -> bool {
        matches!(self, Mode::Rewrite | Mode::RewriteWithTombstone | Mode::Legacy { deletes: LegacyDeletes::Rewrite, .. })
    }
}

/// A field of the envelope copied into the row or a header (`op`, `source.ts_ms`,
/// `table:TABLE`, …).
#[derive(Debug, Clone)]
struct FieldReference {
    /// The struct holding the field (`source`, `transaction`), or `None` for `op`, `ts_ms`.
    parent: Option<String>,
    field: String,
    new_name: String,
}

impl FieldReference {
    fn parse(prefix: &str, spec: &str, key: &str) -> ConnectResult<Self> {
        let parts: Vec<&str> = spec.split(':').collect();
        if parts.len() > 2 {
            return Err(ConnectError::config(key, format!("unexpected field name '{spec}': use field, struct.field or field:new_name")));
        }
        let splits: Vec<&str> = parts[0].split('.').collect();
        let field = if splits.len() == 1 { splits[0] } else { splits[1] }.to_owned();
        let parent = if splits.len() == 1 {
            match field.as_str() {
                "id" | "total_order" | "data_collection_order" => Some("transaction".to_owned()),
                "op" | "ts_ms" | "ts_us" | "ts_ns" => None,
                "updateDescription" => Some("updateDescription".to_owned()),
                _ => Some("source".to_owned()),
            }
        } else {
            Some(splits[0].to_owned())
        };
        let new_name = match parts.get(1) {
            Some(n) => format!("{prefix}{n}"),
            None if splits.len() == 1 => format!("{prefix}{field}"),
            None => format!("{prefix}{}_{field}", parent.as_deref().unwrap_or_default()),
        };
        Ok(Self { parent, field, new_name })
    }

    fn list(prefix: &str, raw: &[String], key: &str) -> ConnectResult<Vec<Self>> {
        raw.iter().map(|s| Self::parse(prefix, s, key)).collect()
    }

    /// The schema of the copied field (optional, without default), when the envelope has it.
    fn schema(&self, envelope: &Schema) -> Option<Schema> {
        let parent = match &self.parent {
            Some(p) => &envelope.field(p)?.schema,
            None => envelope,
        };
        let field = parent.field(&self.field).or_else(|| envelope.field(&self.field))?;
        let mut s = (*field.schema).clone();
        s.optional = true;
        s.default = None;
        Some(s)
    }

    fn value(&self, envelope: &Struct) -> Value {
        let parent = match &self.parent {
            Some(p) => match envelope.get(p) {
                Some(Value::Struct(s)) => s,
                _ => return Value::Null,
            },
            None => envelope,
        };
        match parent.get(&self.field) {
            Some(v) => v.clone(),
            None => envelope.get(&self.field).cloned().unwrap_or(Value::Null),
        }
    }
}

struct ExtractNewRecordState {
    mode: Mode,
    route_by_field: Option<String>,
    add_fields: Vec<FieldReference>,
    add_headers: Vec<FieldReference>,
    drop_fields_header: Option<String>,
    drop_fields_from_key: bool,
    drop_fields_keep_schema_compatible: bool,
    after: ExtractField,
    before: ExtractField,
    deleted: InsertField,
    not_deleted: InsertField,
}

impl ExtractNewRecordState {
    fn extract(&self, record: &TransformRecord, part: &ExtractField) -> ConnectResult<TransformRecord> {
        let mut r = record.clone();
        part.extract(&mut r)?;
        Ok(r)
    }

    fn handle_tombstone(&self, record: TransformRecord) -> Option<TransformRecord> {
        match self.mode {
            Mode::RewriteWithTombstone => Some(record),
            Mode::Legacy { drop_tombstones: false, .. } => Some(record),
            _ => None,
        }
    }

    fn handle_delete(&self, record: &TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        Ok(match self.mode {
            Mode::Drop | Mode::Legacy { deletes: LegacyDeletes::Drop, .. } => None,
            Mode::Tombstone | Mode::Legacy { deletes: LegacyDeletes::None, .. } => Some(self.extract(record, &self.after)?),
            Mode::DeleteToTombstone => {
                let mut r = record.clone();
                r.value_schema = None;
                r.value = Value::Null;
                Some(r)
            }
            Mode::Rewrite | Mode::RewriteWithTombstone | Mode::Legacy { deletes: LegacyDeletes::Rewrite, .. } => {
                let mut r = self.extract(record, &self.before)?;
                if matches!(r.value, Value::Struct(_)) {
                    self.deleted.insert(&mut r)?;
                }
                Some(r)
            }
        })
    }

    fn handle_record(&self, record: &TransformRecord) -> ConnectResult<TransformRecord> {
        let mut r = self.extract(record, &self.after)?;
        if self.mode.rewrites() && matches!(r.value, Value::Struct(_)) {
            self.not_deleted.insert(&mut r)?;
        }
        Ok(r)
    }

    fn add_fields(&self, envelope: &Struct, mut record: TransformRecord) -> ConnectResult<TransformRecord> {
        if self.add_fields.is_empty() {
            return Ok(record);
        }
        let value = require_struct(&record.value, NAME, "source field insertion")?;
        let mut schema = copy_basics(value.schema(), SchemaType::Struct);
        for f in &value.schema().fields {
            push_field(&mut schema, f.name.clone(), f.schema.clone());
        }
        let mut values = value.values().to_vec();
        for r in &self.add_fields {
            if let Some(s) = r.schema(envelope.schema()) {
                push_field(&mut schema, r.new_name.clone(), s.into_ref());
                values.push(r.value(envelope));
            }
        }
        let schema = schema.into_ref();
        record.value = Value::Struct(Struct::from_values(schema.clone(), values));
        record.value_schema = Some(schema);
        Ok(record)
    }

    fn drop_fields(&self, mut record: TransformRecord) -> ConnectResult<TransformRecord> {
        let Some(header) = &self.drop_fields_header else { return Ok(record) };
        let names: Vec<String> = match record.headers.iter().find(|h| &h.key == header).map(|h| &h.value) {
            Some(Value::Array(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        };
        if names.is_empty() {
            return Ok(record);
        }
        let to_drop = |schema: Option<&sluice_api::SchemaRef>| -> Vec<String> {
            if !self.drop_fields_keep_schema_compatible {
                return names.clone();
            }
            schema
                .map(|s| s.fields.iter().filter(|f| f.schema.optional && names.contains(&f.name)).map(|f| f.name.clone()).collect())
                .unwrap_or_default()
        };
        if self.drop_fields_from_key && !record.key.is_null() {
            let fields = to_drop(record.key_schema.as_ref());
            if !fields.is_empty() {
                ReplaceField::excluding(Side::Key, fields).replace(&mut record)?;
            }
        }
        let fields = to_drop(record.value_schema.as_ref());
        if !fields.is_empty() {
            ReplaceField::excluding(Side::Value, fields).replace(&mut record)?;
        }
        Ok(record)
    }

    fn route(&self, row: &Value, mut record: TransformRecord) -> TransformRecord {
        if let Some(field) = &self.route_by_field {
            if let Some(Value::String(topic)) = row.as_struct().and_then(|s| s.get(field)) {
                if !topic.trim().is_empty() {
                    record.topic = topic.clone();
                }
            }
        }
        record
    }
}

impl Transform for ExtractNewRecordState {
    fn apply(&self, mut record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        let tombstone = record.value.is_null();
        let valid = is_envelope(record.value_schema.as_ref());
        if (valid || tombstone) && !self.add_headers.is_empty() {
            for r in &self.add_headers {
                match &record.value {
                    Value::Struct(envelope) => {
                        if let Some(s) = r.schema(envelope.schema()) {
                            let v = r.value(envelope);
                            record.headers.add(r.new_name.clone(), Some(s.into_ref()), v);
                        }
                    }
                    _ if r.field == "op" => {
                        record.headers.add(r.new_name.clone(), Some(Schema::string().into_ref()), Value::String("d".to_owned()))
                    }
                    _ => {}
                }
            }
        }
        if tombstone {
            return Ok(self.handle_tombstone(record));
        }
        if !valid {
            return Ok(Some(record));
        }
        let envelope = require_struct(&record.value, NAME, "change event extraction")?.clone();
        let after = envelope.get("after").cloned().unwrap_or(Value::Null);
        let before = envelope.get("before").cloned().unwrap_or(Value::Null);
        if after.is_null() && before.is_null() {
            // A truncate event: no row state to extract.
            return Ok(None);
        }
        if after.is_null() {
            let Some(mut out) = self.handle_delete(&record)? else { return Ok(None) };
            out = self.route(&before, out);
            out = self.drop_fields(out)?;
            if !out.value.is_null() {
                out = self.add_fields(&envelope, out)?;
            }
            Ok(Some(out))
        } else {
            let mut out = self.handle_record(&record)?;
            let row = out.value.clone();
            out = self.route(&row, out);
            out = self.add_fields(&envelope, out)?;
            out = self.drop_fields(out)?;
            Ok(Some(out))
        }
    }
}

pub(crate) fn create(props: &Props) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let mode = match config.string("delete.tombstone.handling.mode") {
        Some(m) => match m.to_ascii_lowercase().as_str() {
            "drop" => Mode::Drop,
            "tombstone" => Mode::Tombstone,
            "rewrite" => Mode::Rewrite,
            "rewrite-with-tombstone" => Mode::RewriteWithTombstone,
            "delete-to-tombstone" => Mode::DeleteToTombstone,
            other => {
                return Err(ConnectError::config(
                    "delete.tombstone.handling.mode",
                    format!("'{other}' is not a mode: use drop, tombstone, rewrite, rewrite-with-tombstone or delete-to-tombstone"),
                ))
            }
        },
        None if props.contains_key("drop.tombstones") || props.contains_key("delete.handling.mode") => Mode::Legacy {
            drop_tombstones: config.boolean("drop.tombstones"),
            deletes: match config.string("delete.handling.mode").unwrap_or_default().to_ascii_lowercase().as_str() {
                "rewrite" => LegacyDeletes::Rewrite,
                "none" => LegacyDeletes::None,
                _ => LegacyDeletes::Drop,
            },
        },
        None => Mode::Tombstone,
    };
    let replace_null = config.boolean("replace.null.with.default");
    let fields_prefix = props.get("add.fields.prefix").cloned().unwrap_or_else(|| "__".to_owned());
    let headers_prefix = props.get("add.headers.prefix").cloned().unwrap_or_else(|| "__".to_owned());
    Ok(Box::new(ExtractNewRecordState {
        mode,
        route_by_field: config.string("route.by.field"),
        add_fields: FieldReference::list(&fields_prefix, &config.list("add.fields"), "add.fields")?,
        add_headers: FieldReference::list(&headers_prefix, &config.list("add.headers"), "add.headers")?,
        drop_fields_header: config.string("drop.fields.header.name").filter(|h| !h.trim().is_empty()),
        drop_fields_from_key: config.boolean("drop.fields.from.key"),
        drop_fields_keep_schema_compatible: config.boolean("drop.fields.keep.schema.compatible"),
        after: ExtractField::top_level(Side::Value, "after"),
        before: ExtractField::top_level(Side::Value, "before"),
        deleted: InsertField::static_value(DELETED_FIELD, "true", replace_null),
        not_deleted: InsertField::static_value(DELETED_FIELD, "false", replace_null),
    }))
}
