//! The connector API of sluice: Kafka Connect's data model, records, configuration
//! definitions and the connector/task traits.
//!
//! Both the runtime and every built-in connector compile against this crate; it depends on
//! neither. Nothing here does I/O.
//!
//! ```text
//! source:  SourceTask::poll -> transforms -> converters -> log append
//!          delivery ack -> acked prefix per source partition -> offset flush -> SourceTask::commit
//! sink:    log read -> converters -> transforms -> SinkTask::put -> SinkTask::pre_commit -> commit
//! ```

pub mod config;
pub mod connector;
pub mod decimal;
pub mod error;
pub mod gauges;
pub mod record;
pub mod schema;
pub mod secret;
pub mod text;
#[cfg(feature = "tls")]
pub mod pem;
#[cfg(feature = "tls")]
pub mod tls;
pub mod value;

pub use config::{ConfigDef, ConfigKey, ConfigType, ConfigValue, Importance, ParsedConfig, Props, Validator};
pub use connector::{
    Connector, ConnectorContext, ConnectorKind, ConnectorPlugin, ErrantRecordReporter, ExactlyOnceSupport, OffsetReader, Setbacks, SinkTask,
    SinkTaskContext, SourceTask, SourceTaskContext, Task,
};
pub use error::{ConnectError, ConnectResult};
pub use gauges::TaskGauges;
pub use record::{Header, Headers, SinkRecord, SourceOffset, SourcePartition, SourceRecord, TimestampType, TopicPartition};
pub use schema::{Field, Schema, SchemaRef, SchemaType};
pub use secret::Secret;
pub use value::{Struct, Value};
