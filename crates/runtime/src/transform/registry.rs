//! The built-in transforms and predicates, by the Java class names users already have in
//! their connector JSON. One entry per `$Key` / `$Value` variant. The short aliases are a
//! convenience beyond Connect (which only aliases classes whose simple name is unique).

use sluice_api::{ConfigDef, ConnectResult, Props};

use super::debezium::{event_router, extract_new_record_state};
use super::record::Side;
use super::{
    cast, drop_headers, extract_field, filter, flatten, header_from, hoist_field, insert_field, insert_header, mask_field,
    predicates as preds, regex_router, replace_field, set_schema_metadata, timestamp_converter, timestamp_router, value_to_key, Predicate,
    Transform,
};

/// A transform in the registry.
#[derive(Clone, Copy)]
pub struct TransformPlugin {
    /// The Java class name, e.g. `org.apache.kafka.connect.transforms.InsertField$Value`.
    pub class: &'static str,
    pub aliases: &'static [&'static str],
    pub doc: &'static str,
    pub config_def: fn() -> ConfigDef,
    /// Builds the transform from its own keys (`transforms.<alias>.` removed; without `type`,
    /// `predicate` and `negate`). Config errors name the key without the prefix.
    pub create: fn(&Props) -> ConnectResult<Box<dyn Transform>>,
}

impl TransformPlugin {
    pub fn matches(&self, name: &str) -> bool {
        self.class == name || self.aliases.contains(&name)
    }
}

/// A predicate in the registry.
#[derive(Clone, Copy)]
pub struct PredicatePlugin {
    pub class: &'static str,
    pub aliases: &'static [&'static str],
    pub doc: &'static str,
    pub config_def: fn() -> ConfigDef,
    pub create: fn(&Props) -> ConnectResult<Box<dyn Predicate>>,
}

impl PredicatePlugin {
    pub fn matches(&self, name: &str) -> bool {
        self.class == name || self.aliases.contains(&name)
    }
}

macro_rules! kafka {
    ($simple:literal) => {
        concat!("org.apache.kafka.connect.transforms.", $simple)
    };
}

macro_rules! plugin {
    ($class:expr, [$($alias:expr),*], $doc:expr, $module:ident, $create:expr) => {
        TransformPlugin { class: $class, aliases: &[$($alias),*], doc: $doc, config_def: $module::config_def, create: $create }
    };
}

static TRANSFORMS: &[TransformPlugin] = &[
    plugin!(kafka!("Cast$Key"), ["Cast$Key"], cast::DOC, cast, |p| cast::create(p, Side::Key)),
    plugin!(kafka!("Cast$Value"), ["Cast$Value"], cast::DOC, cast, |p| cast::create(p, Side::Value)),
    plugin!(kafka!("DropHeaders"), ["DropHeaders"], drop_headers::DOC, drop_headers, drop_headers::create),
    plugin!(kafka!("ExtractField$Key"), ["ExtractField$Key"], extract_field::DOC, extract_field, |p| extract_field::create(p, Side::Key)),
    plugin!(kafka!("ExtractField$Value"), ["ExtractField$Value"], extract_field::DOC, extract_field, |p| extract_field::create(
        p,
        Side::Value
    )),
    plugin!(kafka!("Filter"), ["Filter"], filter::DOC, filter, filter::create),
    plugin!(kafka!("Flatten$Key"), ["Flatten$Key"], flatten::DOC, flatten, |p| flatten::create(p, Side::Key)),
    plugin!(kafka!("Flatten$Value"), ["Flatten$Value"], flatten::DOC, flatten, |p| flatten::create(p, Side::Value)),
    plugin!(kafka!("HeaderFrom$Key"), ["HeaderFrom$Key"], header_from::DOC, header_from, |p| header_from::create(p, Side::Key)),
    plugin!(kafka!("HeaderFrom$Value"), ["HeaderFrom$Value"], header_from::DOC, header_from, |p| header_from::create(p, Side::Value)),
    plugin!(kafka!("HoistField$Key"), ["HoistField$Key"], hoist_field::DOC, hoist_field, |p| hoist_field::create(p, Side::Key)),
    plugin!(kafka!("HoistField$Value"), ["HoistField$Value"], hoist_field::DOC, hoist_field, |p| hoist_field::create(p, Side::Value)),
    plugin!(kafka!("InsertField$Key"), ["InsertField$Key"], insert_field::DOC, insert_field, |p| insert_field::create(p, Side::Key)),
    plugin!(kafka!("InsertField$Value"), ["InsertField$Value"], insert_field::DOC, insert_field, |p| insert_field::create(p, Side::Value)),
    plugin!(kafka!("InsertHeader"), ["InsertHeader"], insert_header::DOC, insert_header, insert_header::create),
    plugin!(kafka!("MaskField$Key"), ["MaskField$Key"], mask_field::DOC, mask_field, |p| mask_field::create(p, Side::Key)),
    plugin!(kafka!("MaskField$Value"), ["MaskField$Value"], mask_field::DOC, mask_field, |p| mask_field::create(p, Side::Value)),
    plugin!(kafka!("RegexRouter"), ["RegexRouter"], regex_router::DOC, regex_router, regex_router::create),
    plugin!(kafka!("ReplaceField$Key"), ["ReplaceField$Key"], replace_field::DOC, replace_field, |p| replace_field::create(p, Side::Key)),
    plugin!(kafka!("ReplaceField$Value"), ["ReplaceField$Value"], replace_field::DOC, replace_field, |p| replace_field::create(
        p,
        Side::Value
    )),
    plugin!(kafka!("SetSchemaMetadata$Key"), ["SetSchemaMetadata$Key"], set_schema_metadata::DOC, set_schema_metadata, |p| {
        set_schema_metadata::create(p, Side::Key)
    }),
    plugin!(kafka!("SetSchemaMetadata$Value"), ["SetSchemaMetadata$Value"], set_schema_metadata::DOC, set_schema_metadata, |p| {
        set_schema_metadata::create(p, Side::Value)
    }),
    plugin!(kafka!("TimestampConverter$Key"), ["TimestampConverter$Key"], timestamp_converter::DOC, timestamp_converter, |p| {
        timestamp_converter::create(p, Side::Key)
    }),
    plugin!(kafka!("TimestampConverter$Value"), ["TimestampConverter$Value"], timestamp_converter::DOC, timestamp_converter, |p| {
        timestamp_converter::create(p, Side::Value)
    }),
    plugin!(kafka!("TimestampRouter"), ["TimestampRouter"], timestamp_router::DOC, timestamp_router, timestamp_router::create),
    plugin!(kafka!("ValueToKey"), ["ValueToKey"], value_to_key::DOC, value_to_key, value_to_key::create),
    plugin!(
        "io.debezium.transforms.ExtractNewRecordState",
        ["ExtractNewRecordState"],
        extract_new_record_state::DOC,
        extract_new_record_state,
        extract_new_record_state::create
    ),
    plugin!("io.debezium.transforms.outbox.EventRouter", ["EventRouter"], event_router::DOC, event_router, event_router::create),
];

static PREDICATES: &[PredicatePlugin] = &[
    PredicatePlugin {
        class: "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        aliases: &["HasHeaderKey"],
        doc: preds::HAS_HEADER_KEY_DOC,
        config_def: preds::has_header_key_config_def,
        create: preds::create_has_header_key,
    },
    PredicatePlugin {
        class: "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
        aliases: &["RecordIsTombstone"],
        doc: preds::RECORD_IS_TOMBSTONE_DOC,
        config_def: preds::record_is_tombstone_config_def,
        create: preds::create_record_is_tombstone,
    },
    PredicatePlugin {
        class: "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        aliases: &["TopicNameMatches"],
        doc: preds::TOPIC_NAME_MATCHES_DOC,
        config_def: preds::topic_name_matches_config_def,
        create: preds::create_topic_name_matches,
    },
];

/// Every built-in transform.
pub fn transforms() -> &'static [TransformPlugin] {
    TRANSFORMS
}

/// Every built-in predicate.
pub fn predicates() -> &'static [PredicatePlugin] {
    PREDICATES
}

/// The transform whose class name or alias is `name`.
pub fn transform_plugin(name: &str) -> Option<&'static TransformPlugin> {
    TRANSFORMS.iter().find(|p| p.matches(name))
}

/// The predicate whose class name or alias is `name`.
pub fn predicate_plugin(name: &str) -> Option<&'static PredicatePlugin> {
    PREDICATES.iter().find(|p| p.matches(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transform_registry_lists_every_class_once() {
        let mut classes: Vec<&str> = transforms().iter().map(|p| p.class).collect();
        classes.sort_unstable();
        let n = classes.len();
        classes.dedup();
        assert_eq!(classes.len(), n);
        assert_eq!(n, 28);
        assert!(transform_plugin("org.apache.kafka.connect.transforms.InsertField$Value").is_some());
        assert!(transform_plugin("InsertField$Key").is_some());
        assert!(transform_plugin("io.debezium.transforms.outbox.EventRouter").is_some());
        assert!(predicate_plugin("TopicNameMatches").is_some());
        for p in transforms() {
            assert!(p.class.starts_with("org.apache.kafka.connect.transforms.") || p.class.starts_with("io.debezium."), "{}", p.class);
            let _ = (p.config_def)();
        }
    }
}
