use sluice_api::ConfigDef;

/// No keys of its own: only the common sink keys (`topics`, `topics.regex`, …).
pub fn def() -> ConfigDef {
    ConfigDef::new()
}
