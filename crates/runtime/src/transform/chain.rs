//! A connector's transformation chain, read from its configuration exactly as Connect
//! reads it:
//!
//! ```text
//! transforms=a,b                      predicates=p
//! transforms.a.type=CLASS             predicates.p.type=CLASS
//! transforms.a.<key>=…                predicates.p.<key>=…
//! transforms.a.predicate=p
//! transforms.a.negate=true
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_api::{ConfigDef, ConfigKey, ConfigType, ConnectError, ConnectResult, Importance, Props};

use super::registry::{predicate_plugin, predicates, transform_plugin, transforms};
use super::{Predicate, Transform, TransformRecord};

const TRANSFORMS: &str = "transforms";
const PREDICATES: &str = "predicates";
const PREDICATE: &str = "predicate";
const NEGATE: &str = "negate";

struct Stage {
    alias: String,
    class: &'static str,
    transform: Box<dyn Transform>,
    /// The predicate and whether it is negated; the transform applies when
    /// `negate XOR predicate.test(record)`.
    predicate: Option<(Arc<dyn Predicate>, bool)>,
}

// Task loops share a chain across threads.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<TransformChain>();
};

/// The transforms of one connector, in order.
#[derive(Default)]
pub struct TransformChain {
    stages: Vec<Stage>,
}

impl std::fmt::Debug for TransformChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.stages.iter().map(|s| (&s.alias, s.class))).finish()
    }
}

impl TransformChain {
    /// Builds the chain from a connector's configuration. The first problem found is
    /// returned as a config error naming its key (e.g. `transforms.a.type`).
    pub fn from_connector_config(props: &Props) -> ConnectResult<Self> {
        let mut errors = Vec::new();
        let chain = build(props, &mut errors);
        match errors.into_iter().next() {
            Some((key, message)) => Err(ConnectError::config(key, message)),
            None => Ok(chain),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    pub fn len(&self) -> usize {
        self.stages.len()
    }

    /// The aliases of the stages, in order.
    pub fn aliases(&self) -> Vec<&str> {
        self.stages.iter().map(|s| s.alias.as_str()).collect()
    }

    /// Runs the record through every stage in order. `Ok(None)`: a stage dropped it and the
    /// stages after it did not run. `Err`: a stage failed; the error names the stage and keeps
    /// the transform's error as its source.
    pub fn apply(&self, record: TransformRecord) -> ConnectResult<Option<TransformRecord>> {
        let mut record = record;
        for stage in &self.stages {
            if let Some((predicate, negate)) = &stage.predicate {
                if predicate.test(&record) == *negate {
                    continue;
                }
            }
            match stage.transform.apply(record) {
                Ok(Some(next)) => record = next,
                Ok(None) => return Ok(None),
                Err(e) => return Err(ConnectError::fatal_from(format!("transformation {} ({}) failed", stage.alias, stage.class), e)),
            }
        }
        Ok(Some(record))
    }
}

/// Every problem with the transform and predicate keys of `props`, as `(key, message)`,
/// for the validate endpoint. Empty when the chain builds.
pub fn validate(props: &Props) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    build(props, &mut errors);
    errors
}

/// The keys the `transforms` and `predicates` aliases of `props` contribute (Connect's
/// `ConnectorConfig.enrich`): `transforms.<alias>.type`, `.predicate`, `.negate` and the
/// transform's own keys, then `predicates.<alias>.type` and the predicate's keys. Keys of an
/// alias whose class is unknown are limited to `type`.
pub fn enriched_config_def(props: &Props) -> ConfigDef {
    let mut def = ConfigDef::new();
    for alias in aliases(props, TRANSFORMS) {
        let prefix = format!("{TRANSFORMS}.{alias}.");
        let group = format!("Transforms: {alias}");
        def = def.define(
            ConfigKey::new(
                &format!("{prefix}type"),
                ConfigType::Class,
                Importance::High,
                &format!("Class for the '{alias}' transformation."),
            )
            .group(&group, 0, &format!("Transformation type for {alias}")),
        );
        def = def.define(
            ConfigKey::new(
                &format!("{prefix}{PREDICATE}"),
                ConfigType::String,
                Importance::Medium,
                "The alias of a predicate used to determine whether to apply this transformation.",
            )
            .default_value("")
            .group(&group, 1, PREDICATE),
        );
        def = def.define(
            ConfigKey::new(
                &format!("{prefix}{NEGATE}"),
                ConfigType::Boolean,
                Importance::Medium,
                "Whether the configured predicate should be negated.",
            )
            .default_value("false")
            .group(&group, 2, NEGATE),
        );
        if let Some(plugin) = props.get(&format!("{prefix}type")).and_then(|c| transform_plugin(c.trim())) {
            def = embed(def, &prefix, &group, 3, &(plugin.config_def)(), &[PREDICATE, NEGATE]);
        }
    }
    for alias in aliases(props, PREDICATES) {
        let prefix = format!("{PREDICATES}.{alias}.");
        let group = format!("Predicates: {alias}");
        def = def.define(
            ConfigKey::new(&format!("{prefix}type"), ConfigType::Class, Importance::High, &format!("Class for the '{alias}' predicate."))
                .group(&group, 0, &format!("Predicate type for {alias}")),
        );
        if let Some(plugin) = props.get(&format!("{prefix}type")).and_then(|c| predicate_plugin(c.trim())) {
            def = embed(def, &prefix, &group, 1, &(plugin.config_def)(), &[]);
        }
    }
    def
}

fn embed(mut def: ConfigDef, prefix: &str, group: &str, first_order: i32, own: &ConfigDef, masked: &[&str]) -> ConfigDef {
    let mut order = first_order;
    for k in own.keys() {
        if masked.contains(&k.name.as_str()) {
            continue;
        }
        let mut k = k.clone();
        k.name = format!("{prefix}{}", k.name);
        k.group = Some(group.to_owned());
        k.order_in_group = order;
        order += 1;
        def = def.define(k);
    }
    def
}

/// The aliases listed in `key` (a comma-separated list, trimmed, without empty items).
fn aliases(props: &Props, key: &str) -> Vec<String> {
    props.get(key).map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()).unwrap_or_default()
}

/// The keys under `prefix`, with the prefix removed and `skip` keys left out.
fn sub_props(props: &Props, prefix: &str, skip: &[&str]) -> Props {
    props
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(prefix).filter(|rest| !skip.contains(rest)).map(|rest| (rest.to_owned(), v.clone())))
        .collect()
}

fn unique_aliases(props: &Props, key: &str, errors: &mut Vec<(String, String)>) -> Vec<String> {
    let list = aliases(props, key);
    let mut seen = Vec::new();
    for a in &list {
        if seen.contains(a) {
            errors.push((key.to_owned(), format!("duplicate alias '{a}': each alias may appear once")));
        } else {
            seen.push(a.clone());
        }
    }
    seen
}

/// Turns a plugin's own config errors into errors on the prefixed keys; every other error
/// is reported on the `type` key.
fn plugin_errors(
    prefix: &str,
    def: &ConfigDef,
    own: &Props,
    create: impl FnOnce() -> ConnectResult<()>,
    errors: &mut Vec<(String, String)>,
) -> bool {
    let before = errors.len();
    for v in def.validate(own) {
        for e in v.errors {
            errors.push((format!("{prefix}{}", v.name), e));
        }
    }
    if errors.len() == before {
        match create() {
            Ok(()) => {}
            Err(ConnectError::Config { key, message }) => errors.push((format!("{prefix}{key}"), message)),
            Err(other) => errors.push((format!("{prefix}type"), other.to_string())),
        }
    }
    errors.len() == before
}

fn build(props: &Props, errors: &mut Vec<(String, String)>) -> TransformChain {
    let transform_aliases = unique_aliases(props, TRANSFORMS, errors);
    let predicate_aliases = unique_aliases(props, PREDICATES, errors);

    let mut built_predicates: BTreeMap<String, Arc<dyn Predicate>> = BTreeMap::new();
    for alias in &predicate_aliases {
        let prefix = format!("{PREDICATES}.{alias}.");
        let type_key = format!("{prefix}type");
        let Some(class) = props.get(&type_key).map(|c| c.trim()).filter(|c| !c.is_empty()) else {
            errors.push((
                type_key.clone(),
                format!("missing required configuration \"{type_key}\" which has no default value: set it to a predicate class"),
            ));
            continue;
        };
        let Some(plugin) = predicate_plugin(class) else {
            let known: Vec<&str> = predicates().iter().map(|p| p.class).collect();
            errors.push((type_key, format!("class {class} could not be found; available predicates are: {}", known.join(", "))));
            continue;
        };
        let own = sub_props(props, &prefix, &["type"]);
        let mut made = None;
        if plugin_errors(&prefix, &(plugin.config_def)(), &own, || (plugin.create)(&own).map(|p| made = Some(p)), errors) {
            if let Some(p) = made {
                built_predicates.insert(alias.clone(), Arc::from(p));
            }
        }
    }

    let mut stages = Vec::new();
    for alias in &transform_aliases {
        let prefix = format!("{TRANSFORMS}.{alias}.");
        let type_key = format!("{prefix}type");
        let predicate_key = format!("{prefix}{PREDICATE}");
        let negate_key = format!("{prefix}{NEGATE}");
        let predicate_alias = props.get(&predicate_key).map(|p| p.trim()).filter(|p| !p.is_empty());
        let mut negate = false;
        if let Some(raw) = props.get(&negate_key) {
            match raw.trim().to_ascii_lowercase().as_str() {
                "true" => negate = true,
                "false" => {}
                _ => errors.push((negate_key.clone(), format!("invalid value {raw}: expected true or false"))),
            }
            if predicate_alias.is_none() {
                errors.push((
                    negate_key.clone(),
                    format!("'{negate_key}' was provided but there is no '{predicate_key}' defining a predicate to be negated"),
                ));
            }
        }
        let mut predicate = None;
        if let Some(p) = predicate_alias {
            if !predicate_aliases.iter().any(|a| a == p) {
                errors.push((
                    predicate_key.clone(),
                    format!("predicate '{p}' is not defined: add it to 'predicates' and set 'predicates.{p}.type'"),
                ));
            } else if let Some(built) = built_predicates.get(p) {
                predicate = Some((built.clone(), negate));
            }
        }
        let Some(class) = props.get(&type_key).map(|c| c.trim()).filter(|c| !c.is_empty()) else {
            errors.push((
                type_key.clone(),
                format!("missing required configuration \"{type_key}\" which has no default value: set it to a transformation class"),
            ));
            continue;
        };
        let Some(plugin) = transform_plugin(class) else {
            let known: Vec<&str> = transforms().iter().map(|p| p.class).collect();
            errors.push((type_key, format!("class {class} could not be found; available transformations are: {}", known.join(", "))));
            continue;
        };
        let own = sub_props(props, &prefix, &["type", PREDICATE, NEGATE]);
        let mut made = None;
        if plugin_errors(&prefix, &(plugin.config_def)(), &own, || (plugin.create)(&own).map(|t| made = Some(t)), errors) {
            if let Some(transform) = made {
                stages.push(Stage { alias: alias.clone(), class: plugin.class, transform, predicate });
            }
        }
    }
    TransformChain { stages }
}
