use std::sync::Arc;

use async_trait::async_trait;
use sluice_api::{ConfigDef, ConnectResult, Connector, ConnectorContext, Props, Task};

use super::config::{self, FileSinkConfig};
use super::task::FileSinkTask;

#[derive(Default)]
pub struct FileSinkConnector {
    props: Props,
}

#[async_trait]
impl Connector for FileSinkConnector {
    fn config_def(&self) -> ConfigDef {
        config::def()
    }

    async fn start(&mut self, props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        FileSinkConfig::parse(props)?;
        self.props = props.clone();
        Ok(())
    }

    /// Every task gets the same config (they append to the same file, as in Kafka).
    async fn task_configs(&mut self, max_tasks: usize) -> ConnectResult<Vec<Props>> {
        Ok(vec![self.props.clone(); max_tasks.max(1)])
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    fn create_task(&self) -> Task {
        Task::Sink(Box::<FileSinkTask>::default())
    }
}
