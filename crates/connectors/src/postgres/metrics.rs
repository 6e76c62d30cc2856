//! Debezium's snapshot and streaming metrics of the Postgres source, published for the
//! worker's `/metrics` under the names Debezium's JMX-exporter example gives them
//! (`debezium_metrics_<Attribute>{plugin="postgres",name="<topic.prefix>",context}`, with
//! `table` on `RowsScanned`), so Debezium's Grafana dashboard reads them; and the replication
//! slot's WAL retention, which Debezium does not export.
//!
//! Published: `SnapshotRunning`, `SnapshotCompleted`, `TotalTableCount`,
//! `RemainingTableCount` (its total at the start, 0 at the end), `RowsScanned`,
//! `SnapshotDurationInSeconds`, `TotalNumberOfEventsSeen` (snapshot and streaming),
//! `Connected`, `MilliSecondsBehindSource`, `MilliSecondsSinceLastEvent`; and
//! `sluice_postgres_slot_retained_wal_bytes`, `sluice_postgres_slot_safe_wal_size_bytes`,
//! `sluice_postgres_slot_wal_status{status}`, and `sluice_source_lag_seconds` (commit time
//! to durable in the log). Not published: the queue metrics (the runtime
//! has no event queue between the stream and the log), the statistics variants.

use std::collections::BTreeMap;
use std::time::Instant;

use sluice_api::{SourceRecord, TaskGauges, Value};

const PREFIX_HELP: &str = "Debezium's metric of the same name (Postgres source).";

#[derive(Debug, Clone, Default)]
pub struct DebeziumMetrics {
    gauges: TaskGauges,
    name: String,
    snapshot_started: Option<Instant>,
    last_event: Option<Instant>,
}

impl DebeziumMetrics {
    pub fn new(gauges: TaskGauges, topic_prefix: &str) -> Self {
        Self { gauges, name: topic_prefix.to_owned(), snapshot_started: None, last_event: None }
    }

    /// The labels Debezium's JMX exporter rules give its MBean attributes.
    fn labels<'a>(&'a self, context: &'a str) -> [(&'static str, &'a str); 3] {
        [("plugin", "postgres"), ("name", &self.name), ("context", context)]
    }

    fn set(&self, family: &'static str, context: &str, value: f64) {
        self.gauges.set(family, PREFIX_HELP, &self.labels(context), value);
    }

    fn add(&self, family: &'static str, context: &str, delta: f64) {
        self.gauges.add(family, PREFIX_HELP, &self.labels(context), delta);
    }

    pub fn snapshot_started(&mut self, tables: usize) {
        self.snapshot_started = Some(Instant::now());
        self.set("debezium_metrics_SnapshotRunning", "snapshot", 1.0);
        self.set("debezium_metrics_SnapshotCompleted", "snapshot", 0.0);
        self.set("debezium_metrics_TotalTableCount", "snapshot", tables as f64);
        self.set("debezium_metrics_RemainingTableCount", "snapshot", tables as f64);
    }

    pub fn snapshot_rows(&mut self, records: &[SourceRecord]) {
        let mut per_table: BTreeMap<String, f64> = BTreeMap::new();
        for r in records {
            if let Some(table) = table_of(r) {
                *per_table.entry(table).or_default() += 1.0;
            }
        }
        let total: f64 = per_table.values().sum();
        for (table, n) in per_table {
            self.gauges.add(
                "debezium_metrics_RowsScanned",
                PREFIX_HELP,
                &[("plugin", "postgres"), ("name", &self.name), ("context", "snapshot"), ("table", &table)],
                n,
            );
        }
        self.add("debezium_metrics_TotalNumberOfEventsSeen", "snapshot", total);
        self.seen(total > 0.0, "snapshot");
        if let Some(started) = self.snapshot_started {
            self.set("debezium_metrics_SnapshotDurationInSeconds", "snapshot", started.elapsed().as_secs() as f64);
        }
    }

    pub fn snapshot_completed(&mut self) {
        self.set("debezium_metrics_SnapshotRunning", "snapshot", 0.0);
        self.set("debezium_metrics_SnapshotCompleted", "snapshot", 1.0);
        self.set("debezium_metrics_RemainingTableCount", "snapshot", 0.0);
        if let Some(started) = self.snapshot_started.take() {
            self.set("debezium_metrics_SnapshotDurationInSeconds", "snapshot", started.elapsed().as_secs() as f64);
        }
    }

    pub fn connected(&self, connected: bool) {
        self.set("debezium_metrics_Connected", "streaming", if connected { 1.0 } else { 0.0 });
    }

    /// After a streaming poll: the change events among `records`, and the commit time (epoch
    /// ms) of the newest transaction read.
    pub fn streamed(&mut self, records: &[SourceRecord], last_commit_ms: Option<i64>) {
        let events = records.iter().filter(|r| table_of(r).is_some()).count();
        self.add("debezium_metrics_TotalNumberOfEventsSeen", "streaming", events as f64);
        if events > 0 {
            if let Some(ts) = last_commit_ms {
                self.set("debezium_metrics_MilliSecondsBehindSource", "streaming", (super::envelope::now_ms() - ts).max(0) as f64);
            }
        }
        self.seen(events > 0, "streaming");
    }

    fn seen(&mut self, any: bool, context: &str) {
        if any {
            self.last_event = Some(Instant::now());
        }
        let since = self.last_event.map_or(-1.0, |t| t.elapsed().as_millis() as f64);
        self.set("debezium_metrics_MilliSecondsSinceLastEvent", context, since);
    }

    /// Offsets up to a change committed (or a snapshot row read, or a heartbeat sent) at
    /// `ts_usec` are durable: `sluice_source_lag_seconds` is the time from then to now.
    pub fn durable(&self, ts_usec: i64) {
        let lag = (super::envelope::now_ms() * 1000 - ts_usec).max(0) as f64 / 1e6;
        self.gauges.set(
            "sluice_source_lag_seconds",
            "Seconds from the source's commit of the newest change to its offset being durable in the log (at the last offset commit).",
            &[],
            lag,
        );
    }

    pub fn gauges(&self) -> TaskGauges {
        self.gauges.clone()
    }

    /// The slot was dropped and the tables snapshotted again (`drop-and-resnapshot`).
    pub fn resnapshotted(&self, slot: &str) {
        self.gauges.add(
            "sluice_postgres_slot_resnapshots_total",
            "Times the slot was dropped and the tables snapshotted again (sluice.slot.lag.action=drop-and-resnapshot).",
            &[("slot", slot)],
            1.0,
        );
    }

    /// What the slot guard read from `pg_replication_slots`.
    pub fn slot(&self, slot: &str, retained_bytes: Option<i64>, safe_wal_size: Option<i64>, wal_status: Option<&str>) {
        if let Some(b) = retained_bytes {
            self.gauges.set(
                "sluice_postgres_slot_retained_wal_bytes",
                "WAL the replication slot keeps on the server (pg_current_wal_lsn() - restart_lsn).",
                &[("slot", slot)],
                b as f64,
            );
        }
        if let Some(b) = safe_wal_size {
            self.gauges.set(
                "sluice_postgres_slot_safe_wal_size_bytes",
                "WAL that can still be written before the slot is in danger of being lost (pg_replication_slots.safe_wal_size).",
                &[("slot", slot)],
                b as f64,
            );
        }
        for status in ["reserved", "extended", "unreserved", "lost"] {
            let on = wal_status == Some(status);
            self.gauges.set(
                "sluice_postgres_slot_wal_status",
                "The slot's wal_status (1 for the current one).",
                &[("slot", slot), ("status", status)],
                if on { 1.0 } else { 0.0 },
            );
        }
    }
}

/// `schema.table` of a change or snapshot event, from its `source` block.
fn table_of(r: &SourceRecord) -> Option<String> {
    let source = r.value.as_struct()?.get("source")?.as_struct()?;
    let part = |name| source.get(name).and_then(Value::as_str);
    Some(format!("{}.{}", part("schema")?, part("table")?))
}
