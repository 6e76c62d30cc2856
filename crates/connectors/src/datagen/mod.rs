//! `datagen`: generates rows of a chosen shape at a chosen rate, for demos and benchmarks.
//! Accepts the keys of Confluent's `io.confluent.kafka.connect.datagen.DatagenConnector`
//! (`kafka.topic`, `quickstart`, `max.interval`, `iterations`, `random.seed`) plus our own
//! `records.per.second`, `batch.size` and `payload.bytes`.
//!
//! Source partition `{"task.id": N}`, offset `{"current.iteration": I}`, as Confluent's.

mod config;
mod connector;
mod shape;
mod task;

use sluice_api::{ConnectorKind, ConnectorPlugin};

pub const CLASS: &str = "io.confluent.kafka.connect.datagen.DatagenConnector";

pub fn plugin() -> ConnectorPlugin {
    ConnectorPlugin {
        class: CLASS,
        task_class: "io.confluent.kafka.connect.datagen.DatagenTask",
        aliases: &["datagen", "DatagenConnector"],
        kind: ConnectorKind::Source,
        version: env!("CARGO_PKG_VERSION"),
        create: || Box::new(connector::DatagenConnector::default()),
    }
}
