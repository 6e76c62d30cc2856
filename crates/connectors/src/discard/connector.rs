use std::sync::Arc;

use async_trait::async_trait;
use sluice_api::{ConfigDef, ConnectResult, Connector, ConnectorContext, Props, Task};

use super::config;
use super::task::DiscardTask;

#[derive(Default)]
pub struct DiscardConnector {
    props: Props,
}

#[async_trait]
impl Connector for DiscardConnector {
    fn config_def(&self) -> ConfigDef {
        config::def()
    }

    async fn start(&mut self, props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        self.props = props.clone();
        Ok(())
    }

    async fn task_configs(&mut self, max_tasks: usize) -> ConnectResult<Vec<Props>> {
        Ok(vec![self.props.clone(); max_tasks.max(1)])
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    fn create_task(&self) -> Task {
        Task::Sink(Box::<DiscardTask>::default())
    }
}
