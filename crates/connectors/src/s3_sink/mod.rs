//! `S3SinkConnector`: writes topic partitions to S3 (or an S3-compatible store) as Confluent's
//! `io.confluent.connect.s3.S3SinkConnector` does: same keys, same object names, same
//! formats (JSON lines, Avro container files, Parquet, raw bytes).
//!
//! ## Object names
//! `<topics.dir>/<topic>/<encoded partition>/<topic>+<kafka partition>+<start offset>.<ext>`,
//! the start offset zero-padded to `filename.offset.zero.pad.width` digits; `<ext>` is
//! `.json`, `.json.gz`, `.avro`, `.parquet` with parquet-mr's codec infix (`.snappy.parquet`,
//! `.gz.parquet`, `.zstd.parquet`) or `format.bytearray.extension`.
//!
//! ## Exactly-once output from at-least-once delivery
//! ```text
//!  log ─▶ put ─▶ PartitionWriter (one per topic partition; objects open per encoded partition)
//!                  │ rotation: flush.size, schema change, record time, wall clock
//!                  ▼
//!              complete every open object ─▶ durable offset = first offset not in them
//!  pre_commit ─▶ durable offsets ─▶ consumer group commit
//! ```
//! Offsets are reported durable only for records inside completed objects. After a crash the
//! runtime redelivers from the committed offset; because an object's name comes from its first
//! record's offset and rotation is decided from the records alone, the same objects are
//! written again under the same names with the same bytes (encoders are deterministic: no
//! clock, no random Avro sync marker). An object becomes visible atomically (PutObject or
//! CompleteMultipartUpload), so readers never see a partial object.
//!
//! Caveat (as in Confluent): with `rotate.schedule.interval.ms` or `timestamp.extractor=Wallclock`,
//! rotation depends on the worker's clock, so a replay after a crash may cut objects at other
//! offsets; records are still never lost, but may then appear in two objects.
//!
//! ## Memory
//! One object holds at most about one part (`s3.part.size`) in memory: full parts are sent
//! as they fill (a Parquet row group is written out once it reaches a part). Many objects
//! open at once (a `FieldPartitioner` with many values, a big `flush.size`) would each hold
//! their records until `flush.size`; `s3.open.objects.max.bytes` (sluice's own key, 256 MiB by
//! default) bounds the sum per topic partition: past it, every open object of the partition is
//! uploaded, as when `flush.size` is reached. The sum is computed from the records alone, so a
//! replay cuts the objects at the same record. Confluent's sink has no such bound (it even
//! allocates a whole part per open object). A task holds at most its partitions times the
//! bound, plus per-object encoder state that is not counted (small for JSON and Avro, some
//! column buffers for Parquet).
//!
//! ## Encryption and ACLs
//! `s3.ssea.name` (`AES256`, `aws:kms`, `aws:kms:dsse`), `s3.sse.kms.key.id`,
//! `s3.sse.customer.key` (SSE-C, with `AES256`) and `s3.acl.canned` go on every PutObject and
//! CreateMultipartUpload, the SSE-C key also on every UploadPart. The customer key is a
//! password-type key: hidden in the REST API, redacted in logs.
//!
//! ## Failures
//! The SDK retries 5xx, throttling and timeouts (`s3.part.retries`, `s3.retry.backoff.ms`);
//! what still fails is returned as retriable: the runtime redelivers the batch, records
//! already handled are skipped by offset, and the interrupted upload resumes. Refused
//! credentials and a missing bucket are fatal (at start and on every write).

pub(crate) mod config;
mod connector;
pub(crate) mod format;
mod partitioner;
mod storage;
mod task;
mod writer;

use sluice_api::{ConnectorKind, ConnectorPlugin};

pub use config::{
    AVRO_FORMAT, BYTEARRAY_FORMAT, DAILY_PARTITIONER, DEFAULT_PARTITIONER, FIELD_PARTITIONER, HOURLY_PARTITIONER, JSON_FORMAT,
    PARQUET_FORMAT, TIME_BASED_PARTITIONER,
};

pub const CLASS: &str = "io.confluent.connect.s3.S3SinkConnector";

pub fn plugin() -> ConnectorPlugin {
    ConnectorPlugin {
        class: CLASS,
        task_class: "io.confluent.connect.s3.S3SinkTask",
        aliases: &["s3", "S3SinkConnector"],
        kind: ConnectorKind::Sink,
        version: env!("CARGO_PKG_VERSION"),
        create: || Box::new(connector::S3SinkConnector::default()),
    }
}
