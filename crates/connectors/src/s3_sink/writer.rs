//! One topic partition's open objects, their rotation, and its durable offset.
//!
//! ```text
//!  put(record) ─▶ skip if offset < next_offset (a redelivery of what is already handled)
//!              ─▶ pending commit? complete it first
//!              ─▶ schema change / record-time / wall-clock rotation? commit, then go on
//!              ─▶ encode into the object of its encoded partition (parts stream out)
//!              ─▶ flush.size reached, or open objects past s3.open.objects.max.bytes? commit
//!  commit: finish + complete every open object ─▶ durable = next_offset
//!  pre_commit reports `durable` (or next_offset when nothing is open)
//! ```
//! Every object's name is fixed by its first record's offset, and every rotation decision
//! depends only on the records (except `rotate.schedule.interval.ms` and the `Wallclock`
//! extractor), so a replay from the durable offset rewrites the same objects with the same
//! bytes. A failure at any step returns an error and leaves the state so that the same call
//! (or the redelivered batch) resumes where it stopped.

use std::collections::{BTreeMap, HashMap};

use sluice_api::{ConnectError, ConnectResult, SchemaRef, SinkRecord, Struct, TopicPartition, Value};

use super::config::{Compatibility, NullValues, S3SinkConfig};
use super::format::{self, RecordEncoder};
use super::partitioner::Partitioner;
use super::storage::{Store, Upload};

/// What every partition writer of a task shares.
pub struct Shared {
    pub cfg: S3SinkConfig,
    pub store: Store,
    pub partitioner: Partitioner,
    pub extension: String,
    pub timezone: Option<jiff::tz::TimeZone>,
}

impl Shared {
    /// `<topics.dir>/<topic>/<encoded>/<topic>+<partition>+<start offset>.<ext>`.
    pub fn object_key(&self, tp: &TopicPartition, encoded: &str, start_offset: i64) -> String {
        let c = &self.cfg;
        let d = &c.directory_delim;
        let f = &c.file_delim;
        let width = c.zero_pad_width;
        format!("{}{d}{}{d}{encoded}{d}{}{f}{}{f}{start_offset:0width$}{}", c.topics_dir, tp.topic, tp.topic, tp.partition, self.extension)
    }
}

struct OpenObject {
    upload: Upload,
    /// `None` once the trailer is written.
    encoder: Option<Box<dyn RecordEncoder>>,
    /// Bytes the encoder appended to the upload so far.
    appended: u64,
    /// This object's share of [`PartitionWriter::open_bytes`].
    held: usize,
}

pub struct PartitionWriter {
    tp: TopicPartition,
    objects: BTreeMap<String, OpenObject>,
    schemas: HashMap<String, Option<SchemaRef>>,
    record_count: u64,
    base_ts: Option<i64>,
    current_encoded: Option<String>,
    must_commit: bool,
    /// The first offset not handled yet (written into an object, or skipped as null).
    next_offset: Option<i64>,
    /// Every record before this offset is in a completed object (or skipped).
    durable: Option<i64>,
    next_scheduled: Option<i64>,
    /// What the open objects hold in memory, as it is when every full part has been sent:
    /// per object its bytes past the last full part plus what its encoder holds. Computed
    /// from the records alone (not from the upload buffers, which keep a part longer when
    /// sending it failed), so a replay rotates at the same record.
    open_bytes: usize,
}

impl PartitionWriter {
    pub fn new(tp: TopicPartition, shared: &Shared, now: i64) -> Self {
        let mut w = Self {
            tp,
            objects: BTreeMap::new(),
            schemas: HashMap::new(),
            record_count: 0,
            base_ts: None,
            current_encoded: None,
            must_commit: false,
            next_offset: None,
            durable: None,
            next_scheduled: None,
            open_bytes: 0,
        };
        w.schedule_next(shared, now);
        w
    }

    fn schedule_next(&mut self, shared: &Shared, now: i64) {
        if let (Some(interval), Some(tz)) = (shared.cfg.rotate_schedule_interval_ms, &shared.timezone) {
            self.next_scheduled = Some(next_time_adjusted_by_day(now, interval, tz));
        }
    }

    /// The offset up to which everything is durable in S3.
    pub fn durable_offset(&self) -> Option<i64> {
        if self.record_count == 0 && !self.must_commit && self.objects.is_empty() {
            self.next_offset.or(self.durable)
        } else {
            self.durable
        }
    }

    fn rotate_on_time(&self, shared: &Shared, encoded: &str, ts: Option<i64>, now: i64) -> bool {
        if self.record_count == 0 {
            return false;
        }
        let periodic = match (shared.cfg.rotate_interval_ms, ts, self.base_ts) {
            (Some(interval), Some(ts), Some(base)) => ts - base >= interval || self.current_encoded.as_deref() != Some(encoded),
            _ => false,
        };
        let scheduled = self.next_scheduled.is_some_and(|at| now >= at);
        periodic || scheduled
    }

    /// Handles one record. See the module docs.
    pub async fn write(&mut self, shared: &Shared, r: &SinkRecord, now: i64) -> ConnectResult<()> {
        if self.next_offset.is_some_and(|n| r.offset < n) {
            return Ok(());
        }
        self.settle(shared, now).await?;
        if r.value.is_null() {
            match shared.cfg.null_values {
                NullValues::Ignore => {
                    tracing::debug!(tp = %self.tp, offset = r.offset, "ignoring a record with a null value");
                    self.next_offset = Some(r.offset + 1);
                    return Ok(());
                }
                NullValues::Fail => {
                    return Err(ConnectError::fatal(format!(
                        "record {} offset {} has a null value (a tombstone); set behavior.on.null.values=ignore to skip such records",
                        self.tp, r.offset
                    )))
                }
                NullValues::Write => {}
            }
        }
        let ts = shared.partitioner.timestamp(r, now)?;
        let encoded = shared.partitioner.encode(r, ts)?;
        let schema = r.value_schema.clone();
        loop {
            if self.base_ts.is_none() {
                self.base_ts = ts;
            }
            let current = self.schemas.entry(encoded.clone()).or_insert_with(|| schema.clone()).clone();
            let change = should_change_schema(shared.cfg.compatibility, schema.as_ref(), current.as_ref())?;
            if (change && self.record_count > 0) || self.rotate_on_time(shared, &encoded, ts, now) {
                tracing::debug!(tp = %self.tp, offset = r.offset, schema_change = change, "rotating before this record");
                self.must_commit = true;
                self.settle(shared, now).await?;
                continue;
            }
            if change {
                self.schemas.insert(encoded.clone(), schema.clone());
            }
            break;
        }
        let target = self.schemas.get(&encoded).cloned().flatten();
        let projected;
        let record = match target {
            Some(t) if shared.cfg.compatibility != Compatibility::None && Some(&t) != schema.as_ref() => {
                projected = project(r, &t)?;
                &projected
            }
            _ => r,
        };
        self.current_encoded = Some(encoded.clone());
        if !self.objects.contains_key(&encoded) {
            let key = shared.object_key(&self.tp, &encoded, r.offset);
            let encoder = format::encoder(&shared.cfg, &key, record.value_schema.as_ref())?;
            let upload = shared.store.upload(key, shared.cfg.part_size);
            self.objects.insert(encoded.clone(), OpenObject { upload, encoder: Some(encoder), appended: 0, held: 0 });
        }
        let obj = self.objects.get_mut(&encoded).expect("just inserted");
        let enc = obj.encoder.as_mut().expect("an open object has its encoder until committed");
        let before = obj.upload.buffer().len();
        enc.write(record, obj.upload.buffer())?;
        obj.appended += (obj.upload.buffer().len() - before) as u64;
        let held = (obj.appended % shared.cfg.part_size as u64) as usize + enc.held_bytes();
        self.open_bytes = self.open_bytes - obj.held + held;
        obj.held = held;
        self.record_count += 1;
        self.next_offset = Some(r.offset + 1);
        let over_budget = self.open_bytes > shared.cfg.open_bytes_max;
        if self.record_count >= shared.cfg.flush_size || over_budget {
            if over_budget {
                tracing::debug!(tp = %self.tp, offset = r.offset, open_objects = self.objects.len(), open_bytes = self.open_bytes,
                    "the open objects reached s3.open.objects.max.bytes; uploading them");
            }
            self.must_commit = true;
            return self.settle(shared, now).await;
        }
        obj.upload.ship_full_parts(&shared.store).await
    }

    /// Completes a pending commit, if any.
    pub async fn settle(&mut self, shared: &Shared, now: i64) -> ConnectResult<()> {
        if self.must_commit {
            self.commit(shared, now).await?;
        }
        Ok(())
    }

    /// Wall-clock rotation while no records arrive (called from `pre_commit`).
    pub async fn rotate_if_scheduled(&mut self, shared: &Shared, now: i64) -> ConnectResult<()> {
        if self.record_count > 0 && self.next_scheduled.is_some_and(|at| now >= at) {
            self.must_commit = true;
        }
        self.settle(shared, now).await
    }

    async fn commit(&mut self, shared: &Shared, now: i64) -> ConnectResult<()> {
        loop {
            // (A separate statement: no borrow of the map may live across the awaits below.)
            let next = self.objects.keys().next().cloned();
            let Some(encoded) = next else { break };
            let obj = self.objects.get_mut(&encoded).expect("present");
            if let Some(mut enc) = obj.encoder.take() {
                enc.finish(obj.upload.buffer())?;
            }
            obj.upload.complete(&shared.store).await?;
            tracing::info!(tp = %self.tp, key = %obj.upload.key, "object committed");
            self.objects.remove(&encoded);
        }
        self.durable = self.next_offset;
        self.record_count = 0;
        self.open_bytes = 0;
        self.schemas.clear();
        self.base_ts = None;
        self.current_encoded = None;
        self.must_commit = false;
        self.schedule_next(shared, now);
        Ok(())
    }

    /// Drops the open objects (aborting multipart uploads); their records are not durable and
    /// will be delivered again from the committed offset.
    pub async fn abort(&mut self, shared: &Shared) {
        for (_, mut obj) in std::mem::take(&mut self.objects) {
            obj.upload.abort(&shared.store).await;
        }
        self.record_count = 0;
        self.open_bytes = 0;
        self.must_commit = false;
        self.schemas.clear();
        self.base_ts = None;
        self.current_encoded = None;
        self.next_offset = None;
        self.durable = None;
    }
}

/// Confluent's `DateTimeUtils.getNextTimeAdjustedByDay`: the next multiple of `interval`
/// counted from the start of the local day, at most the start of the next day.
fn next_time_adjusted_by_day(now: i64, interval: i64, tz: &jiff::tz::TimeZone) -> i64 {
    let Ok(t) = jiff::Timestamp::from_millisecond(now) else { return now + interval };
    let zoned = t.to_zoned(tz.clone());
    let Ok(start) = zoned.start_of_day() else { return now + interval };
    let start_ms = start.timestamp().as_millisecond();
    let next_day = start.tomorrow().map(|d| d.timestamp().as_millisecond()).unwrap_or(start_ms + 86_400_000);
    let next = start_ms + ((now - start_ms) / interval + 1) * interval;
    next.min(next_day)
}

/// Whether a record with `new` as its value schema must start new objects, as Confluent's
/// `StorageSchemaCompatibility.shouldChangeSchema`.
pub fn should_change_schema(c: Compatibility, new: Option<&SchemaRef>, current: Option<&SchemaRef>) -> ConnectResult<bool> {
    if new == current {
        return Ok(false);
    }
    if c == Compatibility::None {
        return Ok(true);
    }
    let (Some(n), Some(cur)) = (new, current) else { return Ok(true) };
    let (Some(nv), Some(cv)) = (n.version, cur.version) else {
        let name = format!("{c:?}").to_ascii_uppercase();
        return Err(ConnectError::fatal(format!(
            "schema.compatibility={name} needs versioned value schemas (a schema version on every record); set schema.compatibility=NONE"
        )));
    };
    Ok(match c {
        Compatibility::Backward | Compatibility::Full => nv > cv,
        Compatibility::Forward => nv < cv,
        Compatibility::None => true,
    })
}

/// Projects a struct value onto `target` by field name: missing fields take their default
/// (or null when optional), extra fields are dropped. Only the top level is projected.
fn project(r: &SinkRecord, target: &SchemaRef) -> ConnectResult<SinkRecord> {
    let Value::Struct(s) = &r.value else { return Ok(r.clone()) };
    let mut values = Vec::with_capacity(target.fields.len());
    for f in &target.fields {
        let v = match s.get(&f.name) {
            Some(v) => v.clone(),
            None => match (&f.schema.default, f.schema.optional) {
                (Some(d), _) => d.clone(),
                (None, true) => Value::Null,
                (None, false) => {
                    return Err(ConnectError::fatal(format!(
                        "record {}-{} offset {} cannot be projected onto schema version {:?}: field {:?} is missing and has no default",
                        r.topic, r.partition, r.offset, target.version, f.name
                    )))
                }
            },
        };
        values.push(v);
    }
    let mut out = r.clone();
    out.value = Value::Struct(Struct::from_values(target.clone(), values));
    out.value_schema = Some(target.clone());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::Schema;

    #[test]
    fn schema_changes_by_compatibility() {
        let v1 = Schema::struct_of([("a", Schema::int32().into_ref())]).with_version(1).into_ref();
        let v2 = Schema::struct_of([("a", Schema::int32().into_ref()), ("b", Schema::string().optional().into_ref())])
            .with_version(2)
            .into_ref();
        assert!(!should_change_schema(Compatibility::None, Some(&v1), Some(&v1)).unwrap());
        assert!(should_change_schema(Compatibility::None, Some(&v2), Some(&v1)).unwrap());
        assert!(should_change_schema(Compatibility::Backward, Some(&v2), Some(&v1)).unwrap());
        assert!(!should_change_schema(Compatibility::Backward, Some(&v1), Some(&v2)).unwrap());
        assert!(should_change_schema(Compatibility::Forward, Some(&v1), Some(&v2)).unwrap());
        let unversioned = Schema::struct_of([("a", Schema::int64().into_ref())]).into_ref();
        assert!(should_change_schema(Compatibility::Full, Some(&unversioned), Some(&v1)).is_err());
        let old = SinkRecord { value: Value::Struct(Struct::new(v1.clone()).with("a", 5)), value_schema: Some(v1), ..Default::default() };
        let p = project(&old, &v2).unwrap();
        assert_eq!(p.value.as_struct().unwrap().get("b"), Some(&Value::Null));
    }

    #[test]
    fn scheduled_rotation_aligns_to_the_day() {
        let utc = jiff::tz::TimeZone::UTC;
        // 00:10:00 with a 15-minute interval -> 00:15:00.
        assert_eq!(next_time_adjusted_by_day(600_000, 900_000, &utc), 900_000);
        // 23:50 with a one-hour interval -> midnight, not 00:50.
        assert_eq!(next_time_adjusted_by_day(85_800_000, 3_600_000, &utc), 86_400_000);
    }
}
