use std::sync::Arc;

use async_trait::async_trait;
use sluice_api::{ConfigDef, ConnectResult, Connector, ConnectorContext, Props, Task};

use super::config::{self, S3SinkConfig};
use super::storage::Store;
use super::task::S3SinkTask;

#[derive(Default)]
pub struct S3SinkConnector {
    props: Props,
}

#[async_trait]
impl Connector for S3SinkConnector {
    fn config_def(&self) -> ConfigDef {
        config::def()
    }

    async fn start(&mut self, props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        S3SinkConfig::parse(props)?;
        self.props = props.clone();
        Ok(())
    }

    /// Every task gets the same config; the runtime splits the topic partitions among them.
    async fn task_configs(&mut self, max_tasks: usize) -> ConnectResult<Vec<Props>> {
        Ok(vec![self.props.clone(); max_tasks.max(1)])
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    fn create_task(&self) -> Task {
        Task::Sink(Box::<S3SinkTask>::default())
    }

    /// Rejected keys, then combinations of keys, then the bucket: a missing bucket or refused credentials are reported
    /// against their key (an unreachable store is not an error here).
    async fn validate_extra(&self, props: &Props) -> Vec<(String, String)> {
        let mut out = config::unsupported(props);
        if !out.is_empty() {
            return out;
        }
        let cfg = match S3SinkConfig::parse(props) {
            Ok(c) => c,
            // Combinations a single key's validator cannot see (e.g. a KMS key id without
            // s3.ssea.name=aws:kms), against the key they name.
            Err(sluice_api::ConnectError::Config { key, message }) => return vec![(key, message)],
            Err(_) => return out,
        };
        let store = Store::connect(&cfg, None).await;
        match store.check_bucket().await {
            Ok(()) => {}
            // A store that does not answer right now may later: the task retries.
            Err(e) if e.is_retriable() => tracing::warn!(error = %e.trace(), "could not check the bucket while validating"),
            Err(e) => {
                let key = if e.to_string().contains("does not exist") { config::BUCKET } else { config::ACCESS_KEY_ID };
                out.push((key.to_owned(), e.to_string()));
            }
        }
        out
    }
}
