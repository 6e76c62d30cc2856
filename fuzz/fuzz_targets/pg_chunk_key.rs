//! Debezium's incremental-snapshot chunk keys (`postgres/java_keys.rs`): a Java-serialized
//! `Object[]`, read from a stored offset.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_connectors::postgres::fuzzing;

fuzz_target!(|serialized: &[u8]| {
    let _ = fuzzing::chunk_key(serialized);
});
