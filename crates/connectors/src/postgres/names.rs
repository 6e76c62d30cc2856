//! `schema.name.adjustment.mode` and `field.name.adjustment.mode`: names made valid for Avro
//! as Debezium's `SchemaNameAdjuster` makes them (`AVRO`, `AVRO_UNICODE` and their field
//! namers), checked against what Debezium 3.6.3's adjusters return for the same names.

use std::borrow::Cow;

/// How names are adjusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NameAdjust {
    /// Names pass through unchanged (Debezium 3's default).
    #[default]
    None,
    /// Every character Avro does not allow becomes `_`; a leading digit gets a `_` before it.
    Avro,
    /// Every character Avro does not allow, `_` included, becomes `_uXXXX` (its UTF-16 code unit).
    AvroUnicode,
}

impl NameAdjust {
    /// `none`, `avro` or `avro_unicode` (any case).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Some(Self::None),
            "avro" => Some(Self::Avro),
            "avro_unicode" => Some(Self::AvroUnicode),
            _ => None,
        }
    }

    /// A schema's full name (dots separate its namespace): `field` false. A field's name
    /// (no dots allowed): `field` true.
    pub fn adjust<'a>(&self, name: &'a str, field: bool) -> Cow<'a, str> {
        let unicode = match self {
            Self::None => return Cow::Borrowed(name),
            Self::Avro => false,
            Self::AvroUnicode => true,
        };
        let ascii = |u: u16| u8::try_from(u).ok().filter(u8::is_ascii);
        let first_ok = |u: u16| ascii(u).is_some_and(|b| b.is_ascii_alphabetic() || (b == b'_' && !unicode));
        let next_ok = |u: u16| first_ok(u) || ascii(u).is_some_and(|b| b.is_ascii_digit() || (b == b'.' && !field));
        let units: Vec<u16> = name.encode_utf16().collect();
        if units.iter().enumerate().all(|(i, u)| if i == 0 { first_ok(*u) } else { next_ok(*u) }) {
            return Cow::Borrowed(name);
        }
        let mut out = String::with_capacity(name.len() + 4);
        for (i, &u) in units.iter().enumerate() {
            let ok = if i == 0 { first_ok(u) } else { next_ok(u) };
            if ok {
                out.push(char::from(u as u8));
            } else if i == 0 && !unicode && next_ok(u) {
                // A leading digit is kept, after a `_`.
                out.push('_');
                out.push(char::from(u as u8));
            } else if unicode {
                out.push_str(&format!("_u{u:04x}"));
            } else {
                out.push('_');
            }
        }
        Cow::Owned(out)
    }
}

/// `topic.naming.strategy` and `topic.delimiter`: how a table's topic is named, as Debezium
/// 3.6.3's built-in strategies name it for Postgres (observed with the real connector: its
/// table ids have no catalog).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicNaming {
    /// `DefaultTopicNamingStrategy`: `<prefix><d><table>`, without the schema. Otherwise
    /// `SchemaTopicNamingStrategy` (the default): `<prefix><d><schema><d><table>`.
    pub without_schema: bool,
    pub delimiter: Cow<'static, str>,
}

impl TopicNaming {
    pub const DEFAULT: TopicNaming = TopicNaming { without_schema: false, delimiter: Cow::Borrowed(".") };

    /// A table's topic; its key, value and envelope schemas are named after it.
    pub fn data_topic(&self, prefix: &str, schema: &str, table: &str) -> String {
        let d = &self.delimiter;
        if self.without_schema {
            format!("{prefix}{d}{table}")
        } else {
            format!("{prefix}{d}{schema}{d}{table}")
        }
    }

    /// `<topic.heartbeat.prefix><d><prefix>`.
    pub fn heartbeat_topic(&self, heartbeat_prefix: &str, prefix: &str) -> String {
        format!("{heartbeat_prefix}{}{prefix}", self.delimiter)
    }

    /// `<prefix><d><topic.transaction>`.
    pub fn transaction_topic(&self, prefix: &str, transaction: &str) -> String {
        format!("{prefix}{}{transaction}", self.delimiter)
    }
}

impl Default for TopicNaming {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, AVRO, AVRO_UNICODE, AVRO_FIELD_NAMER, AVRO_UNICODE_FIELD_NAMER), as Debezium
    /// 3.6.3's `SchemaNameAdjuster` constants adjust them
    /// (`tests/golden/postgres/DebeziumNames.java` printed them).
    const RECORDED: &[(&str, &str, &str, &str, &str)] = &[
        (
            "srv.public.items.Value",
            "srv.public.items.Value",
            "srv.public.items.Value",
            "srv_public_items_Value",
            "srv_u002epublic_u002eitems_u002eValue",
        ),
        (
            "srv.public.my-table.Value",
            "srv.public.my_table.Value",
            "srv.public.my_u002dtable.Value",
            "srv_public_my_table_Value",
            "srv_u002epublic_u002emy_u002dtable_u002eValue",
        ),
        (
            "srv.1public.t$x.Key",
            "srv.1public.t_x.Key",
            "srv.1public.t_u0024x.Key",
            "srv_1public_t_x_Key",
            "srv_u002e1public_u002et_u0024x_u002eKey",
        ),
        ("9lives", "_9lives", "_u0039lives", "_9lives", "_u0039lives"),
        ("a.b-c.d", "a.b_c.d", "a.b_u002dc.d", "a_b_c_d", "a_u002eb_u002dc_u002ed"),
        ("x.é.y", "x._.y", "x._u00e9.y", "x___y", "x_u002e_u00e9_u002ey"),
        ("ok_name", "ok_name", "ok_u005fname", "ok_name", "ok_u005fname"),
        ("col.with.dots", "col.with.dots", "col.with.dots", "col_with_dots", "col_u002ewith_u002edots"),
        ("1st col", "_1st_col", "_u0031st_u0020col", "_1st_col", "_u0031st_u0020col"),
        ("naïve", "na_ve", "na_u00efve", "na_ve", "na_u00efve"),
        ("-", "_", "_u002d", "_", "_u002d"),
        ("_a", "_a", "_u005fa", "_a", "_u005fa"),
    ];

    #[test]
    fn adjusts_names_as_debezium_does() {
        for (name, avro, unicode, avro_field, unicode_field) in RECORDED {
            assert_eq!(NameAdjust::None.adjust(name, false), *name);
            assert_eq!(NameAdjust::Avro.adjust(name, false), *avro, "{name}");
            assert_eq!(NameAdjust::AvroUnicode.adjust(name, false), *unicode, "{name}");
            assert_eq!(NameAdjust::Avro.adjust(name, true), *avro_field, "{name}");
            assert_eq!(NameAdjust::AvroUnicode.adjust(name, true), *unicode_field, "{name}");
        }
        assert_eq!(NameAdjust::parse("AVRO_unicode"), Some(NameAdjust::AvroUnicode));
    }

    /// What Debezium 3.6.3's Postgres connector named with `topic.prefix=srv`,
    /// `topic.delimiter=_` and each built-in strategy (the message topic keeps its `.`).
    #[test]
    fn names_topics_as_debeziums_strategies_do() {
        let schema = TopicNaming { without_schema: false, delimiter: "_".into() };
        let default = TopicNaming { without_schema: true, delimiter: "_".into() };
        assert_eq!(schema.data_topic("srv", "public", "items"), "srv_public_items");
        assert_eq!(default.data_topic("srv", "public", "items"), "srv_items");
        assert_eq!(schema.heartbeat_topic("__debezium-heartbeat", "srv"), "__debezium-heartbeat_srv");
        assert_eq!(default.transaction_topic("srv", "transaction"), "srv_transaction");
        assert_eq!(TopicNaming::DEFAULT.data_topic("srv", "public", "items"), "srv.public.items");
        assert_eq!(NameAdjust::parse("avro2"), None);
    }
}
