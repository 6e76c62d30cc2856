//! The connectors compiled into sluice, one module each, and the explicit registry.
//!
//! Every module has the same files: `mod.rs` (registration), `config.rs` (keys, defaults,
//! typed config), `connector.rs` (task splitting), `task.rs` (the work).

pub mod datagen;
pub mod discard;
pub mod file_sink;
pub mod file_source;
pub mod jdbc_sink;
pub mod pg_tls;
pub mod postgres;
#[cfg(feature = "s3")]
pub mod s3_sink;

use sluice_api::ConnectorPlugin;

/// Every built-in connector with the Java class names users already have in their JSON.
pub fn connectors() -> Vec<ConnectorPlugin> {
    let mut all = vec![file_source::plugin(), file_sink::plugin(), datagen::plugin(), discard::plugin(), postgres::plugin()];
    all.extend(jdbc_sink::plugins());
    #[cfg(feature = "s3")]
    all.push(s3_sink::plugin());
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique() {
        let all = connectors();
        let mut names: Vec<&str> = all.iter().flat_map(|p| std::iter::once(p.class).chain(p.aliases.iter().copied())).collect();
        let before = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(before, names.len());
        assert!(all.iter().any(|p| p.matches("org.apache.kafka.connect.file.FileStreamSourceConnector")));
        assert!(all.iter().any(|p| p.matches("FileStreamSink")));
        assert!(all.iter().any(|p| p.matches("io.debezium.connector.postgresql.PostgresConnector")));
        assert!(all.iter().any(|p| p.matches("postgres")));
        assert!(all.iter().any(|p| p.matches("io.confluent.connect.jdbc.JdbcSinkConnector")));
        assert!(all.iter().any(|p| p.matches("io.debezium.connector.jdbc.JdbcSinkConnector")));
        assert!(all.iter().any(|p| p.matches("jdbc-sink")));
        #[cfg(feature = "s3")]
        assert!(all.iter().any(|p| p.matches("io.confluent.connect.s3.S3SinkConnector")) && all.iter().any(|p| p.matches("s3")));
    }
}
