use std::sync::Arc;

use async_trait::async_trait;
use sluice_api::{ConfigDef, ConnectResult, Connector, ConnectorContext, ExactlyOnceSupport, Props, Task};

use super::config::{self, DatagenConfig};
use super::task::DatagenTask;

#[derive(Default)]
pub struct DatagenConnector {
    props: Props,
}

#[async_trait]
impl Connector for DatagenConnector {
    fn config_def(&self) -> ConfigDef {
        config::def()
    }

    async fn start(&mut self, props: &Props, _ctx: Arc<dyn ConnectorContext>) -> ConnectResult<()> {
        DatagenConfig::parse(props)?;
        self.props = props.clone();
        Ok(())
    }

    /// `tasks.max` identical generators, each with its own `task.id`.
    async fn task_configs(&mut self, max_tasks: usize) -> ConnectResult<Vec<Props>> {
        Ok((0..max_tasks.max(1))
            .map(|i| {
                let mut p = self.props.clone();
                p.insert("task.id".to_owned(), i.to_string());
                p
            })
            .collect())
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        Ok(())
    }

    fn create_task(&self) -> Task {
        Task::Source(Box::<DatagenTask>::default())
    }

    /// A task restarted at a committed `current.iteration` generates the rows after it:
    /// with the records and offsets in one transaction, none is lost or repeated.
    fn exactly_once_support(&self, _props: &Props) -> Option<ExactlyOnceSupport> {
        Some(ExactlyOnceSupport::Supported)
    }
}
