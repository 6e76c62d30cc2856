//! The worker's configuration and the connectors and tasks it runs.

pub mod config;
pub mod overrides;
pub mod providers;
