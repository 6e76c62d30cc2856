//! The REST API's HTTP mapping, tested in-process against an in-memory herder: paths, status
//! codes, JSON shapes (golden files under `tests/golden/`) and error cases.

mod support;

mod connectors;
mod errors;
mod loggers;
mod offsets;
mod plugins;
mod root;
mod serve;
mod tasks;
