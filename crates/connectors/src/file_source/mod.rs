//! `FileStreamSource`: each new line of a file becomes a record with a string value, as
//! Kafka's `org.apache.kafka.connect.file.FileStreamSourceConnector` does. The source
//! partition is `{"filename": FILE}` and the offset `{"position": BYTES}`, so a restart
//! continues after the last committed line.

mod config;
mod connector;
mod task;

use sluice_api::{ConnectorKind, ConnectorPlugin};

pub use config::FileSourceConfig;

pub const CLASS: &str = "org.apache.kafka.connect.file.FileStreamSourceConnector";

pub fn plugin() -> ConnectorPlugin {
    ConnectorPlugin {
        class: CLASS,
        task_class: "org.apache.kafka.connect.file.FileStreamSourceTask",
        aliases: &["FileStreamSource", "FileStreamSourceConnector"],
        kind: ConnectorKind::Source,
        version: env!("CARGO_PKG_VERSION"),
        create: || Box::new(connector::FileSourceConnector::default()),
    }
}
