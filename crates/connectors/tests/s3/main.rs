//! The S3 sink against a real S3-compatible server: moto 5.2.5 started by
//! `tests/services/s3.sh` (one server per test, on a free port). The task is driven through
//! its `SinkTask` API the way the runtime drives it (put, pre_commit, redelivery after a
//! retriable error). Objects are read back with the Rust Parquet and Avro readers, and
//! Parquet files also with pyarrow from the same venv. These tests fail, never skip, when
//! the server cannot start.

mod formats;
mod harness;
mod resilience;
mod rotation;
