//! `FileStreamSink`: writes each record's value as a line to a file, as Kafka's
//! `org.apache.kafka.connect.file.FileStreamSinkConnector` does (`value.toString()`).
//! Unlike Kafka's, `flush` fsyncs the file, so a committed offset never covers a line that
//! a crash could lose.

mod config;
mod connector;
mod task;

use sluice_api::{ConnectorKind, ConnectorPlugin};

pub const CLASS: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";

pub fn plugin() -> ConnectorPlugin {
    ConnectorPlugin {
        class: CLASS,
        task_class: "org.apache.kafka.connect.file.FileStreamSinkTask",
        aliases: &["FileStreamSink", "FileStreamSinkConnector"],
        kind: ConnectorKind::Sink,
        version: env!("CARGO_PKG_VERSION"),
        create: || Box::new(connector::FileSinkConnector::default()),
    }
}
