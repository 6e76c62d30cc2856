use std::sync::Arc;

use async_trait::async_trait;
use sluice_api::{ConfigDef, ConnectError, ConnectResult, Connector, ConnectorContext, Props, Task};

use super::catalog;
use super::config::{self, PostgresConfig};
use super::task::PostgresSourceTask;

#[derive(Default)]
pub struct PostgresConnector {
    props: Props,
}

#[async_trait]
impl Connector for PostgresConnector {
    fn config_def(&self) -> ConfigDef {
        config::def()
    }

    async fn start(&mut self, props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        PostgresConfig::parse(props)?;
        self.props = props.clone();
        Ok(())
    }

    /// One task: a replication slot has one reader.
    async fn task_configs(&mut self, _max_tasks: usize) -> ConnectResult<Vec<Props>> {
        Ok(vec![self.props.clone()])
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    fn create_task(&self) -> Task {
        Task::Source(Box::<PostgresSourceTask>::default())
    }

    /// Rejected keys, then the typed checks, then a connection to the database: wrong password, missing database
    /// and include-list entries that match no table are reported against their key.
    async fn validate_extra(&self, props: &Props) -> Vec<(String, String)> {
        let mut out = config::unsupported(props);
        if !out.is_empty() {
            return out;
        }
        if config::def().parse(props).is_err() {
            return out; // each key's definition reports its own error
        }
        // Typed checks beyond the definitions (e.g. unavailable.value.placeholder's hex:).
        let cfg = match PostgresConfig::parse(props) {
            Ok(cfg) => cfg,
            Err(ConnectError::Config { key, message }) => {
                out.push((key, message));
                return out;
            }
            Err(_) => return out,
        };
        let client = match catalog::connect(&cfg).await {
            Ok(c) => c,
            Err((key, e)) => {
                out.push((key, e.to_string()));
                return out;
            }
        };
        match catalog::missing_included_tables(&client, &cfg.filter).await {
            Ok(missing) => {
                for m in missing {
                    out.push((config::TABLE_INCLUDE_LIST.to_owned(), format!("no table matches {m:?} in database {:?}", cfg.dbname)));
                }
            }
            Err(e) => out.push((config::HOSTNAME.to_owned(), e.to_string())),
        }
        let wal_level = client.query_one("SHOW wal_level", &[]).await.map(|r| r.get::<_, String>(0));
        if let Ok(level) = wal_level {
            if level != "logical" {
                out.push((
                    config::HOSTNAME.to_owned(),
                    format!("the server runs with wal_level={level}; logical replication needs wal_level=logical"),
                ));
            }
        }
        out
    }
}
