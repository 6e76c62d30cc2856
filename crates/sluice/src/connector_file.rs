//! Connector definitions given on the command line, as `connect-standalone` reads them:
//! a `.properties` file, or JSON either as `{"name": …, "config": {…}}` or as a flat map;
//! also a Strimzi `KafkaConnector` in YAML. The same reader as `connectors.dir`.

use std::path::Path;

use sluice_runtime::declared::file::{read_file, Declaration};

pub fn load(path: &Path) -> anyhow::Result<Declaration> {
    read_file(path).map_err(|e| anyhow::anyhow!("connector file {e}"))
}
