//! `io.debezium.transforms.outbox.EventRouter`: turns the change events of an outbox table
//! into the events it holds. For each insert (op `c`, or `r` during a snapshot):
//!
//! - topic: the `route.by.field` column (default `aggregatetype`), rewritten by
//!   `route.topic.regex` / `route.topic.replacement` (default `outbox.event.${routedByValue}`);
//! - key: the `table.field.event.key` column (default `aggregateid`);
//! - value: the `table.field.event.payload` column (optionally parsed from a JSON string),
//!   or a struct `{payload, …}` when `table.fields.additional.placement` puts columns in
//!   the envelope; a null or blank payload becomes a tombstone with
//!   `route.tombstone.on.empty.payload=true`;
//! - headers: `id` (the event id) and the columns placed in `header`;
//! - timestamp: `table.field.event.timestamp`, else the event's `ts_ms`.
//!
//! Deletes and tombstones are dropped (outbox rows are usually deleted right after the
//! insert); an update is dropped and logged, or fails the task with
//! `table.op.invalid.behavior=fatal`.

use sluice_api::{
    ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props, Schema, SchemaRef, SchemaType, Struct, Validator,
    Value,
};

use super::is_envelope;
use super::json_payload::JsonExpansion;
use crate::transform::regex_router::RegexRouter;
use crate::transform::require::{data_error, push_field, require_struct};
use crate::transform::{Transform, TransformRecord};

pub(crate) const DOC: &str = "Routes the events of an outbox table (Debezium change events of its inserts) to topics by aggregate type, with the aggregate id as key and the payload as value.";
const NAME: &str = "EventRouter";

pub(crate) fn config_def() -> ConfigDef {
    let s = |name: &str, default: &str, doc: &str| ConfigKey::new(name, ConfigType::String, Importance::Medium, doc).default_value(default);
    ConfigDef::new()
        .define(
            s("table.op.invalid.behavior", "warn", "What to do with an update of the outbox table: warn or error (log and drop it) or fatal (fail).")
                .validator(Validator::one_of(&["warn", "error", "fatal"])),
        )
        .define(s("table.field.event.id", "id", "The column which contains the event ID within the outbox table"))
        .define(s("table.field.event.key", "aggregateid", "The column which contains the event key within the outbox table"))
        .define(s("table.field.event.type", "type", "The column which contains the event type within the outbox table"))
        .define(s("table.field.event.timestamp", "", "Optionally you can override the Kafka message timestamp with a value from a chosen column, otherwise it'll be the Debezium event processed timestamp."))
        .define(s("table.field.event.payload", "payload", "The column which contains the event payload within the outbox table"))
        .define(
            ConfigKey::new("table.fields.additional.placement", ConfigType::List, Importance::High, "Extra fields can be added as part of the event envelope or a message header, format is a list of colon-delimited pairs or trios when you desire to have aliases, e.g. <code>id:header,field_name:envelope:alias,field_name:partition</code>")
                .default_value(""),
        )
        .define(
            s("table.field.additional.missing", "error", "When transforming the 'table.fields.additional.placement' fields, what to do when one of the configured fields is missing: error or ignore.")
                .validator(Validator::one_of(&["error", "ignore"])),
        )
        .define(s("table.field.event.schema.version", "", "The column which contains the event schema version within the outbox table"))
        .define(s("route.by.field", "aggregatetype", "The column which determines how the events will be routed, the value will become part of the topic name"))
        .define(s("route.topic.regex", "(?<routedByValue>.*)", "The default regex to use within the RegexRouter, the default capture will allow to replace the routed field into a new topic name defined in 'route.topic.replacement'"))
        .define(s("route.topic.replacement", "outbox.event.${routedByValue}", "The name of the topic in which the events will be routed, a replacement '${routedByValue}' is available which is the value of The column configured via 'route.by.field'"))
        .define(
            ConfigKey::new("route.tombstone.on.empty.payload", ConfigType::Boolean, Importance::Low, "Whether or not an empty payload should cause a tombstone event.")
                .default_value("false"),
        )
        .define(
            ConfigKey::new("table.expand.json.payload", ConfigType::Boolean, Importance::Medium, "Whether or not to try unescaping a JSON string and make it real JSON. It will infer schema information from payload and update the record schema accordingly. If content is not JSON, it just produces a warning and emits the record unchanged")
                .default_value("false"),
        )
        .define(
            s("table.json.payload.null.behavior", "ignore", "Behavior when json payload including null value, the default will ignore null, optional_bytes will keep the null value, and treat null as optional bytes of connect.")
                .validator(Validator::one_of(&["ignore", "optional_bytes"])),
        )
        .define(
            s("table.json.payload.empty.array.behavior", "ignore", "Behavior when json payload including an empty array value, the default ignore will drop the empty array field, optional_string will keep the field as an optional array with an optional string element type.")
                .validator(Validator::one_of(&["ignore", "optional_string"])),
        )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    Header,
    Envelope,
    Partition,
}

#[derive(Debug, Clone)]
struct AdditionalField {
    placement: Placement,
    field: String,
    alias: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InvalidOp {
    Warn,
    Error,
    Fatal,
}

struct EventRouter {
    invalid_op: InvalidOp,
    field_event_id: String,
    field_event_key: Option<String>,
    field_event_timestamp: Option<String>,
    field_payload: String,
    field_schema_version: Option<String>,
    route_by_field: String,
    router: RegexRouter,
    route_tombstone_on_empty_payload: bool,
    additional: Vec<AdditionalField>,
    ignore_missing_additional: bool,
    expand_json: Option<JsonExpansion>,
}

/// The value schema's name with the routed topic put before its last part:
/// `server.public.outbox.Value` routed to `order` becomes `server.public.outbox.order.Value`.
fn routed_schema_name(original: Option<&str>, routed: &str) -> String {
    match original {
        Some(name) => match name.rfind('.') {
            Some(i) => format!("{}{routed}.{}", &name[..=i], &name[i + 1..]),
            None => format!("{routed}.{name}"),
        },
        None => routed.to_owned(),
    }
}

impl EventRouter {
    fn event_timestamp(&self, envelope: &Struct, event: &Struct) -> ConnectResult<Option<i64>> {
        let envelope_ts = || envelope.get("ts_ms").and_then(Value::as_i64);
        let Some(field) = &self.field_event_timestamp else { return Ok(envelope_ts()) };
        let f = event
            .schema()
            .field(field)
            .ok_or_else(|| data_error(NAME, format_args!("unable to find timestamp field `{field}` in the event")))?;
        let Some(ts) = event.get(field).and_then(Value::as_i64) else { return Ok(envelope_ts()) };
        match f.schema.name.as_deref() {
            Some(sluice_api::schema::logical::TIMESTAMP) | Some("io.debezium.time.Timestamp") => Ok(Some(ts)),
            Some("io.debezium.time.MicroTimestamp") => Ok(Some(ts / 1_000)),
            Some("io.debezium.time.NanoTimestamp") => Ok(Some(ts / 1_000_000)),
            Some(other) => Err(data_error(NAME, format_args!("timestamp field `{field}` has unsupported type {other}"))),
            None => Err(data_error(
                NAME,
                format_args!("timestamp field `{field}` is a {} without a logical timestamp type", f.schema.kind.json_name()),
            )),
        }
    }

    fn expand(&self, payload: Value, schema: SchemaRef, record: &TransformRecord) -> (Value, SchemaRef) {
        let Some(expansion) = &self.expand_json else { return (payload, schema) };
        let Value::String(text) = &payload else {
            if !payload.is_null() {
                tracing::warn!(topic = %record.topic, "expand JSON payload is on but the payload is not a string; left as it is");
            }
            return (payload, schema);
        };
        let parsed: Result<serde_json::Value, String> = if text.starts_with('{') || text.starts_with('[') {
            serde_json::from_str(text).map_err(|e| e.to_string())
        } else {
            Err(format!("unable to parse payload starting with '{}'", text.chars().next().unwrap_or(' ')))
        };
        let expanded = parsed.and_then(|json| match expansion.schema(Some(&self.field_payload), &json) {
            Ok(Some(s)) if s.kind == SchemaType::Struct => Ok((JsonExpansion::value(&json, &s), s.into_ref())),
            Ok(_) => Err("the payload is not a JSON object".to_owned()),
            Err(e) => Err(e.to_string()),
        });
        match expanded {
            Ok(out) => out,
            Err(e) => {
                tracing::warn!(topic = %record.topic, error = %e, "JSON expansion of the outbox payload failed; left as a string");
                (payload, schema)
            }
        }
    }
}

impl Transform for EventRouter {
    fn apply(&self, record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        if record.value.is_null() {
            return Ok(None);
        }
        if !is_envelope(record.value_schema.as_ref()) {
            return Ok(Some(record));
        }
        let envelope = require_struct(&record.value, NAME, "detecting the operation")?;
        match envelope.get("op").and_then(Value::as_str) {
            Some("d") => return Ok(None),
            Some("u") => {
                match self.invalid_op {
                    InvalidOp::Warn => tracing::warn!(topic = %record.topic, "unexpected update of the outbox table ignored"),
                    InvalidOp::Error => tracing::error!(topic = %record.topic, "unexpected update of the outbox table ignored"),
                    InvalidOp::Fatal => {
                        return Err(data_error(
                            NAME,
                            format_args!(
                                "unexpected update of the outbox table (topic {}): outbox rows must only be inserted and deleted",
                                record.topic
                            ),
                        ))
                    }
                }
                return Ok(None);
            }
            _ => {}
        }
        let event = require_struct(envelope.get("after").unwrap_or(&Value::Null), NAME, "reading the outbox event")?;
        let event_schema = event.schema();
        let payload_field = event_schema
            .field(&self.field_payload)
            .ok_or_else(|| data_error(NAME, format_args!("unable to find payload field `{}` in the event", self.field_payload)))?;
        let timestamp = self.event_timestamp(envelope, event)?;
        let id_field = event_schema
            .field(&self.field_event_id)
            .ok_or_else(|| data_error(NAME, format_args!("unable to find event-id field `{}` in the event", self.field_event_id)))?;
        let mut headers = record.headers.clone();
        headers.add("id", Some(id_field.schema.clone()), event.get(&self.field_event_id).cloned().unwrap_or(Value::Null));

        let payload = event.get(&self.field_payload).cloned().unwrap_or(Value::Null);
        let (payload, payload_schema) = self.expand(payload, payload_field.schema.clone(), &record);

        let routed = match event.get(&self.route_by_field) {
            Some(Value::String(s)) => s.clone(),
            Some(other) if !other.is_null() => {
                return Err(data_error(NAME, format_args!("route-by field `{}` must be a string", self.route_by_field)))
            }
            _ => return Err(data_error(NAME, format_args!("route-by field `{}` is missing or null in the event", self.route_by_field))),
        };

        let only_headers = !self.additional.iter().any(|a| a.placement == Placement::Envelope);
        let mut partition = None;
        let mut envelope_fields: Vec<(String, SchemaRef, Value)> = Vec::new();
        for a in &self.additional {
            let Some(f) = event_schema.field(&a.field) else {
                if self.ignore_missing_additional {
                    continue;
                }
                return Err(data_error(NAME, format_args!("unable to find additional field `{}` in the event", a.field)));
            };
            let v = event.get(&a.field).cloned().unwrap_or(Value::Null);
            match a.placement {
                Placement::Envelope => envelope_fields.push((a.alias.clone(), f.schema.clone(), v)),
                Placement::Header => headers.add(a.alias.clone(), Some(f.schema.clone()), v),
                Placement::Partition => {
                    partition = match v {
                        Value::Int32(p) => Some(p),
                        Value::Null => None,
                        other => {
                            return Err(data_error(
                                NAME,
                                format_args!(
                                    "partition field `{}` must be an int32, found {}",
                                    a.field,
                                    crate::transform::require::kind_of(&other)
                                ),
                            ))
                        }
                    }
                }
            }
        }

        let empty_payload = match &payload {
            Value::Null => true,
            Value::String(s) => s.trim().is_empty(),
            _ => false,
        };
        let (value_schema, value) = if empty_payload && self.route_tombstone_on_empty_payload {
            (None, Value::Null)
        } else if only_headers {
            (Some(payload_schema), payload)
        } else {
            let mut s = Schema::of(SchemaType::Struct);
            s.name = Some(routed_schema_name(event_schema.name.as_deref(), &routed));
            if let Some(vf) = &self.field_schema_version {
                s.version = event.get(vf).and_then(Value::as_i64).map(|v| v as i32);
            }
            push_field(&mut s, "payload", payload_schema);
            let mut values = vec![payload];
            for (alias, schema, v) in envelope_fields {
                push_field(&mut s, alias, schema);
                values.push(v);
            }
            let s = s.into_ref();
            (Some(s.clone()), Value::Struct(Struct::from_values(s, values)))
        };

        let (key_schema, key) = match &self.field_event_key {
            None => (Some(Schema::string().into_ref()), Value::Null),
            Some(k) => {
                let f = event_schema
                    .field(k)
                    .ok_or_else(|| data_error(NAME, format_args!("unable to find event key field `{k}` in the event")))?;
                (Some(f.schema.clone()), event.get(k).cloned().unwrap_or(Value::Null))
            }
        };
        let topic = self.router.route(&routed).unwrap_or(routed);
        Ok(Some(TransformRecord { topic, partition, key_schema, key, value_schema, value, timestamp, headers, origin: record.origin }))
    }
}

pub(crate) fn create(props: &Props) -> ConnectResult<Box<dyn Transform>> {
    let config = config_def().parse(props)?;
    let get = |k: &str| config.string(k);
    let mut additional = Vec::new();
    for item in config.list("table.fields.additional.placement") {
        let parts: Vec<&str> = item.split(':').map(str::trim).collect();
        let placement = match parts.get(1).map(|p| p.to_ascii_lowercase()).as_deref() {
            Some("header") => Placement::Header,
            Some("envelope") => Placement::Envelope,
            Some("partition") => Placement::Partition,
            _ => {
                return Err(ConnectError::config(
                    "table.fields.additional.placement",
                    format!(
                        "invalid entry '{item}': use column:header, column:envelope or column:partition, optionally followed by :alias"
                    ),
                ))
            }
        };
        if parts.len() > 3 {
            return Err(ConnectError::config(
                "table.fields.additional.placement",
                format!("invalid entry '{item}': at most column:placement:alias"),
            ));
        }
        let field = parts[0].to_owned();
        let alias = parts.get(2).map(|a| (*a).to_owned()).unwrap_or_else(|| field.clone());
        additional.push(AdditionalField { placement, field, alias });
    }
    let invalid_op = match get("table.op.invalid.behavior").unwrap_or_default().to_ascii_lowercase().as_str() {
        "error" => InvalidOp::Error,
        "fatal" => InvalidOp::Fatal,
        _ => InvalidOp::Warn,
    };
    let expand_json = config.boolean("table.expand.json.payload").then(|| JsonExpansion {
        null_as_optional_bytes: get("table.json.payload.null.behavior").is_some_and(|b| b.eq_ignore_ascii_case("optional_bytes")),
        empty_array_as_optional_string: get("table.json.payload.empty.array.behavior")
            .is_some_and(|b| b.eq_ignore_ascii_case("optional_string")),
    });
    let regex = get("route.topic.regex").unwrap_or_else(|| "(?<routedByValue>.*)".to_owned());
    let replacement = props.get("route.topic.replacement").cloned().unwrap_or_else(|| "outbox.event.${routedByValue}".to_owned());
    Ok(Box::new(EventRouter {
        invalid_op,
        field_event_id: get("table.field.event.id").unwrap_or_else(|| "id".to_owned()),
        field_event_key: get("table.field.event.key"),
        field_event_timestamp: get("table.field.event.timestamp"),
        field_payload: get("table.field.event.payload").unwrap_or_else(|| "payload".to_owned()),
        field_schema_version: get("table.field.event.schema.version"),
        route_by_field: get("route.by.field").unwrap_or_else(|| "aggregatetype".to_owned()),
        router: RegexRouter::new(&regex, &replacement, "route.topic.regex", "route.topic.replacement")?,
        route_tombstone_on_empty_payload: config.boolean("route.tombstone.on.empty.payload"),
        additional,
        ignore_missing_additional: get("table.field.additional.missing").is_some_and(|m| m.eq_ignore_ascii_case("ignore")),
        expand_json,
    }))
}
