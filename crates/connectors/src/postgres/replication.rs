//! The logical replication stream: one `pgwire-replication` session reading the slot with
//! pgoutput v1, decoded into change records.
//!
//! ```text
//!  Postgres walsender ──CopyData──▶ reader task (pgwire-replication)
//!        ▲                              │ bounded channel (max.queue.size events);
//!        │ standby status:              │ while it is full the reader keeps sending
//!        │ flush = confirmed LSN        │ status updates, so wal_sender_timeout never
//!        │                              ▼ fires under backpressure
//!  Stream::confirm ◀── Progress ◀── task.commit ◀── runtime (offsets stored)
//!                                                      ▲
//!                               Stream::poll_batch ──▶ records ──▶ runtime
//!                               (a keepalive between transactions: an offset-only record)
//! ```
//!
//! Only the confirmed LSN is ever reported as flushed (see `offset.rs`, `Progress`): the
//! position of offsets the runtime stored. Changes merely received are never acknowledged,
//! and the slot is never ahead of the stored offset, so Debezium can take the slot over.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgwire_replication::{Lsn, PgWireError, ReplicationClient, ReplicationConfig, ReplicationEvent};
use sluice_api::{ConnectError, ConnectResult, Schema, SchemaRef, SourceOffset, SourcePartition, SourceRecord, Struct, Value};
use tokio_postgres::Client;

use super::catalog::{self, TableId, TypeResolver};
use super::column::SourceColumn;
use super::config::{self, PostgresConfig};
use super::decode::{self, Datum, Message, OldTuple, Relation};
use super::envelope::{now_ms, ColumnSpec, Row, SharedTable, SourceInfo, TableSchema};
use super::incremental::{Action, Emit, Incremental, Signal};
use super::mapping::{Modes, SESSION_OPTIONS};
use super::message::{self, MessageTopic};
use super::offset::{change_offset, heartbeat_offset, mark_blocking, transaction_end_offset, Skip, PG_EPOCH_OFFSET_MICROS};
use super::snapshot::Blocking;
use super::transaction::TxCounts;

/// The replication session settings shared by the export session and the stream, and what
/// must stay open until the session is up (see `PgTls::replication`).
pub fn replication_config(cfg: &PostgresConfig, start: Lsn, ack: Lsn) -> ConnectResult<(ReplicationConfig, Option<std::fs::File>)> {
    let tls = cfg.tls.replication(&cfg.hostname).map_err(|e| ConnectError::config(cfg.tls.key_in(&e), e))?;
    let rc =
        ReplicationConfig::new(&cfg.hostname, &cfg.user, cfg.password.expose(), &cfg.dbname, &cfg.slot_name, cfg.publication_name.as_str())
            .with_port(cfg.port)
            .with_tls(tls.config)
            .with_start_lsn(start)
            .with_ack_lsn(ack)
            .with_status_interval(Duration::from_millis(cfg.status_update_interval_ms))
            .with_wakeup_interval(Duration::from_millis(cfg.status_update_interval_ms))
            .with_buffer_size(cfg.max_queue_size)
            .with_options(SESSION_OPTIONS)
            .with_application_name("sluice-postgres");
    Ok((rc, tls.hold))
}

/// Classifies a replication session error.
pub fn stream_error(cfg: &PostgresConfig, e: PgWireError) -> ConnectError {
    let text = e.to_string();
    // A dropped slot, a refused certificate or password, a missing publication: no restart helps.
    if text.contains("replication slot") && text.contains("does not exist") {
        ConnectError::permanent_from(
            format!(
                "replication slot {:?} no longer exists (was it dropped?); the changes after the last committed offset cannot be read any more. \
                 To recover: delete this connector's offsets and restart it so that it creates the slot and takes a new snapshot \
                 (snapshot.mode=initial or when_needed)",
                cfg.slot_name
            ),
            e,
        )
    } else if text.contains("invalidated") || text.contains("has already been removed") {
        ConnectError::permanent_from(
            format!(
                "replication slot {:?} lost WAL it needed (the server removed it, max_slot_wal_keep_size): the changes after the last \
                 committed offset are gone. To recover: stop the connector, drop the slot (SELECT pg_drop_replication_slot('{}')), \
                 delete its offsets (DELETE /connectors/<name>/offsets) and resume it to take a new snapshot",
                cfg.slot_name, cfg.slot_name
            ),
            e,
        )
    } else if text.contains("certificate") || text.contains("fatal alert") {
        ConnectError::permanent_from(
            format!(
                "replication session refused over TLS: {text}; check {} (the server's certificate) and {}/{} (the client's; \
                 pg_hba.conf needs a hostssl replication line that accepts it)",
                config::SSLROOTCERT,
                config::SSLCERT,
                config::SSLKEY
            ),
            e,
        )
    } else if text.contains("password authentication failed") || text.contains("does not exist") || text.contains("publication") {
        ConnectError::permanent_from(format!("replication session rejected: {text}"), e)
    } else {
        ConnectError::retriable_from(format!("replication stream from {}:{} interrupted: {text}", cfg.hostname, cfg.port), e)
    }
}

/// Creates the slot on a replication session with an exported snapshot. The snapshot
/// stays valid while the returned session is kept idle; drop it once the snapshot
/// transaction has started reading... or ended.
pub async fn create_slot_exporting(cfg: &PostgresConfig) -> ConnectResult<(ReplicationClient, Lsn, String)> {
    let (rc, identity_copy) = replication_config(cfg, Lsn(0), Lsn(0))?;
    let mut client = catalog::bounded(cfg, "opening a replication session", ReplicationClient::connect_gated(rc))
        .await?
        .map_err(|e| stream_error(cfg, e))?;
    let rows =
        client.simple_query(&format!("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput EXPORT_SNAPSHOT", cfg.slot_name)).await.map_err(|e| {
            match e {
                e @ PgWireError::Tls(_) | e @ PgWireError::Io(_) => stream_error(cfg, e),
                e => ConnectError::fatal_from(format!("creating replication slot {:?}", cfg.slot_name), e),
            }
        })?;
    drop(identity_copy); // the session is up
    let row = rows.into_iter().next().ok_or_else(|| ConnectError::fatal("CREATE_REPLICATION_SLOT returned no row"))?;
    let text = |i: usize| row.get(i).and_then(|v| v.as_ref()).map(|b| String::from_utf8_lossy(b).into_owned());
    let lsn = text(1)
        .and_then(|s| Lsn::parse(&s).ok())
        .ok_or_else(|| ConnectError::fatal("CREATE_REPLICATION_SLOT returned no consistent point"))?;
    let snapshot = text(2).ok_or_else(|| ConnectError::fatal("CREATE_REPLICATION_SLOT exported no snapshot"))?;
    tracing::info!(slot = %cfg.slot_name, %lsn, %snapshot, "created replication slot with exported snapshot");
    Ok((client, lsn, snapshot))
}

struct Txn {
    xid: u32,
    commit_lsn: Lsn,
    ts_usec: i64,
    /// Changes seen so far in this transaction (all of them, filtered or not).
    seq: u64,
    /// With `provide.transaction.metadata`: the events counted so far.
    counts: Option<TxCounts>,
}

/// Where the records handed out so far end: the next session starts here.
#[derive(Debug, Clone, Copy)]
pub struct Handed {
    pub resume: Lsn,
    pub skip: Option<Skip>,
    /// The commit LSN of the newest transaction handed out (a stored offset's
    /// `lsn_commit`); `None` after a fresh start, where Debezium's `sequence` begins with null.
    pub last_commit: Option<Lsn>,
}

/// What one [`Stream::poll_batch`] read.
pub struct Batch {
    pub records: Vec<SourceRecord>,
}

pub struct StreamContext<'a> {
    pub cfg: &'a PostgresConfig,
    pub catalog: &'a Client,
    pub resolver: &'a mut TypeResolver,
    pub modes: &'a Modes,
    pub source_schema: &'a SchemaRef,
    pub partition: &'a SourcePartition,
    /// Incremental snapshots: signals, watermark windows, progress in offsets.
    pub incremental: &'a mut Incremental,
}

pub struct Stream {
    client: ReplicationClient,
    relations: HashMap<u32, Option<SharedTable>>,
    /// Tuple positions of each captured relation's primary key, in key order.
    keys: HashMap<u32, Vec<usize>>,
    /// The signal table's relation and the positions of its id, type and data columns.
    signal: Option<(u32, [usize; 3])>,
    txn: Option<Txn>,
    skip: Option<Skip>,
    last_commit_lsn: Option<Lsn>,
    last_heartbeat: Instant,
    heartbeat_lsn: Lsn,
    /// The position of the newest change record handed out without one (see [`Tail`]).
    tail: Option<Tail>,
    /// The commit time of the newest transaction begun: a non-transactional message carries
    /// it, as in Debezium.
    last_begin_ts_usec: Option<i64>,
    /// Built at the first logical decoding message.
    messages: Option<MessageTopic>,
    /// A blocking snapshot asked for by the last signal read: the batch ends at it.
    blocking: Option<BlockingRequest>,
    /// The id of the last transaction begun.
    last_xid: u32,
    /// The WAL end of the last keepalive received between transactions: everything before
    /// it was decoded and read.
    idle_wal_end: Lsn,
    /// When the server last sent anything, or answered a probe.
    last_heard: Instant,
}

/// How long the stream may stay silent before the server is asked, on the catalog session,
/// whether it is still there: an idle database sends nothing, and a network that drops
/// packets does not end the connection either.
const SILENCE: Duration = Duration::from_secs(30);
/// How long that probe may go unanswered before the stream counts as lost.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// An `execute-snapshot` signal of type blocking: the stream stops after it, and the task
/// reads the tables before streaming on.
#[derive(Debug, Clone)]
pub struct BlockingRequest {
    pub signal: String,
    pub collections: Vec<String>,
    pub conditions: Vec<(String, String)>,
    /// Where the signal stands in the stream, for the snapshot's records (its `selects` are
    /// filled in when the tables are known).
    pub at: Blocking,
}

/// Change records are built without a source position: inside a batch, only the last one
/// can become the committed offset (the runtime commits the newest position it has, and a
/// record without one is covered by the next that has it). Building the offset map of
/// every change cost as much as converting it, so only the batch's last change record gets
/// one, from this, when the batch ends (or before a signal changes what offsets carry).
#[derive(Debug, Clone, Copy)]
struct Tail {
    lsn: Lsn,
    commit_lsn: Lsn,
    xid: u32,
    ts_usec: i64,
    seq: u64,
}

impl Stream {
    /// Opens the stream at `handed.resume`, reporting `confirmed` as flushed.
    pub async fn open(cfg: &PostgresConfig, handed: Handed, confirmed: Lsn) -> ConnectResult<Self> {
        let (rc, identity_copy) = replication_config(cfg, handed.resume, confirmed)?;
        let started = async {
            let mut client = ReplicationClient::connect(rc).await?;
            client.wait_started().await?;
            Ok(client)
        };
        let client = catalog::bounded(cfg, "opening the replication stream", started).await?.map_err(|e| stream_error(cfg, e))?;
        drop(identity_copy); // the session is up
        tracing::info!(slot = %cfg.slot_name, start = %handed.resume, %confirmed, "replication stream started");
        Ok(Self {
            client,
            relations: HashMap::new(),
            keys: HashMap::new(),
            signal: None,
            txn: None,
            skip: handed.skip,
            last_commit_lsn: handed.last_commit,
            last_heartbeat: Instant::now(),
            heartbeat_lsn: handed.resume,
            tail: None,
            last_begin_ts_usec: None,
            messages: None,
            blocking: None,
            last_xid: 0,
            idle_wal_end: Lsn(0),
            last_heard: Instant::now(),
        })
    }

    /// After [`SILENCE`]: a query on the catalog session must be answered within
    /// [`PROBE_TIMEOUT`], or the stream is given up (retriably) and opened again. A catalog
    /// session that is closed or fails proves nothing either way (a server shutting down
    /// ends ordinary sessions first and keeps the stream): the stream goes on.
    async fn probe(&mut self, ctx: &StreamContext<'_>) -> ConnectResult<()> {
        if ctx.catalog.is_closed() {
            return Ok(());
        }
        match tokio::time::timeout(PROBE_TIMEOUT, ctx.catalog.simple_query("SELECT 1")).await {
            Ok(Ok(_)) => {
                self.last_heard = Instant::now();
                Ok(())
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "the silence probe failed on the catalog session; streaming goes on");
                self.last_heard = Instant::now();
                Ok(())
            }
            Err(_) => Err(ConnectError::retriable(format!(
                "no answer from Postgres at {}:{}: the replication stream was silent for {} s and a probe query got no answer within {} s",
                ctx.cfg.hostname,
                ctx.cfg.port,
                SILENCE.as_secs(),
                PROBE_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Reports `lsn` as flushed with the next standby status update.
    /// The commit time (epoch ms) of the newest transaction read.
    pub fn last_commit_ms(&self) -> Option<i64> {
        self.last_begin_ts_usec.map(|us| us.div_euclid(1000))
    }

    pub fn confirm(&self, lsn: Lsn) {
        self.client.update_applied_lsn(lsn);
    }

    /// The blocking snapshot the batch just read asked for, if any.
    pub fn take_blocking(&mut self) -> Option<BlockingRequest> {
        self.blocking.take()
    }

    pub async fn close(mut self) {
        if let Err(e) = tokio::time::timeout(Duration::from_secs(5), self.client.shutdown()).await.unwrap_or(Ok(())) {
            tracing::debug!(error = %e, "replication stream closed with an error");
        }
    }

    /// Reads events until `max` records are ready or `deadline` passes. On success `handed`
    /// is moved past every record returned; on an error it stays where it was, so the next
    /// session resends the records this call decoded and dropped.
    pub async fn poll_batch(
        &mut self,
        ctx: &mut StreamContext<'_>,
        max: usize,
        deadline: tokio::time::Instant,
        handed: &mut Handed,
    ) -> ConnectResult<Batch> {
        let mut moved = *handed;
        let batch = self.read(ctx, max, deadline, &mut moved).await?;
        *handed = moved;
        Ok(batch)
    }

    async fn read(
        &mut self,
        ctx: &mut StreamContext<'_>,
        max: usize,
        deadline: tokio::time::Instant,
        handed: &mut Handed,
    ) -> ConnectResult<Batch> {
        let mut out = Vec::new();
        if self.txn.is_none() && ctx.incremental.passed(self.idle_wal_end) {
            // A read-only window whose chunk was read while the server had nothing more to
            // send: the server sends no keepalive until there is WAL to decode.
            let at = self.idle_wal_end;
            self.close_window(ctx, at, &mut out, handed);
            if ctx.incremental.wants_chunk() {
                return Ok(Batch { records: out });
            }
        }
        while out.len() < max {
            let event = match tokio::time::timeout_at(deadline, self.client.recv()).await {
                Err(_) => {
                    if self.last_heard.elapsed() >= SILENCE {
                        self.probe(ctx).await?;
                    }
                    break;
                }
                Ok(Ok(Some(ev))) => ev,
                Ok(Ok(None)) => return Err(ConnectError::retriable("replication stream ended")),
                Ok(Err(e)) => return Err(stream_error(ctx.cfg, e)),
            };
            self.last_heard = Instant::now();
            let before = out.len();
            match event {
                ReplicationEvent::Begin { final_lsn, xid, commit_time_micros } => {
                    if ctx.incremental.passed(final_lsn) {
                        // A read-only window closes before the first change committed after it.
                        self.close_window(ctx, final_lsn, &mut out, handed);
                    }
                    self.last_xid = xid;
                    let ts_usec = commit_time_micros + PG_EPOCH_OFFSET_MICROS;
                    // A transaction resent after a restart inside it had its BEGIN durable.
                    if let Some(skip) = self.skip.as_mut() {
                        skip.begin(final_lsn);
                    }
                    let resent = self.skip.is_some_and(|s| s.commit_lsn == Some(final_lsn));
                    let counts = ctx.cfg.transaction_topic.as_ref().map(|_| TxCounts::new(xid, ts_usec.div_euclid(1000), !resent));
                    self.txn = Some(Txn { xid, commit_lsn: final_lsn, ts_usec, seq: 0, counts });
                    self.last_begin_ts_usec = Some(ts_usec);
                }
                ReplicationEvent::Commit { lsn, end_lsn, .. } => {
                    self.last_commit_lsn = Some(lsn);
                    if let (Some(topic), Some(txn)) = (&ctx.cfg.transaction_topic, self.txn.take()) {
                        let counts = txn.counts.unwrap_or_default();
                        if counts.begin_pending {
                            let offset = change_offset(lsn, txn.commit_lsn, i64::from(txn.xid), txn.ts_usec, 0);
                            out.push(topic.begin(&counts, lsn, ctx.partition, offset));
                        }
                        let offset = transaction_end_offset(end_lsn, i64::from(txn.xid), txn.ts_usec);
                        out.push(topic.end(&counts, end_lsn, ctx.partition, offset));
                        *handed = Handed { resume: end_lsn, skip: None, last_commit: Some(lsn) };
                    }
                    self.txn = None;
                    if self.skip.is_some_and(|s| s.commit_lsn.is_some_and(|c| c <= lsn)) {
                        self.skip = None;
                    }
                    if ctx.incremental.passed(end_lsn) {
                        self.close_window(ctx, end_lsn, &mut out, handed);
                    }
                }
                ReplicationEvent::XLogData { wal_start, data, .. } => {
                    let msg = decode::decode(&data).map_err(|e| ConnectError::fatal_from("decoding the replication stream", e))?;
                    self.apply(ctx, msg, wal_start, &mut out, handed).await?;
                }
                ReplicationEvent::KeepAlive { wal_end, .. } => {
                    if self.txn.is_none() {
                        // Every change before it has been decoded into `out` or handed out.
                        self.idle_wal_end = self.idle_wal_end.max(wal_end);
                        if ctx.incremental.passed(wal_end) {
                            self.close_window(ctx, wal_end, &mut out, handed);
                        }
                        let hb = ctx.cfg.heartbeat_interval_ms;
                        if hb > 0 && wal_end > self.heartbeat_lsn && self.last_heartbeat.elapsed() >= Duration::from_millis(hb) {
                            self.heartbeat_lsn = wal_end;
                            self.last_heartbeat = Instant::now();
                            *handed = Handed { resume: wal_end, skip: None, last_commit: handed.last_commit };
                            out.push(heartbeat(ctx, wal_end));
                        } else if wal_end > handed.resume {
                            // Nothing before the server's WAL end is left to send. The stored
                            // offset moves there once everything before is durable, and the
                            // slot follows it: an idle database's slot does not hold WAL, and
                            // the slot is never confirmed past the stored offset.
                            self.settle_tail(ctx, &mut out);
                            *handed = Handed { resume: wal_end, skip: None, last_commit: handed.last_commit };
                            out.push(SourceRecord::offset_only(ctx.partition.clone(), heartbeat_offset(wal_end, now_ms() * 1000)));
                        }
                    }
                }
                ReplicationEvent::Message { transactional, lsn, prefix, content } => {
                    self.message(ctx, transactional, lsn, &prefix, &content, &mut out, handed)?;
                }
                ReplicationEvent::StoppedAt { .. } => {}
            }
            for r in &mut out[before..] {
                ctx.incremental.stamp(&mut r.source_offset);
            }
            if ctx.incremental.wants_chunk() || self.blocking.is_some() {
                // A window closed or a snapshot was asked for: the next poll reads a chunk
                // (or, for a blocking snapshot, the tables while the stream waits).
                break;
            }
        }
        self.settle_tail(ctx, &mut out);
        debug_assert!(out.last().is_none_or(|r| !r.source_partition.is_empty()), "a batch ends with a record that has a position");
        Ok(Batch { records: out })
    }

    /// Closes a read-only incremental snapshot window the stream has passed, at `lsn`
    /// between transactions: the chunk's rows go out with offsets that resume streaming
    /// where `handed` stands.
    fn close_window(&mut self, ctx: &mut StreamContext<'_>, lsn: Lsn, out: &mut Vec<SourceRecord>, handed: &Handed) {
        self.settle_tail(ctx, out);
        let ts_usec = now_ms() * 1000;
        let base = match handed.skip {
            Some(Skip { commit_lsn: Some(c), through_seq, through_lsn: None }) => {
                change_offset(c, c, i64::from(self.last_xid), ts_usec, through_seq)
            }
            _ => heartbeat_offset(handed.resume, ts_usec),
        };
        let emit = Emit { base, lsn, tx_id: i64::from(self.last_xid), source_schema: ctx.source_schema, partition: ctx.partition };
        out.extend(ctx.incremental.close(emit));
    }

    /// Gives the last record its position when it was built without one.
    fn settle_tail(&mut self, ctx: &mut StreamContext<'_>, out: &mut [SourceRecord]) {
        let Some(t) = self.tail.take() else { return };
        if let Some(r) = out.last_mut().filter(|r| r.source_partition.is_empty()) {
            r.source_partition = ctx.partition.clone();
            r.source_offset = change_offset(t.lsn, t.commit_lsn, i64::from(t.xid), t.ts_usec, t.seq);
            ctx.incremental.stamp(&mut r.source_offset);
        }
    }

    async fn relation(&mut self, ctx: &mut StreamContext<'_>, rel: Relation) -> ConnectResult<()> {
        if ctx.cfg.signal_table.as_ref().is_some_and(|t| t.schema == rel.namespace && t.table == rel.name) {
            let at = |name: &str| rel.columns.iter().position(|c| c.name == name);
            self.signal = match (at("id"), at("type"), at("data")) {
                (Some(i), Some(t), Some(d)) => Some((rel.oid, [i, t, d])),
                _ => {
                    tracing::error!(table = %format!("{}.{}", rel.namespace, rel.name), "the signal table needs the columns id, type and data; its rows are not read as signals");
                    None
                }
            };
        }
        if !ctx.cfg.filter.includes(&rel.namespace, &rel.name) {
            self.relations.insert(rel.oid, None);
            return Ok(());
        }
        let id = TableId { schema: rel.namespace.clone(), table: rel.name.clone() };
        let meta = catalog::columns(ctx.catalog, &id).await?;
        let mut specs = Vec::with_capacity(rel.columns.len());
        for c in &rel.columns {
            let m = meta.iter().find(|m| m.name == c.name);
            let ty = ctx.resolver.resolve(ctx.catalog, c.type_oid, c.type_modifier).await?;
            specs.push(ColumnSpec {
                name: c.name.clone(),
                source: SourceColumn::of(c.type_oid, c.type_modifier),
                ty,
                not_null: m.is_some_and(|m| m.not_null),
                pk_position: m.and_then(|m| m.pk_position),
                default: m.and_then(|m| m.default.clone()),
            });
        }
        let mut key: Vec<(usize, usize)> = specs.iter().enumerate().filter_map(|(i, s)| s.pk_position.map(|p| (p, i))).collect();
        key.sort_unstable();
        self.keys.insert(rel.oid, key.into_iter().map(|(_, i)| i).collect());
        let table = TableSchema::new(&ctx.cfg.topic_prefix, &ctx.cfg.dbname, id, specs, ctx.modes, ctx.source_schema, &ctx.cfg.columns);
        tracing::debug!(table = %table.id, oid = rel.oid, "relation (re)described");
        self.relations.insert(rel.oid, Some(Arc::new(table)));
        Ok(())
    }

    fn table(&self, oid: u32) -> ConnectResult<Option<SharedTable>> {
        self.relations
            .get(&oid)
            .cloned()
            .ok_or_else(|| ConnectError::fatal(format!("change for relation {oid} before its Relation message")))
    }

    async fn apply(
        &mut self,
        ctx: &mut StreamContext<'_>,
        msg: Message<'_>,
        lsn: Lsn,
        out: &mut Vec<SourceRecord>,
        handed: &mut Handed,
    ) -> ConnectResult<()> {
        if let Message::Relation(rel) = msg {
            return self.relation(ctx, rel).await;
        }
        if !msg.is_change() {
            return Ok(());
        }
        let first_any = out.len();
        let txn = self.txn.as_mut().ok_or_else(|| ConnectError::fatal("row change outside a transaction in the replication stream"))?;
        txn.seq += 1;
        let (seq, commit_lsn, xid, ts_usec) = (txn.seq, txn.commit_lsn, txn.xid, txn.ts_usec);
        let durable_already = self.skip.is_some_and(|s| s.covers(commit_lsn, seq, lsn));
        if let (Some(topic), Some(counts)) = (&ctx.cfg.transaction_topic, txn.counts.as_mut()) {
            if counts.begin_pending {
                counts.begin_pending = false;
                out.push(topic.begin(counts, lsn, ctx.partition, change_offset(lsn, commit_lsn, i64::from(xid), ts_usec, 0)));
                *handed = Handed { resume: commit_lsn, skip: Some(Skip::seq(commit_lsn, 0)), last_commit: handed.last_commit };
            }
        } else if durable_already {
            return Ok(());
        }
        if ctx.incremental.running() {
            // A change to a row of the open window's chunk supersedes the row read.
            let key_of = |relation: u32, datums: &[Datum]| {
                self.keys.get(&relation).filter(|k| !k.is_empty()).and_then(|k| {
                    k.iter()
                        .map(|i| match datums.get(*i) {
                            Some(Datum::Text(t)) => Some((*t).to_owned()),
                            _ => None,
                        })
                        .collect::<Option<Vec<String>>>()
                })
            };
            let mut touched = Vec::new();
            match &msg {
                Message::Insert { relation, new } => touched.extend(key_of(*relation, new).map(|k| (*relation, k))),
                Message::Update { relation, old, new } => {
                    touched.extend(key_of(*relation, new).map(|k| (*relation, k)));
                    touched.extend(old.as_ref().and_then(|o| key_of(*relation, o.datums())).map(|k| (*relation, k)));
                }
                Message::Delete { relation, old } => touched.extend(key_of(*relation, old.datums()).map(|k| (*relation, k))),
                Message::Truncate { relations, .. } => {
                    for oid in relations {
                        if let Some(Some(t)) = self.relations.get(oid) {
                            ctx.incremental.truncated(&t.id);
                        }
                    }
                }
                _ => {}
            }
            for (relation, key) in touched {
                if let Some(Some(t)) = self.relations.get(&relation) {
                    ctx.incremental.changed(&t.id, key);
                }
            }
        }
        let signal = match (&msg, self.signal) {
            (Message::Insert { relation, new }, Some((oid, columns))) if *relation == oid => Signal::from_tuple(new, columns),
            _ => None,
        };
        let first = out.len();
        let info = Self::change_info(self.last_commit_lsn, xid, ts_usec, lsn);
        let offset = || change_offset(lsn, commit_lsn, i64::from(xid), ts_usec, seq);
        // Change records leave their position to the tail (see [`Tail`]).
        let no_position = SourcePartition::new();
        let unpositioned = SourceOffset::new;
        let skipped = |op: char| ctx.cfg.skipped.contains(&op);
        match msg {
            Message::Insert { relation, new } => {
                // (The signal table is read below even when it is not captured.)
                if let Some(t) = self.table(relation)?.filter(|_| !skipped('c')) {
                    out.push(t.record('c', Row::NONE, t.row(&new)?, &info, ctx.source_schema, &no_position, unpositioned()));
                }
            }
            Message::Update { relation, old, new } => {
                let Some(t) = self.table(relation)? else { return Ok(()) };
                let after = t.row(&new)?;
                let before = match &old {
                    Some(o) => t.row(o.datums())?,
                    None => Row::NONE,
                };
                let key_changed = t.has_key() && matches!(old, Some(OldTuple::Key(_)) | Some(OldTuple::Full(_))) && before.key != after.key;
                if key_changed {
                    // A primary key change is a delete of the old key and a create of the new one.
                    if !skipped('d') {
                        let d = t.record('d', before, Row::NONE, &info, ctx.source_schema, &no_position, unpositioned());
                        let tomb = ctx.cfg.tombstones_on_delete.then(|| t.tombstone(&d));
                        out.push(d);
                        out.extend(tomb);
                    }
                    if !skipped('c') {
                        out.push(t.record('c', Row::NONE, after, &info, ctx.source_schema, &no_position, unpositioned()));
                    }
                } else if !skipped('u') {
                    out.push(t.record('u', before, after, &info, ctx.source_schema, &no_position, unpositioned()));
                }
            }
            Message::Delete { relation, old } => {
                let Some(t) = self.table(relation)? else { return Ok(()) };
                if !skipped('d') {
                    let d = t.record('d', t.row(old.datums())?, Row::NONE, &info, ctx.source_schema, &no_position, unpositioned());
                    let tomb = ctx.cfg.tombstones_on_delete.then(|| t.tombstone(&d));
                    out.push(d);
                    out.extend(tomb);
                }
            }
            Message::Truncate { relations, .. } if !skipped('t') => {
                for oid in relations {
                    if let Some(t) = self.table(oid)? {
                        out.push(t.truncate(&info, ctx.source_schema, &no_position, unpositioned()));
                    }
                }
            }
            _ => {}
        }
        if let (Some(topic), Some(counts)) = (&ctx.cfg.transaction_topic, self.txn.as_mut().and_then(|t| t.counts.as_mut())) {
            // Durable changes of a resent transaction are counted, then dropped.
            for r in out[first..].iter_mut().filter(|r| !r.value.is_null()) {
                topic.event(counts, &collection(r), lsn, r);
            }
            if durable_already {
                out.truncate(first);
                return Ok(());
            }
        }
        // Records before a signal carry the progress from before it.
        for r in &mut out[first_any..] {
            ctx.incremental.stamp(&mut r.source_offset);
        }
        let blocking = match signal.as_ref().map(Signal::action) {
            Some(Action::Blocking(collections, conditions)) => Some((collections, conditions)),
            _ => None,
        };
        // Before a blocking snapshot's last record is durable, no offset covers its signal:
        // a restart reads the signal again (and sends the signal row's own record again).
        let (tail_lsn, tail_seq) = if blocking.is_some() { (Lsn(lsn.0.saturating_sub(1)), seq - 1) } else { (lsn, seq) };
        if out.len() > first {
            self.tail = Some(Tail { lsn: tail_lsn, commit_lsn, xid, ts_usec, seq: tail_seq });
        }
        if let (Some((collections, conditions)), Some(signal)) = (blocking, signal.as_ref()) {
            self.settle_tail(ctx, out);
            let mut before = change_offset(tail_lsn, commit_lsn, i64::from(xid), ts_usec, tail_seq);
            let mut after = offset();
            for o in [&mut before, &mut after] {
                ctx.incremental.stamp(o);
                mark_blocking(o);
            }
            tracing::info!(signal = %signal.id, tables = ?collections, %lsn, "blocking snapshot requested: streaming stops after the signal until the tables are read");
            self.blocking = Some(BlockingRequest {
                signal: signal.id.clone(),
                collections,
                conditions,
                at: Blocking {
                    lsn,
                    tx_id: i64::from(xid),
                    sequence: sequence(self.last_commit_lsn, lsn),
                    before,
                    after,
                    selects: Default::default(),
                },
            });
        } else if let Some(signal) = signal {
            // The signal changes what offsets carry: the changes before it get theirs now.
            self.settle_tail(ctx, out);
            let emit = Emit { base: offset(), lsn, tx_id: i64::from(xid), source_schema: ctx.source_schema, partition: ctx.partition };
            let reads = ctx.incremental.signal(ctx.cfg, ctx.catalog, &signal, emit).await?;
            out.extend(reads);
        }
        // Even a change that produced no record is processed: a reconnect skips it too.
        *handed = Handed { resume: commit_lsn, skip: Some(Skip::seq(commit_lsn, seq)), last_commit: handed.last_commit };
        Ok(())
    }
}

impl Stream {
    /// The `source` block of a streamed event at `lsn` in transaction `xid` committed at
    /// `ts_usec`, after the commit `last_commit`.
    fn change_info(last_commit: Option<Lsn>, xid: u32, ts_usec: i64, lsn: Lsn) -> SourceInfo {
        SourceInfo {
            ts_ms: ts_usec.div_euclid(1000),
            snapshot: "false",
            tx_id: Some(i64::from(xid)),
            lsn: Some(lsn.0),
            sequence: Some(sequence(last_commit, lsn)),
        }
    }

    /// A logical decoding message (see `message.rs`). A transactional one is a change of its
    /// transaction: counted in `txn_seq` whether or not its prefix is emitted, skipped when a
    /// restart resends it durable already, positioned through [`Tail`]. A non-transactional
    /// one comes between transactions: its record resumes just after it, and it becomes the
    /// last commit of `source.sequence`, as in Debezium (unless its prefix is filtered out).
    #[allow(clippy::too_many_arguments)]
    fn message(
        &mut self,
        ctx: &mut StreamContext<'_>,
        transactional: bool,
        lsn: Lsn,
        prefix: &str,
        content: &[u8],
        out: &mut Vec<SourceRecord>,
        handed: &mut Handed,
    ) -> ConnectResult<()> {
        let cfg = ctx.cfg;
        let topic = self
            .messages
            .get_or_insert_with(|| MessageTopic::new(&cfg.topic_prefix, &cfg.dbname, cfg.binary_mode, ctx.source_schema))
            .clone();
        let wanted = cfg.message_prefixes.includes(prefix);
        match self.txn.as_mut().filter(|_| transactional) {
            Some(txn) => {
                txn.seq += 1;
                let (seq, commit_lsn, xid, ts_usec) = (txn.seq, txn.commit_lsn, txn.xid, txn.ts_usec);
                let durable_already = self.skip.is_some_and(|s| s.covers(commit_lsn, seq, lsn));
                let first = out.len();
                if wanted {
                    if let (Some(tx_topic), Some(counts)) = (&cfg.transaction_topic, txn.counts.as_mut()) {
                        if counts.begin_pending && !durable_already {
                            counts.begin_pending = false;
                            out.push(tx_topic.begin(
                                counts,
                                lsn,
                                ctx.partition,
                                change_offset(lsn, commit_lsn, i64::from(xid), ts_usec, 0),
                            ));
                        }
                    }
                    let info = Self::change_info(self.last_commit_lsn, xid, ts_usec, lsn);
                    let mut record = topic.record(prefix, content, &info, ctx.source_schema, &SourcePartition::new(), SourceOffset::new());
                    if let (Some(tx_topic), Some(counts)) = (&cfg.transaction_topic, txn.counts.as_mut()) {
                        tx_topic.event(counts, message::COLLECTION, lsn, &mut record);
                    }
                    if durable_already {
                        // Counted for the transaction's END, not written again.
                        out.truncate(first);
                    } else {
                        out.push(record);
                        self.tail = Some(Tail { lsn, commit_lsn, xid, ts_usec, seq });
                    }
                }
                *handed = Handed { resume: commit_lsn, skip: Some(Skip::seq(commit_lsn, seq)), last_commit: handed.last_commit };
            }
            // A filtered one is passed over, as Debezium's decoder drops it: nothing moves.
            None if !wanted => {}
            None => {
                // Resumes just after the message: a restart does not send it again.
                let resume = Lsn(lsn.0 + 1);
                self.last_commit_lsn = Some(lsn);
                let ts_usec = self.last_begin_ts_usec.unwrap_or_else(|| now_ms() * 1000);
                let info = SourceInfo {
                    ts_ms: ts_usec.div_euclid(1000),
                    snapshot: "false",
                    tx_id: None,
                    lsn: Some(lsn.0),
                    sequence: Some(sequence(Some(lsn), lsn)),
                };
                out.push(topic.record(prefix, content, &info, ctx.source_schema, ctx.partition, heartbeat_offset(resume, ts_usec)));
                *handed = Handed { resume, skip: None, last_commit: Some(lsn) };
            }
        }
        Ok(())
    }
}

/// Debezium's `source.sequence`: `["<last commit lsn>","<lsn>"]`, `[null,"<lsn>"]` before
/// the first commit after a fresh start (without `format!`: this is built for every change).
pub fn sequence(last_commit: Option<Lsn>, lsn: Lsn) -> String {
    let mut b = itoa::Buffer::new();
    let mut s = String::with_capacity(48);
    match last_commit {
        Some(c) => {
            s.push_str("[\"");
            s.push_str(b.format(c.0));
            s.push_str("\",\"");
        }
        None => s.push_str("[null,\""),
    }
    s.push_str(b.format(lsn.0));
    s.push_str("\"]");
    s
}

/// `schema.table` of a change event, from its `source` block.
fn collection(r: &SourceRecord) -> String {
    let source = r.value.as_struct().and_then(|e| e.get("source")).and_then(Value::as_struct);
    let part = |name| source.and_then(|s| s.get(name)).and_then(Value::as_str).unwrap_or_default();
    format!("{}.{}", part("schema"), part("table"))
}

/// Debezium's heartbeat record: topic `<topic.heartbeat.prefix>.<prefix>` (by default
/// `__debezium-heartbeat.<prefix>`), key
/// `{serverName}`, value `{ts_ms}`.
fn heartbeat(ctx: &StreamContext<'_>, lsn: Lsn) -> SourceRecord {
    let key_schema =
        Schema::struct_of([("serverName", Schema::string().into_ref())]).named("io.debezium.connector.common.ServerNameKey").into_ref();
    let value_schema =
        Schema::struct_of([("ts_ms", Schema::int64().into_ref())]).named("io.debezium.connector.common.Heartbeat").into_ref();
    let ts = now_ms();
    SourceRecord {
        source_partition: ctx.partition.clone(),
        source_offset: heartbeat_offset(lsn, ts * 1000),
        topic: ctx.cfg.topics.heartbeat_topic(&ctx.cfg.heartbeat_topic_prefix, &ctx.cfg.topic_prefix),
        key: Value::Struct(Struct::from_values(key_schema.clone(), vec![Value::String(ctx.cfg.topic_prefix.clone())])),
        key_schema: Some(key_schema),
        value: Value::Struct(Struct::from_values(value_schema.clone(), vec![Value::Int64(ts)])),
        value_schema: Some(value_schema),
        ..SourceRecord::default()
    }
}

#[cfg(test)]
mod sequence_tests {
    use super::*;

    #[test]
    fn sequence_is_debeziums_pair_of_quoted_lsns() {
        assert_eq!(sequence(Some(Lsn(22_910_000)), Lsn(22_910_216)), r#"["22910000","22910216"]"#);
        assert_eq!(sequence(Some(Lsn(0)), Lsn(u64::MAX)), format!(r#"["0","{}"]"#, u64::MAX));
        assert_eq!(sequence(None, Lsn(22_910_216)), r#"[null,"22910216"]"#);
    }
}
