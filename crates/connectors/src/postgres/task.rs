//! The source task: decides at start whether to snapshot and where to stream from, then
//! hands out snapshot records followed by streamed changes; `commit` confirms the LSN of
//! what the runtime made durable.
//!
//! ```text
//! start: offsets + slot ──▶ plan ─┬─ snapshot (exported by a new slot, or a fresh one) ─▶ stream
//!                                 ├─ resume an interrupted snapshot after its durable key
//!                                 │  (a fresh snapshot), then stream from the slot's
//!                                 │  consistent point: see snapshot.rs
//!                                 └─ stream from the stored position (fails loudly when
//!                                    the slot is gone; when the slot is ahead, Postgres
//!                                    resends from the slot: see offset.rs)
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pgwire_replication::{Lsn, ReplicationClient};
use sluice_api::{ConnectError, ConnectResult, SchemaRef, SourceOffset, SourcePartition, SourceRecord, SourceTask, SourceTaskContext};
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::catalog::{self, TableId, TypeResolver};
use super::config::{PostgresConfig, SnapshotMode};
use super::envelope::source_schema;
use super::heartbeat::HeartbeatAction;
use super::metrics::DebeziumMetrics;
use super::slot_guard::{LagAction, SlotGuard};
use super::incremental::{self, Action, Emit, Incremental, Signal};
use super::mapping::Modes;
use super::offset::{self, Progress, SnapshotPosition, SnapshotState, StoredOffset};
use super::replication::{self, BlockingRequest, Handed, Stream, StreamContext};
use super::snapshot::{Blocking, SnapshotReader, SnapshotSettings};
use crate::signal_kafka::{KafkaSignal, KafkaSignals};

enum Phase {
    Snapshot(Box<SnapshotRun>),
    Streaming,
    Done,
}

struct SnapshotRun {
    reader: SnapshotReader,
    /// Holds the exported snapshot alive while it is read.
    _export_session: Option<ReplicationClient>,
    then_stream: bool,
    /// The tables to snapshot and where this run started (`None`: from the start).
    tables: Vec<TableId>,
    started_at: Option<SnapshotPosition>,
    /// The offset of the last record handed out: where the snapshot stands.
    handed: Option<SourceOffset>,
    /// A blocking snapshot, asked for while streaming: streaming goes on after it.
    blocking: Option<Blocking>,
}

struct Running {
    cfg: PostgresConfig,
    catalog: Client,
    /// When the last attempt to replace a lost catalog session failed.
    catalog_retry: Option<std::time::Instant>,
    resolver: TypeResolver,
    modes: Modes,
    source_schema: SchemaRef,
    partition: SourcePartition,
    phase: Phase,
    stream: Option<Stream>,
    progress: Progress,
    handed: Handed,
    heartbeat_action: Option<HeartbeatAction>,
    slot_guard: SlotGuard,
    metrics: DebeziumMetrics,
    incremental: Incremental,
    /// A blocking snapshot the stream stopped for, to start at the next poll.
    blocking: Option<BlockingRequest>,
    /// The Kafka signal channel, read between batches.
    kafka_signals: Option<KafkaSignals>,
    /// The offset of the last streamed record handed out: where a signal from Kafka acts.
    last_offset: Option<SourceOffset>,
    shutdown: CancellationToken,
}

#[derive(Default)]
pub struct PostgresSourceTask {
    running: Option<Running>,
}

impl Running {
    async fn plan(cfg: PostgresConfig, stored: Option<SourceOffset>, shutdown: CancellationToken, gauges: sluice_api::TaskGauges) -> ConnectResult<Self> {
        let mut metrics = DebeziumMetrics::new(gauges, &cfg.topic_prefix);
        let catalog = catalog::connect(&cfg).await.map_err(|(_, e)| e)?;
        let incremental = Incremental::restore(&cfg, stored.as_ref());
        let stored = stored.as_ref().map(StoredOffset::parse).transpose()?;
        let tables = catalog::tables(&catalog, &cfg.filter).await?;
        let mut published = tables.clone();
        if let Some(signal) = cfg.signal_table.as_ref().filter(|t| !tables.contains(t)) {
            // Signals are read from the stream: the signal table is published, not captured.
            published.push(signal.clone());
        }
        catalog::ensure_publication(&catalog, &cfg, &published).await?;
        if !cfg.publish_via_partition_root {
            let left_out = catalog::partitions_left_out(&catalog, &tables, &cfg.filter).await?;
            if !left_out.is_empty() {
                let names: Vec<String> = left_out.iter().map(|(root, part)| format!("{part} (of {root})")).collect();
                tracing::warn!(
                    partitions = %names.join(", "),
                    "partitions whose changes are not captured: with publish.via.partition.root=false a partition's changes arrive \
                     under its own name, which table.include.list does not include; set publish.via.partition.root=true (changes on \
                     the root's topic) or include the partitions"
                );
            }
        }
        let slot = catalog::slot(&catalog, &cfg.slot_name).await?;
        if let Some(s) = &slot {
            if s.plugin != "pgoutput" || s.database != cfg.dbname {
                return Err(ConnectError::fatal(format!(
                    "replication slot {:?} exists for plugin {:?} on database {:?}, not pgoutput on {:?}; drop it or set slot.name to another slot",
                    cfg.slot_name, s.plugin, s.database, cfg.dbname
                )));
            }
            if s.active {
                return Err(ConnectError::retriable(format!(
                    "replication slot {:?} is in use by another session; retrying",
                    cfg.slot_name
                )));
            }
        }
        let slot_lsn = slot.as_ref().and_then(|s| s.confirmed_flush);

        // Is there a stored streaming position, and can the slot still provide it?
        let streaming_from = match &stored {
            Some(o) if o.snapshot != SnapshotState::InProgress => Some(o),
            _ => None,
        };
        let mut lost = false;
        if let Some(o) = streaming_from {
            match slot_lsn {
                Some(f) if o.resume_lsn() < f => {
                    // Older versions confirmed keepalives before storing them, so the slot
                    // may be ahead (offset.rs): nothing of interest lies in between.
                    tracing::info!(slot = %cfg.slot_name, stored = %o.resume_lsn(), slot_lsn = %f, "the slot is ahead of the stored offset; streaming from the slot");
                }
                None => {
                    if cfg.snapshot_mode != SnapshotMode::WhenNeeded && cfg.slot_guard.action != LagAction::Resnapshot {
                        return Err(ConnectError::permanent(format!(
                            "replication slot {:?} does not exist but the stored offsets say streaming was at lsn {}: the changes since are lost. \
                             To recover: delete this connector's offsets and restart it to take a new snapshot (or set snapshot.mode=when_needed)",
                            cfg.slot_name,
                            o.resume_lsn()
                        )));
                    }
                    lost = true;
                }
                _ => {}
            }
        }
        let snapshot = match cfg.snapshot_mode {
            SnapshotMode::NoData => false,
            SnapshotMode::Always => true,
            SnapshotMode::Initial | SnapshotMode::InitialOnly | SnapshotMode::WhenNeeded => streaming_from.is_none() || lost,
        };
        let then_stream = cfg.snapshot_mode != SnapshotMode::InitialOnly;
        let progress = Progress::new(if lost {
            Lsn(0)
        } else {
            streaming_from.map_or(Lsn(0), StoredOffset::resume_lsn).max(slot_lsn.unwrap_or(Lsn(0)))
        });
        let modes = Modes::from_config(&cfg);
        let source_schema = source_schema();
        let partition = offset::partition(&cfg.topic_prefix);

        let (phase, handed) = if snapshot {
            // An interrupted snapshot resumes when the slot still holds every change since
            // its consistent point (the slot is never confirmed past it before the
            // snapshot's last record is durable).
            let resume = match (&stored, slot_lsn) {
                (Some(o), Some(f)) if o.snapshot == SnapshotState::InProgress && f <= o.lsn => {
                    o.snapshot_position.clone().map(|p| (p, o.lsn))
                }
                (Some(o), _) if o.snapshot == SnapshotState::InProgress => {
                    tracing::warn!(slot = %cfg.slot_name, stored = %o.lsn, slot_lsn = ?slot_lsn, "the interrupted snapshot cannot resume (the slot is missing or past its consistent point): snapshotting from the start");
                    None
                }
                _ => None,
            };
            let (export_session, exported, lsn) = if slot.is_none() {
                let (session, lsn, name) = replication::create_slot_exporting(&cfg).await?;
                (Some(session), Some(name), lsn)
            } else if let Some((at, lsn)) = &resume {
                tracing::info!(slot = %cfg.slot_name, %lsn, through = %at.through, open = at.open.len(), "resuming the interrupted snapshot on a new snapshot; streaming then starts from its consistent point");
                (None, None, *lsn)
            } else {
                // The slot exists already: stream from where it (or the stored offset) is.
                // Changes between that position and the snapshot may be sent twice.
                let from = streaming_from.map(StoredOffset::resume_lsn).or(slot_lsn).unwrap_or(Lsn(0));
                (None, None, from)
            };
            let snapshot_client = catalog::connect(&cfg).await.map_err(|(_, e)| e)?;
            let settings = snapshot_settings(&cfg, &modes, &source_schema, &partition);
            let started_at = resume.map(|(at, _)| at);
            let reader =
                SnapshotReader::begin(&cfg, snapshot_client, tables.clone(), exported.as_deref(), lsn, started_at.clone(), settings)
                    .await?;
            let skip = if exported.is_none() { streaming_from.and_then(StoredOffset::skip) } else { None };
            metrics.snapshot_started(tables.len());
            (
                Phase::Snapshot(Box::new(SnapshotRun {
                    reader,
                    _export_session: export_session,
                    then_stream,
                    tables,
                    started_at,
                    handed: None,
                    blocking: None,
                })),
                Handed { resume: lsn, skip, last_commit: streaming_from.and_then(|o| o.lsn_commit) },
            )
        } else {
            let from = match (streaming_from, slot_lsn) {
                (Some(o), _) => o.resume_lsn(),
                (None, Some(f)) => f,
                (None, None) => catalog::create_slot(&catalog, &cfg.slot_name).await?,
            };
            (
                if then_stream { Phase::Streaming } else { Phase::Done },
                Handed { resume: from, skip: streaming_from.and_then(StoredOffset::skip), last_commit: streaming_from.and_then(|o| o.lsn_commit) },
            )
        };
        Ok(Self {
            heartbeat_action: HeartbeatAction::new(&cfg),
            slot_guard: SlotGuard::new(cfg.slot_guard.clone()),
            metrics,
            incremental,
            blocking: None,
            kafka_signals: cfg.kafka_signals.as_ref().map(|k| KafkaSignals::open(k, &cfg.topic_prefix)).transpose()?,
            last_offset: None,
            cfg,
            catalog,
            catalog_retry: None,
            resolver: TypeResolver::default(),
            modes,
            source_schema,
            partition,
            phase,
            stream: None,
            progress,
            handed,
            shutdown,
        })
    }

    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>> {
        let max = self.cfg.max_batch_size;
        match &mut self.phase {
            Phase::Snapshot(run) => {
                let SnapshotRun { reader, then_stream, tables, started_at, handed, blocking, .. } = &mut **run;
                if let (true, Some(b)) = (reader.lost_a_session(), blocking.as_ref()) {
                    // A blocking snapshot is not resumed part way: it is read again.
                    tracing::info!("a blocking snapshot session was lost: the blocking snapshot starts again");
                    *reader = blocking_reader(&self.cfg, &self.modes, &self.source_schema, &self.partition, tables.clone(), b).await?;
                } else if reader.lost_a_session() {
                    // A lost session (the server restarted, a backend was ended): the
                    // snapshot goes on after the last record handed out, on a new snapshot,
                    // as a restarted task would from that record's offset. Until the server
                    // takes sessions again, each poll fails retriably.
                    let resume = match handed.as_ref() {
                        Some(o) => StoredOffset::parse(o)?.snapshot_position,
                        None => started_at.clone(),
                    };
                    let client = catalog::connect(&self.cfg).await.map_err(|(_, e)| e)?;
                    let settings = snapshot_settings(&self.cfg, &self.modes, &self.source_schema, &self.partition);
                    let lsn = reader.lsn();
                    tracing::info!(%lsn, resumed = resume.is_some(), "a snapshot session was lost: the snapshot continues after the last record handed out, on a new snapshot");
                    let fresh = SnapshotReader::begin(&self.cfg, client, tables.clone(), None, lsn, resume, settings).await?;
                    *reader = fresh;
                }
                match reader.next_batch(max).await? {
                    Some(records) => {
                        if let Some(last) = records.last() {
                            *handed = Some(last.source_offset.clone());
                            if blocking.is_some() {
                                self.progress.handed(Some(&last.source_offset));
                            }
                        }
                        self.metrics.snapshot_rows(&records);
                        Ok(records)
                    }
                    None => {
                        self.metrics.snapshot_completed();
                        let next = if *then_stream { Phase::Streaming } else { Phase::Done };
                        self.handed.resume = self.handed.resume.max(reader.lsn());
                        self.phase = next;
                        Ok(Vec::new())
                    }
                }
            }
            Phase::Done => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(self.cfg.poll_interval_ms)) => {}
                    _ = self.shutdown.cancelled() => {}
                }
                Ok(Vec::new())
            }
            Phase::Streaming => {
                if self.catalog.is_closed() && self.catalog_retry.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                    // The server restarted or the session broke: a new one for catalog
                    // look-ups. Failing to get one does not stop the stream: a fast
                    // shutdown ends ordinary sessions first and refuses new ones, then waits
                    // for the replication stream to be read and confirmed to its end; only
                    // a look-up that needs the catalog fails (retriably) meanwhile.
                    // (At most one attempt a second.)
                    match catalog::connect(&self.cfg).await {
                        Ok(c) => {
                            self.catalog = c;
                            self.catalog_retry = None;
                        }
                        Err((_, e)) => {
                            tracing::debug!(error = %e, "no catalog session yet; streaming goes on");
                            self.catalog_retry = Some(std::time::Instant::now());
                        }
                    }
                }
                if let Some(request) = self.blocking.take() {
                    // Retried at the next poll when it fails (a lost session, say).
                    return match self.start_blocking(&request).await {
                        Ok(()) => Ok(Vec::new()),
                        Err(e) => {
                            self.blocking = Some(request);
                            Err(e)
                        }
                    };
                }
                if let Some(signals) = &self.kafka_signals {
                    for signal in signals.read(64) {
                        self.kafka_signal(signal).await?;
                    }
                    if self.blocking.is_some() {
                        self.close_stream().await;
                        return Ok(Vec::new());
                    }
                }
                if let Some(action) = &mut self.heartbeat_action {
                    action.maybe_run(&self.cfg).await?;
                }
                if let Some(reason) = self.slot_guard.maybe_check(&self.catalog, &self.cfg.slot_name, &self.metrics).await? {
                    self.resnapshot(&reason).await?;
                    return Ok(Vec::new());
                }
                if self.stream.is_none() {
                    self.metrics.connected(false);
                    self.stream = Some(Stream::open(&self.cfg, self.handed, self.progress.confirmed()).await?);
                    self.metrics.connected(true);
                }
                if self.incremental.wants_chunk() {
                    self.incremental.next_chunk(&self.cfg, &self.catalog, &mut self.resolver, &self.modes, &self.source_schema).await?;
                }
                // A failed batch is read again: so is what it did to the incremental snapshot.
                let incremental_before = self.incremental.running().then(|| self.incremental.clone());
                let deadline = tokio::time::Instant::now() + Duration::from_millis(self.cfg.poll_interval_ms.min(1000));
                let mut ctx = StreamContext {
                    cfg: &self.cfg,
                    catalog: &self.catalog,
                    resolver: &mut self.resolver,
                    modes: &self.modes,
                    source_schema: &self.source_schema,
                    partition: &self.partition,
                    incremental: &mut self.incremental,
                };
                let stream = self.stream.as_mut().expect("opened above");
                let result = tokio::select! {
                    r = stream.poll_batch(&mut ctx, max, deadline, &mut self.handed) => r,
                    _ = self.shutdown.cancelled() => return Ok(Vec::new()),
                };
                match result {
                    Ok(batch) => {
                        self.metrics.streamed(&batch.records, stream.last_commit_ms());
                        if let Some(last) = batch.records.last() {
                            self.last_offset = Some(last.source_offset.clone());
                        }
                        if let Some(request) = stream.take_blocking() {
                            // Nothing after the signal was read: the stream waits, closed.
                            self.blocking = Some(request);
                            self.close_stream().await;
                        }
                        self.progress.handed(batch.records.last().map(|r| &r.source_offset));
                        Ok(batch.records)
                    }
                    Err(e) => {
                        if let Some(before) = incremental_before {
                            self.incremental = before;
                        }
                        tracing::warn!(error = %e, retriable = e.is_retriable(), "replication stream failed; the next poll reconnects");
                        self.close_stream().await;
                        Err(e)
                    }
                }
            }
        }
    }

    /// Acts on a signal from the Kafka channel, at the position of the last record handed
    /// out: a blocking snapshot stops the stream there; the others act as a signal row does.
    async fn kafka_signal(&mut self, k: KafkaSignal) -> ConnectResult<()> {
        let signal = Signal { id: k.id, kind: k.kind, data: k.data };
        tracing::info!(signal = %signal.id, kind = %signal.kind, offset = k.offset, "signal from the Kafka channel");
        match signal.action() {
            Action::Blocking(collections, conditions) => {
                let now_us = super::envelope::now_ms() * 1000;
                let mut at = self.last_offset.clone().unwrap_or_else(|| offset::heartbeat_offset(self.handed.resume, now_us));
                let lsn = at.get("lsn").and_then(|v| v.as_u64()).map_or(self.handed.resume, Lsn);
                let tx_id = at.get("txId").and_then(|v| v.as_i64()).unwrap_or_default();
                self.incremental.stamp(&mut at);
                offset::mark_blocking(&mut at);
                let sequence = replication::sequence(self.handed.last_commit, lsn);
                let at = Blocking { lsn, tx_id, sequence, before: at.clone(), after: at, selects: Default::default() };
                self.blocking = Some(BlockingRequest { signal: signal.id, collections, conditions, at });
            }
            Action::Execute(..) if self.cfg.signal_table.is_none() && !self.cfg.read_only => tracing::error!(
                signal = %signal.id,
                "an incremental snapshot writes its watermarks to the signal table: set signal.data.collection; the signal is ignored"
            ),
            Action::WindowOpen(_) | Action::WindowClose(_) => {
                tracing::error!(signal = %signal.id, "watermark signals belong in the signal table; ignored")
            }
            _ => {
                let emit = Emit {
                    base: SourceOffset::new(),
                    lsn: self.handed.resume,
                    tx_id: 0,
                    source_schema: &self.source_schema,
                    partition: &self.partition,
                };
                let records = self.incremental.signal(&self.cfg, &self.catalog, &signal, emit).await?;
                debug_assert!(records.is_empty(), "only a window close emits records");
            }
        }
        Ok(())
    }

    /// Starts the blocking snapshot `request` asked for: the captured tables it names, read
    /// on a snapshot of their own; streaming goes on after the signal once it is done.
    async fn start_blocking(&mut self, request: &BlockingRequest) -> ConnectResult<()> {
        let captured = catalog::tables(&self.catalog, &self.cfg.filter).await?;
        let tables = incremental::requested(&captured, &request.collections, &request.signal);
        let mut blocking = request.at.clone();
        blocking.selects = tables
            .iter()
            .filter_map(|t| incremental::condition_for(&request.conditions, t).map(|f| (t.clone(), f.to_owned())))
            .collect();
        tracing::info!(signal = %request.signal, tables = ?tables.iter().map(ToString::to_string).collect::<Vec<_>>(), "blocking snapshot started; streaming waits");
        let reader = blocking_reader(&self.cfg, &self.modes, &self.source_schema, &self.partition, tables.clone(), &blocking).await?;
        self.metrics.snapshot_started(tables.len());
        self.phase = Phase::Snapshot(Box::new(SnapshotRun {
            reader,
            _export_session: None,
            then_stream: true,
            tables,
            started_at: None,
            handed: None,
            blocking: Some(blocking),
        }));
        Ok(())
    }

    /// Closes the replication stream, if open (the next streaming poll opens a new one).
    async fn close_stream(&mut self) {
        if let Some(s) = self.stream.take() {
            s.close().await;
        }
        self.metrics.connected(false);
    }

    /// `sluice.slot.lag.action=drop-and-resnapshot`: closes the stream, drops the slot and
    /// starts again as a connector without offsets would (a new slot, a new snapshot of the
    /// captured tables, then streaming). The offsets of the new snapshot's records replace
    /// the old ones as they become durable; a restart before that finds no slot under the
    /// old offsets and, with this action, snapshots again.
    async fn resnapshot(&mut self, reason: &str) -> ConnectResult<()> {
        tracing::warn!(slot = %self.cfg.slot_name, "{reason} (sluice.slot.lag.action=drop-and-resnapshot): dropping the slot and taking a new snapshot; changes the slot held are not sent as events");
        self.close_stream().await;
        catalog::drop_slot_when_released(&self.catalog, &self.cfg.slot_name).await?;
        self.metrics.resnapshotted(&self.cfg.slot_name);
        let fresh = Running::plan(self.cfg.clone(), None, self.shutdown.clone(), self.metrics.gauges()).await?;
        *self = fresh;
        Ok(())
    }

    fn commit(&mut self, committed: &[(SourcePartition, SourceOffset)]) -> ConnectResult<()> {
        let Some((_, newest)) = committed.iter().rev().find(|(p, _)| *p == self.partition) else { return Ok(()) };
        if let Some(ts_usec) = newest.get("ts_usec").and_then(|v| v.as_i64()) {
            self.metrics.durable(ts_usec);
        }
        let lsn = self.progress.committed(newest)?;
        self.confirm(lsn, "offsets durable: confirming flushed lsn");
        Ok(())
    }

    fn confirm(&self, lsn: Option<Lsn>, why: &'static str) {
        if let Some(lsn) = lsn {
            tracing::debug!(%lsn, why);
            if let Some(s) = &self.stream {
                s.confirm(lsn);
            }
        }
    }
}

fn snapshot_settings(cfg: &PostgresConfig, modes: &Modes, source_schema: &SchemaRef, partition: &SourcePartition) -> SnapshotSettings {
    SnapshotSettings {
        prefix: cfg.topic_prefix.clone(),
        db: cfg.dbname.clone(),
        modes: modes.clone(),
        fetch_size: cfg.snapshot_fetch_size.min(cfg.max_batch_size),
        threads: cfg.snapshot_max_threads,
        source_schema: source_schema.clone(),
        partition: partition.clone(),
        rules: Arc::new(cfg.columns.clone()),
        blocking: None,
    }
}

/// A reader of `tables` for the blocking snapshot `b`, on a session and snapshot of its own.
async fn blocking_reader(
    cfg: &PostgresConfig,
    modes: &Modes,
    source_schema: &SchemaRef,
    partition: &SourcePartition,
    tables: Vec<TableId>,
    b: &Blocking,
) -> ConnectResult<SnapshotReader> {
    let client = catalog::connect(cfg).await.map_err(|(_, e)| e)?;
    let settings = SnapshotSettings { blocking: Some(b.clone()), ..snapshot_settings(cfg, modes, source_schema, partition) };
    SnapshotReader::begin(cfg, client, tables, None, b.lsn, None, settings).await
}

#[async_trait]
impl SourceTask for PostgresSourceTask {
    async fn start(&mut self, ctx: SourceTaskContext) -> ConnectResult<()> {
        let cfg = PostgresConfig::parse(&ctx.props)?;
        let stored = ctx.offsets.offset(&offset::partition(&cfg.topic_prefix));
        self.running = Some(Running::plan(cfg, stored, ctx.shutdown.clone(), ctx.gauges.clone()).await?);
        Ok(())
    }

    async fn poll(&mut self) -> ConnectResult<Vec<SourceRecord>> {
        self.running.as_mut().ok_or_else(|| ConnectError::fatal("poll before start"))?.poll().await
    }

    async fn commit(&mut self, committed: &[(SourcePartition, SourceOffset)]) -> ConnectResult<()> {
        match &mut self.running {
            Some(r) => r.commit(committed),
            None => Ok(()),
        }
    }

    async fn stop(&mut self) -> ConnectResult<()> {
        let Some(mut r) = self.running.take() else { return Ok(()) };
        if let Some(s) = r.stream.take() {
            s.close().await;
        }
        if let Phase::Snapshot(_) = r.phase {
            r.phase = Phase::Done; // drops the export session and the snapshot transaction
        }
        if r.cfg.slot_drop_on_stop {
            catalog::drop_slot_when_released(&r.catalog, &r.cfg.slot_name).await?;
        }
        Ok(())
    }
}
