//! Values a connector's task publishes for the worker's `GET /metrics` (Debezium's
//! streaming and snapshot metrics, a replication slot's retained WAL, …). The worker adds
//! the `connector` and `task` labels; the task gives the family, its help text and its own
//! labels. Setting a value is a short lock on a small map, meant for once per batch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One series: a family and its labels (beyond `connector` and `task`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Series {
    pub family: &'static str,
    pub labels: Vec<(&'static str, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub help: &'static str,
    pub value: f64,
}

/// A task's published values; cloned handles share them.
#[derive(Debug, Clone, Default)]
pub struct TaskGauges(Arc<Mutex<BTreeMap<Series, Sample>>>);

impl TaskGauges {
    pub fn set(&self, family: &'static str, help: &'static str, labels: &[(&'static str, &str)], value: f64) {
        let series = Series { family, labels: labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect() };
        self.0.lock().expect("gauges lock").insert(series, Sample { help, value });
    }

    pub fn add(&self, family: &'static str, help: &'static str, labels: &[(&'static str, &str)], delta: f64) {
        let series = Series { family, labels: labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect() };
        self.0.lock().expect("gauges lock").entry(series).or_insert(Sample { help, value: 0.0 }).value += delta;
    }

    pub fn get(&self, family: &'static str, labels: &[(&'static str, &str)]) -> Option<f64> {
        let series = Series { family, labels: labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect() };
        self.0.lock().expect("gauges lock").get(&series).map(|s| s.value)
    }

    /// Every series, in order.
    pub fn snapshot(&self) -> Vec<(Series, Sample)> {
        self.0.lock().expect("gauges lock").iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_add_and_snapshot() {
        let g = TaskGauges::default();
        let shared = g.clone();
        g.set("b_family", "b", &[("context", "streaming")], 2.0);
        shared.add("a_family", "a", &[], 1.0);
        shared.add("a_family", "a", &[], 2.5);
        assert_eq!(g.get("a_family", &[]), Some(3.5));
        let snap = g.snapshot();
        assert_eq!(snap.len(), 2);
        assert_eq!(snap[0].0.family, "a_family");
        assert_eq!(snap[1].0.labels, vec![("context", "streaming".to_owned())]);
    }
}
