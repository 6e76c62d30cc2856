//! The keys a worker adds to every task config a connector generates, as Kafka Connect's
//! `Worker.connectorTaskConfigs` does: `task.class`, and for a sink the connector's `topics`
//! or `topics.regex` (a sink task reads what its connector was configured with, whatever the
//! connector put in the task's config).

use sluice_api::{ConnectorKind, ConnectorPlugin, Props};

pub fn with_worker_keys(generated: Vec<Props>, plugin: &ConnectorPlugin, connector: &Props) -> Vec<Props> {
    generated
        .into_iter()
        .map(|mut task| {
            task.insert("task.class".to_owned(), plugin.task_class.to_owned());
            if plugin.kind == ConnectorKind::Sink {
                for key in ["topics", "topics.regex"] {
                    if let Some(v) = connector.get(key) {
                        task.insert(key.to_owned(), v.clone());
                    }
                }
            }
            task
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Props {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn plugin(kind: ConnectorKind) -> ConnectorPlugin {
        ConnectorPlugin {
            class: "x.Connector",
            aliases: &[],
            kind,
            version: "1",
            task_class: "x.Task",
            create: || unreachable!("not created here"),
        }
    }

    #[test]
    fn every_task_gets_its_class_and_a_sink_its_connectors_topics() {
        let connector = props(&[("topics", "a,b"), ("name", "c")]);
        let sink = with_worker_keys(vec![props(&[("k", "1"), ("topics", "stale")]), props(&[])], &plugin(ConnectorKind::Sink), &connector);
        assert_eq!(sink[0], props(&[("k", "1"), ("task.class", "x.Task"), ("topics", "a,b")]));
        assert_eq!(sink[1], props(&[("task.class", "x.Task"), ("topics", "a,b")]));
        let source = with_worker_keys(vec![props(&[("file", "f")])], &plugin(ConnectorKind::Source), &connector);
        assert_eq!(source, vec![props(&[("file", "f"), ("task.class", "x.Task")])]);
    }
}
