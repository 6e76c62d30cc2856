//! End-to-end tests against the real `sluice` binary. One test binary, one module per area.

mod bad_input;
mod cli;
mod cluster;
mod crash;
mod distributed;
mod docker;
mod errors;
mod exactly_once;
mod image;
mod kafka;
mod kafka_overrides;
mod kafka_security;
mod pg_s3;
mod pipeline;
mod postgres;
mod postgres_features;
mod postgres_incremental;
mod quickstart;
mod rest;
mod rest_golden;
mod s3;
mod secrets;
mod tls;
mod topic_creation;
mod transforms;
mod warehouse;
