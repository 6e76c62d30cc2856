//! The plugins a worker knows: the connectors handed to it (the binary passes the built-in
//! registry) and the converters compiled into the runtime.

use sluice_api::{ConfigDef, ConnectorPlugin};

use crate::herder::PluginInfo;
use crate::{convert, transform};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub struct Plugins {
    connectors: Vec<ConnectorPlugin>,
}

impl Plugins {
    pub fn new(connectors: Vec<ConnectorPlugin>) -> Self {
        Self { connectors }
    }

    /// The connector whose class name or alias is `name`.
    pub fn connector(&self, name: &str) -> Option<&ConnectorPlugin> {
        self.connectors.iter().find(|p| p.matches(name))
    }

    /// Class names of every connector, for error messages.
    pub fn connector_classes(&self) -> Vec<&'static str> {
        self.connectors.iter().map(|p| p.class).collect()
    }

    /// Kafka Connect's order: sink connectors, source connectors, transformations, predicates,
    /// converters, header converters, each sorted by class name.
    pub fn list(&self, connectors_only: bool) -> Vec<PluginInfo> {
        let info = |class: &str, kind: &str, version: &str| PluginInfo { class: class.to_owned(), kind: kind.to_owned(), version: version.to_owned() };
        let sorted = |mut group: Vec<PluginInfo>| {
            group.sort_by(|a, b| a.class.cmp(&b.class));
            group
        };
        let connectors = |kind: sluice_api::ConnectorKind| {
            sorted(self.connectors.iter().filter(|p| p.kind == kind).map(|p| info(p.class, p.kind.name(), p.version)).collect())
        };
        let mut out = connectors(sluice_api::ConnectorKind::Sink);
        out.extend(connectors(sluice_api::ConnectorKind::Source));
        if !connectors_only {
            out.extend(sorted(transform::transforms().iter().map(|t| info(t.class, "transformation", VERSION)).collect()));
            out.extend(sorted(transform::predicates().iter().map(|p| info(p.class, "predicate", VERSION)).collect()));
            out.extend(sorted(convert::converters().iter().map(|c| info(c.class, "converter", VERSION)).collect()));
            out.extend(sorted(convert::header_converters().iter().map(|c| info(c.class, "header_converter", VERSION)).collect()));
        }
        out
    }

    /// The configuration definition of any plugin, by class name or alias.
    pub fn config_def(&self, name: &str) -> Option<ConfigDef> {
        if let Some(p) = self.connector(name) {
            return Some((p.create)().config_def());
        }
        if let Some(c) = convert::find_converter(name) {
            return Some((c.config_def)());
        }
        if let Some(c) = convert::find_header_converter(name) {
            return Some((c.config_def)());
        }
        if let Some(t) = transform::transform_plugin(name) {
            return Some((t.config_def)());
        }
        transform::predicate_plugin(name).map(|p| (p.config_def)())
    }
}
