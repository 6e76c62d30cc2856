//! Connector JSON as the REST API takes it (`rest/src/connectors.rs`, `herder/validate.rs`):
//! the body of `POST /connectors` or `PUT /connectors/{name}/config`, read and checked, then
//! the config validated against the connector's definition, as the herder does before it
//! stores a config.
//!
//! Input: byte 0 picks the request (bit 0: PUT, else POST) and the worker's settings (bits
//! 1-2: client override policy, bit 3: topic creation off, bit 4: exactly-once source
//! support on), the rest is the body.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use sluice_rest::connectors::{create_request, put_config_request};
use sluice_rest::request::parse_json;
use sluice_runtime::herder::validate::{invalid_message, redact, validate, ExactlyOnceCheck};
use sluice_runtime::plugins::Plugins;
use sluice_runtime::worker::overrides::OverridePolicy;

static PLUGINS: LazyLock<Plugins> = LazyLock::new(|| Plugins::new(sluice_connectors::connectors()));

fuzz_target!(|data: &[u8]| {
    let [flags, body @ ..] = data else { return };
    let Ok(json) = parse_json(body) else { return };
    let config = if flags & 1 == 0 { create_request(json).map(|(_, config, _)| config) } else { put_config_request("fuzz", json) };
    let Ok(config) = config else { return };
    let policy = [OverridePolicy::All, OverridePolicy::None, OverridePolicy::Principal][usize::from((flags >> 1) & 3) % 3];
    let exactly_once = ExactlyOnceCheck { worker_enabled: flags & 16 != 0, offsets_topic: "connect-offsets" };
    let Ok((infos, plugin)) = validate(&PLUGINS, &config, policy, flags & 8 == 0, exactly_once) else { return };
    let _ = invalid_message(&infos);
    if let Some(def) = PLUGINS.config_def(plugin.class) {
        let _ = redact(&def, &config);
    }
});
