use std::sync::Arc;

use async_trait::async_trait;
use sluice_api::{ConfigDef, ConnectResult, Connector, ConnectorContext, Props, Task};

use super::config::{self, JdbcSinkConfig};
use super::dialect::Dialect;
use super::task::JdbcSinkTask;
use super::writer::PgWriter;

#[derive(Default)]
pub struct JdbcSinkConnector {
    props: Props,
}

#[async_trait]
impl Connector for JdbcSinkConnector {
    fn config_def(&self) -> ConfigDef {
        config::def()
    }

    async fn start(&mut self, props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        JdbcSinkConfig::parse(props)?;
        self.props = props.clone();
        Ok(())
    }

    /// Every task gets the same configuration; the runtime splits the partitions.
    async fn task_configs(&mut self, max_tasks: usize) -> ConnectResult<Vec<Props>> {
        Ok(vec![self.props.clone(); max_tasks.max(1)])
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    fn create_task(&self) -> Task {
        Task::Sink(Box::<JdbcSinkTask>::default())
    }

    /// Rejected keys, then the typed checks, then a connection to the target.
    async fn validate_extra(&self, props: &Props) -> Vec<(String, String)> {
        let out = config::unsupported(props);
        if !out.is_empty() {
            return out;
        }
        let cfg = match JdbcSinkConfig::parse(props) {
            Ok(c) => c,
            Err(sluice_api::ConnectError::Config { key, message }) => return vec![(key, message)],
            Err(e) => return vec![(config::CONNECTION_URL.to_owned(), e.to_string())],
        };
        match PgWriter::new(Arc::new(cfg)).connect().await {
            Ok(()) => Vec::new(),
            Err(e) => vec![(config::CONNECTION_URL.to_owned(), connect_failure(&e))],
        }
    }
}

/// A failed connection in words: the server's reason when it gave one, else the transport's
/// (a TLS refusal names the key to change).
fn connect_failure(e: &super::dialect::WriteError) -> String {
    let Some(source) = e.source.as_deref() else { return e.message.clone() };
    if let Some(refused) = crate::pg_tls::find_refusal(source) {
        return format!("{}: {}", e.message, refused.message);
    }
    match source.downcast_ref::<tokio_postgres::Error>() {
        Some(pg) if pg.as_db_error().is_none() => format!("{}: {pg}", e.message),
        _ => e.message.clone(),
    }
}
