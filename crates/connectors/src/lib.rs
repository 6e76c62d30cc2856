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
pub mod signal_kafka;
pub mod value_json;

use std::sync::Arc;

use sluice_api::{ConfigDef, ConnectResult, Connector, ConnectorContext, ConnectorPlugin, ExactlyOnceSupport, Props, Task};

/// Every built-in connector with the Java class names users already have in their JSON.
pub fn connectors() -> Vec<ConnectorPlugin> {
    let mut all = vec![file_source::plugin(), file_sink::plugin(), datagen::plugin(), discard::plugin(), postgres_source()];
    all.extend(jdbc_sink::plugins());
    #[cfg(feature = "s3")]
    all.push(s3_sink::plugin());
    all
}

/// The Postgres source, declared exactly-once capable: a task restarted at a committed
/// offset resumes the replication stream at that LSN (the slot is confirmed only up to
/// committed offsets), as Debezium's connector declares it for KIP-618.
// The declaration belongs in `postgres/connector.rs`; it lives here until that module is
// next changed.
fn postgres_source() -> ConnectorPlugin {
    ConnectorPlugin { create: || Box::new(ExactlyOnceCapable((postgres::plugin().create)())), ..postgres::plugin() }
}

/// A connector that answers [`Connector::exactly_once_support`] with `Supported` and is
/// otherwise the one it wraps.
struct ExactlyOnceCapable(Box<dyn Connector>);

#[async_trait::async_trait]
impl Connector for ExactlyOnceCapable {
    fn config_def(&self) -> ConfigDef {
        self.0.config_def()
    }

    async fn start(&mut self, props: &Props, ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        self.0.start(props, ctx).await
    }

    async fn task_configs(&mut self, max_tasks: usize) -> ConnectResult<Vec<Props>> {
        self.0.task_configs(max_tasks).await
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        self.0.stop().await
    }

    fn create_task(&self) -> Task {
        self.0.create_task()
    }

    async fn validate_extra(&self, props: &Props) -> Vec<(String, String)> {
        self.0.validate_extra(props).await
    }

    fn exactly_once_support(&self, _props: &Props) -> Option<ExactlyOnceSupport> {
        Some(ExactlyOnceSupport::Supported)
    }
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
