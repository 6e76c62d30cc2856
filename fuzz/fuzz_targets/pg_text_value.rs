//! The Postgres text value parsers (`postgres/mapping.rs`, `interval.rs`, `geometry.rs`): the
//! text form of a column value, as pgoutput and snapshot rows carry it.
//!
//! Input: byte 0 picks the column type, byte 1 the handling modes (see
//! `sluice_connectors::postgres::fuzzing`), the rest is the text (UTF-8, as the server sends).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_connectors::postgres::fuzzing;

fuzz_target!(|data: &[u8]| {
    let [ty, modes, text @ ..] = data else { return };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let _ = fuzzing::text_value(usize::from(*ty), *modes, text);
});
