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

    pub fn list(&self, connectors_only: bool) -> Vec<PluginInfo> {
        let mut out: Vec<PluginInfo> = self
            .connectors
            .iter()
            .map(|p| PluginInfo { class: p.class.to_owned(), kind: p.kind.name().to_owned(), version: p.version.to_owned() })
            .collect();
        if !connectors_only {
            out.extend(convert::converters().iter().map(|c| PluginInfo {
                class: c.class.to_owned(),
                kind: "converter".to_owned(),
                version: VERSION.to_owned(),
            }));
            out.extend(convert::header_converters().iter().map(|c| PluginInfo {
                class: c.class.to_owned(),
                kind: "header_converter".to_owned(),
                version: VERSION.to_owned(),
            }));
            out.extend(transform::transforms().iter().map(|t| PluginInfo {
                class: t.class.to_owned(),
                kind: "transformation".to_owned(),
                version: VERSION.to_owned(),
            }));
            out.extend(transform::predicates().iter().map(|p| PluginInfo {
                class: p.class.to_owned(),
                kind: "predicate".to_owned(),
                version: VERSION.to_owned(),
            }));
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
