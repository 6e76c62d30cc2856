//! What an unchanged TOASTed column holds when pgoutput does not send it (an update under
//! `REPLICA IDENTITY DEFAULT` that leaves a large value alone): `unavailable.value.placeholder`
//! in the form Debezium's `UnchangedToastedPlaceholder` and `PostgresValueConverter` give it
//! for the column's type.
//!
//! | column type                              | value                                              |
//! |------------------------------------------|----------------------------------------------------|
//! | text-like, json, xml, enum, range, ltree, tsvector, numeric under `decimal.handling.mode=string` | the placeholder as a string |
//! | bytea                                    | its octets (`bytes`); the string (`hex`, `base64`, `base64-url-safe`) |
//! | hstore                                   | `{"<p>":"<p>"}` (`json`); the map `<p>` → `<p>` (`map`) |
//! | text[], varchar[], char[], json[], jsonb[], enum[] | `[<p>]`                                  |
//! | bytea[]                                  | `[<octets>]` or `[<string>]`, as bytea             |
//! | int4[], date[] / int8[]                  | each octet as a signed INT32 / INT64               |
//! | uuid[]                                   | `[UUID.nameUUIDFromBytes(<octets>)]` (MD5, version 3) |
//! | anything else                            | null                                               |
//!
//! The string is the octets read as UTF-8 (`new String(bytes)`). Difference: under
//! `binary.handling.mode=base64`/`base64-url-safe` Debezium's converter has no case for the
//! placeholder and writes null; here the placeholder string stands in, as under `hex`, so a
//! consumer can tell "unchanged" from "set to null".

use md5::{Digest, Md5};
use sluice_api::Value;

use super::config::{BinaryMode, DecimalMode, HstoreMode};
use super::mapping::{Modes, PgType};

/// The value standing for an unchanged TOASTed column of type `ty`.
pub fn unavailable(ty: &PgType, modes: &Modes) -> Value {
    let octets: &[u8] = &modes.unavailable;
    let text = || Value::String(String::from_utf8_lossy(octets).into_owned());
    let binary = || match modes.binary {
        BinaryMode::Bytes => Value::Bytes(octets.to_vec()),
        _ => text(),
    };
    match ty {
        PgType::Text | PgType::Json | PgType::Xml | PgType::Enum { .. } | PgType::Range | PgType::Ltree | PgType::Tsvector => text(),
        PgType::Numeric { .. } if modes.decimal == DecimalMode::String => text(),
        PgType::Bytea => binary(),
        PgType::Hstore => {
            let s = String::from_utf8_lossy(octets).into_owned();
            match modes.hstore {
                HstoreMode::Json => Value::String(serde_json::json!({ s.clone(): s }).to_string()),
                HstoreMode::Map => Value::Map(vec![(Value::String(s.clone()), Value::String(s))]),
            }
        }
        PgType::Array(e) => match **e {
            PgType::Text | PgType::Json | PgType::Enum { .. } => Value::Array(vec![text()]),
            PgType::Bytea => Value::Array(vec![binary()]),
            PgType::Int4 | PgType::Date => Value::Array(octets.iter().map(|b| Value::Int32(i32::from(*b as i8))).collect()),
            PgType::Int8 => Value::Array(octets.iter().map(|b| Value::Int64(i64::from(*b as i8))).collect()),
            PgType::Uuid => Value::Array(vec![Value::String(name_uuid(octets))]),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// Java's `UUID.nameUUIDFromBytes`: the MD5 of the octets with version 3 and the IETF variant.
fn name_uuid(octets: &[u8]) -> String {
    let mut b: [u8; 16] = Md5::digest(octets).into();
    b[6] = (b[6] & 0x0f) | 0x30;
    b[8] = (b[8] & 0x3f) | 0x80;
    super::mapping::uuid_text(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn modes(placeholder: &'static [u8]) -> Modes {
        Modes { unavailable: Cow::Borrowed(placeholder), ..Modes::DEFAULT }
    }

    #[test]
    fn placeholders_per_type() {
        let m = modes(b"<?>");
        let s = |v: &str| Value::String(v.into());
        assert_eq!(unavailable(&PgType::Text, &m), s("<?>"));
        assert_eq!(unavailable(&PgType::Bytea, &m), Value::Bytes(b"<?>".to_vec()));
        assert_eq!(unavailable(&PgType::Bytea, &Modes { binary: BinaryMode::Hex, ..m.clone() }), s("<?>"));
        assert_eq!(unavailable(&PgType::Bytea, &Modes { binary: BinaryMode::Base64, ..m.clone() }), s("<?>"));
        assert_eq!(unavailable(&PgType::Hstore, &m), s(r#"{"<?>":"<?>"}"#));
        assert_eq!(unavailable(&PgType::Hstore, &Modes { hstore: HstoreMode::Map, ..m.clone() }), Value::Map(vec![(s("<?>"), s("<?>"))]));
        let array = |e: PgType| unavailable(&PgType::Array(Box::new(e)), &m);
        assert_eq!(array(PgType::Text), Value::Array(vec![s("<?>")]));
        assert_eq!(array(PgType::Bytea), Value::Array(vec![Value::Bytes(b"<?>".to_vec())]));
        assert_eq!(array(PgType::Int4), Value::Array(vec![Value::Int32(60), Value::Int32(63), Value::Int32(62)]));
        assert_eq!(array(PgType::Int8), Value::Array(vec![Value::Int64(60), Value::Int64(63), Value::Int64(62)]));
        assert_eq!(unavailable(&PgType::Array(Box::new(PgType::Int4)), &modes(&[0xff])), Value::Array(vec![Value::Int32(-1)]));
        assert_eq!(unavailable(&PgType::Int4, &m), Value::Null);
    }

    #[test]
    fn uuid_placeholder_is_javas_name_uuid() {
        // Debezium's DecoderDifferences.TOASTED_VALUE_UUID_STRING.
        assert_eq!(name_uuid(b"__debezium_unavailable_value"), "b68a35a7-17ad-35b3-af2a-ae46edb4545a");
    }
}
