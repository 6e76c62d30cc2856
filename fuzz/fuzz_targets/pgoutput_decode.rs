//! The pgoutput decoder (`postgres/decode.rs`): one message, as the payload of an XLogData.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_connectors::postgres::fuzzing;

fuzz_target!(|payload: &[u8]| {
    let _ = fuzzing::decode(payload);
});
