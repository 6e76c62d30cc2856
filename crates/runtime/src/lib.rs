//! The sluice runtime: a Kafka Connect worker's machinery.
//!
//! - [`log`]: the log interface and the embedded durable log.
//! - [`convert`]: converters between the data model and log bytes.
//! - [`herder`]: connector and task lifecycle, the surface REST calls.

pub mod convert;
pub mod declared;
pub mod herder;
pub mod log;
pub mod logging;
pub mod metrics;
pub mod partitioner;
pub mod plugins;
pub mod scaling;
pub mod store;
pub mod task;
pub mod transform;
pub mod worker;
