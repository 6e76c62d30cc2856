//! Scaling signals: `GET /connectors/{name}/scaling` and the worker's
//! `sluice_worker_desired_replicas` gauge.
//!
//! For a connector: how many tasks it has, the most that can help (the partitions of a
//! sink's topics; one for a source that reads one stream, such as a replication slot or a
//! change stream), and a recommended count from the busy ratio of its tasks on the answering
//! worker (the share of time a task spends in its own work) and, for a sink, its lag:
//! - busy above 0.8: as many tasks as bring the ratio to 0.6, up to the useful maximum;
//! - busy below 0.2 with more than one task: fewer, by the same rule, at least one;
//! - otherwise the current count.
//!
//! For the worker: the load of its tasks (the sum of their busy ratios) over what 70% of its
//! cores can carry, rounded up; summed over the workers it is the group's desired size,
//! which an autoscaler (KEDA's Prometheus scaler, an HPA on external metrics) can follow:
//! `sum(sluice_worker_desired_replicas)`.

use serde::Serialize;
use sluice_api::{ConnectorKind, Props};

/// Above this busy ratio a connector wants more tasks.
pub const HIGH: f64 = 0.8;
/// Below this it wants fewer.
pub const LOW: f64 = 0.2;
/// The busy ratio a recommendation aims at.
pub const TARGET: f64 = 0.6;
/// The share of a worker's cores its tasks may keep busy before it wants company.
pub const WORKER_TARGET: f64 = 0.7;

/// Source connectors that read one ordered stream, whatever `tasks.max` says.
const SINGLE_STREAM: &[(&str, &str)] = &[
    ("io.debezium.connector.postgresql.PostgresConnector", "a Postgres source reads one replication slot, one ordered stream"),
    ("io.debezium.connector.mongodb.MongoDbConnector", "a MongoDB source reads one change stream"),
    ("org.apache.kafka.connect.file.FileStreamSourceConnector", "a file source reads one file"),
];

/// `GET /connectors/{name}/scaling`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ConnectorKind,
    pub worker_id: String,
    /// Tasks the connector has now.
    pub tasks: u32,
    pub tasks_max: u32,
    /// The most tasks that can help; `None` when unknown.
    pub max_useful_tasks: Option<u32>,
    pub recommended_tasks: u32,
    pub scalable: bool,
    pub reason: String,
    /// The mean busy ratio of its tasks on the answering worker (`None`: none run here).
    pub busy_ratio: Option<f64>,
    /// A sink's records past its committed offsets, over its tasks on this worker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag_records: Option<f64>,
    /// How many of its tasks the answering worker runs (what the figures cover).
    pub local_tasks: usize,
}

/// What the answering worker sees of one task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskLoad {
    pub busy: f64,
    pub lag: Option<f64>,
}

pub struct Inputs<'a> {
    pub name: &'a str,
    pub class: &'a str,
    pub kind: ConnectorKind,
    pub worker_id: String,
    pub config: &'a Props,
    pub tasks: u32,
    /// For a sink: the partitions of its topics, when they are listed (`topics`).
    pub partitions: Option<u32>,
    pub loads: &'a [TaskLoad],
}

pub fn assess(i: Inputs<'_>) -> ScalingInfo {
    let tasks_max = i.config.get("tasks.max").and_then(|v| v.trim().parse::<u32>().ok()).unwrap_or(1).max(1);
    let single = SINGLE_STREAM.iter().find(|(c, _)| *c == i.class).map(|(_, why)| *why);
    let (max_useful, limit_reason) = match (i.kind, single) {
        (ConnectorKind::Source, Some(why)) => (Some(1), Some(why.to_owned())),
        (ConnectorKind::Source, None) => (None, None),
        (ConnectorKind::Sink, _) => match i.partitions {
            Some(p) => (Some(p.max(1)), Some(format!("a sink task needs a partition of its own: its topics have {p}"))),
            None => (None, None),
        },
    };
    let busy = (!i.loads.is_empty()).then(|| i.loads.iter().map(|l| l.busy).sum::<f64>() / i.loads.len() as f64);
    let lag = (i.kind == ConnectorKind::Sink && i.loads.iter().any(|l| l.lag.is_some()))
        .then(|| i.loads.iter().filter_map(|l| l.lag).sum::<f64>());
    let current = i.tasks.max(1);
    let (mut recommended, mut reason) = match busy {
        None => (current, "none of its tasks runs on this worker: ask the worker that runs them".to_owned()),
        Some(b) if b > HIGH => ((f64::from(current) * b / TARGET).ceil() as u32, format!("busy ratio {b:.2} is above {HIGH}")),
        Some(b) if b < LOW && current > 1 => {
            ((f64::from(current) * b / TARGET).ceil().max(1.0) as u32, format!("busy ratio {b:.2} is below {LOW}"))
        }
        Some(b) => (current, format!("busy ratio {b:.2} is within {LOW}..{HIGH}")),
    };
    if let Some(max) = max_useful {
        if recommended > max {
            recommended = max;
            reason = format!("{reason}; capped at {max}: {}", limit_reason.clone().unwrap_or_default());
        }
    }
    let scalable = max_useful.is_none_or(|m| m > 1);
    if !scalable {
        reason = format!("not scalable: {}", limit_reason.unwrap_or_default());
    }
    ScalingInfo {
        name: i.name.to_owned(),
        kind: i.kind,
        worker_id: i.worker_id,
        tasks: i.tasks,
        tasks_max,
        max_useful_tasks: max_useful,
        recommended_tasks: recommended,
        scalable,
        reason,
        busy_ratio: busy,
        lag_records: lag,
        local_tasks: i.loads.len(),
    }
}

/// The workers the given load (summed busy ratios) needs at [`WORKER_TARGET`] of `cores`.
pub fn desired_replicas(load: f64, cores: usize) -> u32 {
    let capacity = cores.max(1) as f64 * WORKER_TARGET;
    ((load / capacity).ceil() as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs<'a>(
        kind: ConnectorKind,
        class: &'a str,
        config: &'a Props,
        tasks: u32,
        partitions: Option<u32>,
        loads: &'a [TaskLoad],
    ) -> Inputs<'a> {
        Inputs { name: "c", class, kind, worker_id: "w:1".into(), config, tasks, partitions, loads }
    }

    fn load(busy: f64, lag: Option<f64>) -> TaskLoad {
        TaskLoad { busy, lag }
    }

    #[test]
    fn a_busy_sink_wants_more_tasks_up_to_its_partitions() {
        let config: Props = [("tasks.max".to_owned(), "2".to_owned())].into_iter().collect();
        let loads = [load(0.95, Some(5000.0)), load(0.9, Some(3000.0))];
        let s = assess(inputs(ConnectorKind::Sink, "x.Sink", &config, 2, Some(6), &loads));
        assert_eq!((s.recommended_tasks, s.max_useful_tasks, s.scalable), (4, Some(6), true));
        assert_eq!(s.lag_records, Some(8000.0));
        let s = assess(inputs(ConnectorKind::Sink, "x.Sink", &config, 2, Some(3), &loads));
        assert_eq!(s.recommended_tasks, 3);
        assert!(s.reason.contains("capped at 3"), "{}", s.reason);
    }

    #[test]
    fn an_idle_connector_wants_fewer_and_a_steady_one_keeps_its_count() {
        let config = Props::new();
        let loads = [load(0.05, None), load(0.05, None), load(0.05, None), load(0.05, None)];
        assert_eq!(assess(inputs(ConnectorKind::Source, "x.Gen", &config, 4, None, &loads)).recommended_tasks, 1);
        let loads = [load(0.5, None)];
        assert_eq!(assess(inputs(ConnectorKind::Source, "x.Gen", &config, 1, None, &loads)).recommended_tasks, 1);
        let s = assess(inputs(ConnectorKind::Source, "x.Gen", &config, 3, None, &[]));
        assert_eq!((s.recommended_tasks, s.busy_ratio), (3, None));
    }

    #[test]
    fn a_replication_slot_is_not_scalable() {
        let config = Props::new();
        let loads = [load(1.0, None)];
        let s = assess(inputs(ConnectorKind::Source, "io.debezium.connector.postgresql.PostgresConnector", &config, 1, None, &loads));
        assert!(!s.scalable);
        assert_eq!((s.recommended_tasks, s.max_useful_tasks), (1, Some(1)));
        assert!(s.reason.contains("replication slot"), "{}", s.reason);
    }

    #[test]
    fn desired_replicas_from_load() {
        assert_eq!(desired_replicas(0.0, 2), 1);
        assert_eq!(desired_replicas(1.4, 2), 1);
        assert_eq!(desired_replicas(1.5, 2), 2);
        assert_eq!(desired_replicas(5.0, 2), 4);
    }
}
