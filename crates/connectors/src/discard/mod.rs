//! `discard`: a sink that drops every record after it has been read and converted, and
//! commits its offsets. For benchmarks (the log and converters are what is measured) and
//! for draining a topic.

mod config;
mod connector;
mod task;

use sluice_api::{ConnectorKind, ConnectorPlugin};

pub const CLASS: &str = "sluice.connect.DiscardSinkConnector";

pub fn plugin() -> ConnectorPlugin {
    ConnectorPlugin {
        class: CLASS,
        task_class: "sluice.connect.DiscardSinkTask",
        aliases: &["discard", "DiscardSink", "DiscardSinkConnector"],
        kind: ConnectorKind::Sink,
        version: env!("CARGO_PKG_VERSION"),
        create: || Box::new(connector::DiscardConnector::default()),
    }
}
