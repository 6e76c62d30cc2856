//! The worker: its configuration, and running the connectors' tasks the herder gives it
//! (building, supervising and restarting them).

pub mod config;
pub mod overrides;
pub mod providers;
pub mod restart;
pub mod task;
