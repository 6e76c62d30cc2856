use std::sync::Arc;

use async_trait::async_trait;
use sluice_api::{ConfigDef, ConnectResult, Connector, ConnectorContext, Props, Task};

use super::config::{self, FileSourceConfig};
use super::task::FileSourceTask;

#[derive(Default)]
pub struct FileSourceConnector {
    props: Props,
}

#[async_trait]
impl Connector for FileSourceConnector {
    fn config_def(&self) -> ConfigDef {
        config::def()
    }

    async fn start(&mut self, props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        FileSourceConfig::parse(props)?;
        self.props = props.clone();
        Ok(())
    }

    /// One task: a file has one reader. Its config is the connector's, as Kafka 4's
    /// FileStreamSourceConnector gives it.
    async fn task_configs(&mut self, _max_tasks: usize) -> ConnectResult<Vec<Props>> {
        Ok(vec![self.props.clone()])
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    fn create_task(&self) -> Task {
        Task::Source(Box::<FileSourceTask>::default())
    }
}
