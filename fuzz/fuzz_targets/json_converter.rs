//! JsonConverter's reader (`convert/json`): the bytes of a record key or value.
//!
//! Input: byte 0 picks the converter's settings (bit 0: schemas disabled, bit 1: numeric
//! decimals, bit 2: no null replacement, bit 3: key converter), the rest is the record.
//! Besides not panicking, the reader must agree with itself: the second read of the same
//! bytes (which skips parsing a schema it has just read) gives the same outcome, and a value
//! it read writes back into bytes that read again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_api::Props;
use sluice_runtime::convert::{Converter, ConverterType, JsonConverter};

fuzz_target!(|data: &[u8]| {
    let [flags, bytes @ ..] = data else { return };
    let props: Props = [
        ("schemas.enable", if flags & 1 == 0 { "true" } else { "false" }),
        ("decimal.format", if flags & 2 == 0 { "BASE64" } else { "NUMERIC" }),
        ("replace.null.with.default", if flags & 4 == 0 { "true" } else { "false" }),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let kind = if flags & 8 == 0 { ConverterType::Value } else { ConverterType::Key };
    let converter = JsonConverter::from_props(&props, kind).expect("valid converter properties");
    let first = converter.to_connect("topic", Some(bytes));
    let second = converter.to_connect("topic", Some(bytes));
    assert_eq!(first.is_ok(), second.is_ok(), "the second read disagrees: {first:?} then {second:?}");
    let Ok((schema, value)) = first else { return };
    let written = converter.from_connect("topic", schema.as_ref(), &value).expect("a value read writes back");
    let again = converter.to_connect("topic", written.as_deref());
    assert!(again.is_ok(), "what was written does not read back: {again:?}");
});
