//! The worker.properties reader (`worker/config.rs`): the file's text as the binary reads it,
//! then the worker config and what the worker builds from it at start (converters, the
//! embedded log's options, request signing).
//!
//! Two changes keep a run off the machine: config providers may only read under a path that
//! does not exist, and the advertised host is set when the input does not set it (the
//! default asks the resolver for this host's address).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_runtime::convert::{find_converter, find_header_converter};
use sluice_runtime::herder::session::SigningSettings;
use sluice_runtime::log::embedded::{EmbeddedOptions, FsyncPolicy};
use sluice_runtime::worker::config::{parse_properties, WorkerConfig};

const NO_PATH: &str = "/nonexistent/sluice-fuzz";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut props = parse_properties(text);
    if let Some(names) = props.get("config.providers").cloned() {
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            props.insert(format!("config.providers.{name}.param.allowed.paths"), NO_PATH.to_owned());
        }
    }
    props.entry("rest.advertised.host.name".to_owned()).or_insert_with(|| "worker.example".to_owned());
    let Ok(worker) = WorkerConfig::from_sources(props, []) else { return };
    let _ = worker.advertised_url();
    for (is_key, (class, props)) in [(true, worker.key_converter()), (false, worker.value_converter())] {
        if let Some(plugin) = find_converter(&class) {
            let _ = (plugin.create)(&props, is_key);
        }
    }
    let (class, props) = worker.header_converter();
    if let Some(plugin) = find_header_converter(&class) {
        let _ = (plugin.create)(&props);
    }
    if let Ok(fsync) = FsyncPolicy::parse(&worker.log_fsync) {
        let _ = EmbeddedOptions { fsync, cache_bytes: worker.log_cache_bytes, ..EmbeddedOptions::default() }.validate();
    }
    let _ = SigningSettings::from_worker_props(&worker.props);
});
