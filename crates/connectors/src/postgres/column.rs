//! Per-column rules of Debezium's relational connectors, matched against a column's
//! fully-qualified name `schema.table.column` (regular expressions, whole name,
//! case-insensitive):
//!
//! - `message.key.columns`: the columns of each table's message key, instead of its
//!   primary key.
//! - Column mappers, applied to the `before` and `after` images of snapshot and streamed
//!   events (never to the message key, as in Debezium), the first matching rule winning in
//!   Debezium's order: `column.truncate.to.<N>.chars`, `column.mask.with.<N>.chars`,
//!   `column.mask.hash.<algorithm>.with.salt.<salt>`, `column.mask.hash.v2.<algorithm>.with.salt.<salt>`.
//!   Each one's value is a comma-separated list of column regular expressions.
//! - `column.include.list` / `column.exclude.list`: the columns `before` and `after` hold
//!   (the message key keeps its columns either way, as in Debezium).

use md5::Md5;
use regex::{Regex, RegexBuilder};
use sha1::Sha1;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512, Sha512_224, Sha512_256};
use sluice_api::{ConnectError, ConnectResult, Props, Schema, Value};

use super::catalog::TableId;

pub const MESSAGE_KEY_COLUMNS: &str = "message.key.columns";

/// A regular expression matched against a whole name, case-insensitively (Debezium's
/// `Predicates.includes`).
pub fn whole_name_regex(key: &str, pattern: &str) -> ConnectResult<Regex> {
    RegexBuilder::new(&format!("^(?:{pattern})$"))
        .case_insensitive(true)
        .build()
        .map_err(|e| ConnectError::config(key, format!("{pattern:?} is not a valid regular expression: {e}")))
}

/// Every per-column rule of a connector.
#[derive(Debug, Clone, Default)]
pub struct ColumnRules {
    pub key_columns: KeyColumns,
    /// In Debezium's order of precedence (see the module docs).
    pub mappers: Vec<MapperRule>,
    /// `column.include.list` (empty: every column) and `column.exclude.list`.
    pub include: Vec<Regex>,
    pub exclude: Vec<Regex>,
}

pub const COLUMN_INCLUDE_LIST: &str = "column.include.list";
pub const COLUMN_EXCLUDE_LIST: &str = "column.exclude.list";

pub const TRUNCATE_PREFIX: &str = "column.truncate.to.";
pub const MASK_PREFIX: &str = "column.mask.";

/// One `column.truncate.…`/`column.mask.…` key: which columns, and what happens to them.
#[derive(Debug, Clone)]
pub struct MapperRule {
    columns: Vec<Regex>,
    pub mapper: Mapper,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapper {
    /// Strings longer than this many characters (UTF-16 units, as Java counts) and byte
    /// arrays longer than this many bytes are cut.
    Truncate(usize),
    /// Character columns' values (null included, as in Debezium) become this string.
    Mask(String),
    /// Character columns' non-null values become the lowercase hex digest of the salt
    /// followed by the value: Java-serialized (`v2: false`, Debezium's default) or as its
    /// UTF-8 bytes (`v2: true`); cut to the column's declared length when it has one.
    Hash { algorithm: HashAlgorithm, salt: Vec<u8>, v2: bool },
}

/// The Java `MessageDigest` algorithms this version provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlgorithm {
    Md5,
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
    Sha512_224,
    Sha512_256,
}

impl HashAlgorithm {
    fn parse(name: &str) -> Option<Self> {
        Some(match name.to_ascii_uppercase().as_str() {
            "MD5" => Self::Md5,
            "SHA-1" | "SHA1" | "SHA" => Self::Sha1,
            "SHA-224" => Self::Sha224,
            "SHA-256" => Self::Sha256,
            "SHA-384" => Self::Sha384,
            "SHA-512" => Self::Sha512,
            "SHA-512/224" => Self::Sha512_224,
            "SHA-512/256" => Self::Sha512_256,
            _ => return None,
        })
    }

    fn digest(self, salt: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<D: Digest>(salt: &[u8], data: &[u8]) -> Vec<u8> {
            let mut d = D::new();
            d.update(salt);
            d.update(data);
            d.finalize().to_vec()
        }
        match self {
            Self::Md5 => run::<Md5>(salt, data),
            Self::Sha1 => run::<Sha1>(salt, data),
            Self::Sha224 => run::<Sha224>(salt, data),
            Self::Sha256 => run::<Sha256>(salt, data),
            Self::Sha384 => run::<Sha384>(salt, data),
            Self::Sha512 => run::<Sha512>(salt, data),
            Self::Sha512_224 => run::<Sha512_224>(salt, data),
            Self::Sha512_256 => run::<Sha512_256>(salt, data),
        }
    }
}

/// What a column mapper needs to know about the column it is applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceColumn {
    /// text, varchar, char (bpchar) or name: the types Debezium masks.
    pub character: bool,
    /// The declared length of a `varchar(n)`/`char(n)`.
    pub length: Option<usize>,
}

impl SourceColumn {
    pub fn of(type_oid: u32, type_modifier: i32) -> Self {
        let character = matches!(type_oid, 19 | 25 | 1042 | 1043);
        let length = (matches!(type_oid, 1042 | 1043) && type_modifier >= 4).then(|| (type_modifier - 4) as usize);
        Self { character, length }
    }
}

/// A mapper resolved for one column.
#[derive(Debug, Clone)]
pub struct ColumnMapper {
    mapper: Mapper,
    column: SourceColumn,
}

impl ColumnMapper {
    /// The value field's schema with Debezium's parameters: `masked=true` for a masking
    /// rule; `truncateLength=<N>` where truncation is possible (no declared length, or a
    /// longer one).
    pub fn alter_schema(&self, schema: Schema) -> Schema {
        match &self.mapper {
            Mapper::Mask(_) | Mapper::Hash { .. } => schema.with_parameter("masked", "true"),
            Mapper::Truncate(n) if self.column.length.is_none_or(|l| l > *n) => schema.with_parameter("truncateLength", n.to_string()),
            Mapper::Truncate(_) => schema,
        }
    }

    pub fn apply(&self, value: Value) -> Value {
        match (&self.mapper, value) {
            (Mapper::Truncate(n), Value::String(s)) => Value::String(truncate_utf16(s, *n)),
            (Mapper::Truncate(n), Value::Bytes(mut b)) => {
                b.truncate(*n);
                Value::Bytes(b)
            }
            (Mapper::Mask(mask), _) if self.column.character => Value::String(mask.clone()),
            (Mapper::Hash { algorithm, salt, v2 }, Value::String(s)) if self.column.character => {
                let data = if *v2 { s.into_bytes() } else { super::java_keys::serialized_string(&s) };
                let hex = super::mapping::hex_string(&algorithm.digest(salt, &data));
                Value::String(match self.column.length {
                    Some(l) if l > 0 => truncate_utf16(hex, l),
                    _ => hex,
                })
            }
            (_, value) => value,
        }
    }
}

/// The first `max` UTF-16 units of `s` (Java's `substring(0, max)`), never splitting a
/// surrogate pair.
fn truncate_utf16(s: String, max: usize) -> String {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > max {
            return s[..i].to_owned();
        }
    }
    s
}

impl ColumnRules {
    /// The column filter of `column.include.list`/`column.exclude.list` (at most one set).
    pub fn column_filter(include: &[String], exclude: &[String]) -> ConnectResult<(Vec<Regex>, Vec<Regex>)> {
        if !include.is_empty() && !exclude.is_empty() {
            return Err(ConnectError::config(COLUMN_EXCLUDE_LIST, "column.include.list and column.exclude.list cannot both be set"));
        }
        let compile = |key, list: &[String]| list.iter().map(|p| whole_name_regex(key, p)).collect::<ConnectResult<Vec<_>>>();
        Ok((compile(COLUMN_INCLUDE_LIST, include)?, compile(COLUMN_EXCLUDE_LIST, exclude)?))
    }

    /// Whether `before`/`after` hold this column.
    pub fn includes(&self, table: &TableId, column: &str) -> bool {
        if self.include.is_empty() && self.exclude.is_empty() {
            return true;
        }
        let full = format!("{}.{}.{column}", table.schema, table.table);
        (self.include.is_empty() || self.include.iter().any(|r| r.is_match(&full))) && !self.exclude.iter().any(|r| r.is_match(&full))
    }

    /// Reads the mapper keys of `props` (every other key is left alone).
    pub fn mappers_from(props: &Props) -> ConnectResult<Vec<MapperRule>> {
        let mut keys: Vec<(&String, &String)> =
            props.iter().filter(|(k, _)| k.starts_with(TRUNCATE_PREFIX) || k.starts_with(MASK_PREFIX)).collect();
        keys.sort();
        let mut ranked: Vec<(u8, MapperRule)> = Vec::new();
        for (key, value) in keys {
            let count = |rest: &str| rest.strip_suffix(".chars").and_then(|n| n.parse::<usize>().ok());
            let (rank, mapper) = if let Some(rest) = key.strip_prefix(TRUNCATE_PREFIX) {
                (0, Mapper::Truncate(count(rest).ok_or_else(|| malformed(key))?))
            } else if let Some(rest) = key.strip_prefix("column.mask.with.") {
                (1, Mapper::Mask("*".repeat(count(rest).ok_or_else(|| malformed(key))?)))
            } else if let Some(rest) = key.strip_prefix("column.mask.hash.v2.") {
                (3, hash(key, rest, true)?)
            } else if let Some(rest) = key.strip_prefix("column.mask.hash.") {
                (2, hash(key, rest, false)?)
            } else {
                return Err(malformed(key));
            };
            let columns = value
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| whole_name_regex(key, c))
                .collect::<ConnectResult<_>>()?;
            ranked.push((rank, MapperRule { columns, mapper }));
        }
        ranked.sort_by_key(|(rank, _)| *rank);
        Ok(ranked.into_iter().map(|(_, r)| r).collect())
    }

    /// The mapper of a column: the first rule matching `schema.table.column`.
    pub fn mapper_for(&self, table: &TableId, column: &str, source: SourceColumn) -> Option<ColumnMapper> {
        let full = format!("{}.{}.{column}", table.schema, table.table);
        let rule = self.mappers.iter().find(|r| r.columns.iter().any(|c| c.is_match(&full)))?;
        Some(ColumnMapper { mapper: rule.mapper.clone(), column: source })
    }
}

fn malformed(key: &str) -> ConnectError {
    ConnectError::config(
        key,
        format!(
            "{key} is not a column mapper this connector knows: use column.truncate.to.<N>.chars, column.mask.with.<N>.chars, \
             column.mask.hash.<algorithm>.with.salt.<salt> or column.mask.hash.v2.<algorithm>.with.salt.<salt>"
        ),
    )
}

/// `<algorithm>.with.salt.<salt>`.
fn hash(key: &str, rest: &str, v2: bool) -> ConnectResult<Mapper> {
    let (name, salt) =
        rest.split_once(".with.salt.").filter(|(a, s)| !a.is_empty() && !a.contains('.') && !s.is_empty()).ok_or_else(|| malformed(key))?;
    let algorithm = HashAlgorithm::parse(name).ok_or_else(|| {
        ConnectError::config(
            key,
            format!(
                "hash algorithm {name:?} is not supported; use MD5, SHA-1, SHA-224, SHA-256, SHA-384, SHA-512, SHA-512/224 or SHA-512/256"
            ),
        )
    })?;
    Ok(Mapper::Hash { algorithm, salt: salt.as_bytes().to_vec(), v2 })
}

/// `message.key.columns`: `<table regex>:<column>,<column>;<table regex>:<column>…`.
/// Each `<table regex>.<column>` is one rule over `schema.table.column`, as Debezium joins
/// them (so a column name is a regular expression too).
#[derive(Debug, Clone, Default)]
pub struct KeyColumns {
    rules: Vec<Regex>,
}

impl KeyColumns {
    pub fn parse(text: &str) -> ConnectResult<Self> {
        let mut rules = Vec::new();
        for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = || {
                ConnectError::config(
                    MESSAGE_KEY_COLUMNS,
                    format!(
                        "{entry:?} is not of the form <fully-qualified table regex>:<column>[,<column>…] (entries are separated by ';')"
                    ),
                )
            };
            let (table, columns) = entry.split_once(':').ok_or_else(bad)?;
            let table = table.trim();
            let columns: Vec<&str> = columns.split(',').map(str::trim).collect();
            if table.is_empty() || columns.iter().any(|c| c.is_empty() || c.contains(':')) {
                return Err(bad());
            }
            for column in columns {
                rules.push(whole_name_regex(MESSAGE_KEY_COLUMNS, &format!("{table}.{column}"))?);
            }
        }
        Ok(Self { rules })
    }

    /// The positions in `columns` of the table's message key columns: for each rule in
    /// configuration order, the columns it matches in table order (each column once).
    /// `None` when no rule matches a column of the table: its primary key is the key.
    pub fn for_table<'a>(&self, table: &TableId, columns: impl Iterator<Item = Option<&'a str>> + Clone) -> Option<Vec<usize>> {
        let mut out: Vec<usize> = Vec::new();
        for rule in &self.rules {
            for (i, name) in columns.clone().enumerate() {
                let Some(name) = name else { continue };
                if !out.contains(&i) && rule.is_match(&format!("{}.{}.{name}", table.schema, table.table)) {
                    out.push(i);
                }
            }
        }
        (!out.is_empty()).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(schema: &str, table: &str) -> TableId {
        TableId { schema: schema.into(), table: table.into() }
    }

    #[test]
    fn key_columns_follow_rule_order_then_table_order() {
        let k = KeyColumns::parse(" public.orders:customer , region ; (.*).items:sku.*").unwrap();
        let cols = [Some("id"), Some("region"), Some("customer"), None, Some("sku_a"), Some("sku_b")];
        assert_eq!(k.for_table(&id("public", "orders"), cols.iter().copied()), Some(vec![2, 1]));
        assert_eq!(k.for_table(&id("shop", "items"), cols.iter().copied()), Some(vec![4, 5]));
        // Case-insensitive, whole name: "public.orders2" is not "public.orders".
        assert_eq!(k.for_table(&id("PUBLIC", "Orders"), cols.iter().copied()), Some(vec![2, 1]));
        assert_eq!(k.for_table(&id("public", "orders2"), cols.iter().copied()), None);
        // A rule naming a column the table lacks leaves the primary key in place.
        assert_eq!(KeyColumns::parse("public.orders:nope").unwrap().for_table(&id("public", "orders"), cols.iter().copied()), None);
    }

    #[test]
    fn malformed_entries_name_the_key() {
        for bad in ["public.orders", "public.orders:", ":a", "public.orders:a,,b", "public.orders:a:b", "public.(orders:a"] {
            let err = KeyColumns::parse(bad).unwrap_err().to_string();
            assert!(err.contains(MESSAGE_KEY_COLUMNS), "{bad}: {err}");
        }
        assert!(KeyColumns::parse("").unwrap().rules.is_empty());
        assert!(KeyColumns::parse("a.b:c;").unwrap().rules.len() == 1);
    }

    fn rules(pairs: &[(&str, &str)]) -> ColumnRules {
        let props: Props = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        ColumnRules { mappers: ColumnRules::mappers_from(&props).unwrap(), ..ColumnRules::default() }
    }

    const TEXT: SourceColumn = SourceColumn { character: true, length: None };

    #[test]
    fn hashes_match_debeziums() {
        // The expected digests are those of Debezium's MaskStringsTest.
        let hash = |algorithm, v2, s: &str| {
            let m = ColumnMapper { mapper: Mapper::Hash { algorithm, salt: b"salt".to_vec(), v2 }, column: TEXT };
            m.apply(Value::String(s.into()))
        };
        assert_eq!(
            hash(HashAlgorithm::Sha256, false, "hello"),
            Value::String("af5843a0f0e728ab0332c8888b6e1190bfb79e584f0d40538de8f10df6ef29c6".into())
        );
        assert_eq!(
            hash(HashAlgorithm::Sha256, false, "world"),
            Value::String("4588e1f2dcdc7fefc1515d3acd5acb9033478eace68286f383c337b9ff4464a3".into())
        );
        assert_eq!(hash(HashAlgorithm::Md5, false, "hello"), Value::String("46f48a7a5ea32efba87cbff49d46d35a".into()));
        assert_eq!(
            hash(HashAlgorithm::Sha256, true, "hello"),
            Value::String("cd31b3b98ece60cb739c0bf770b2de892ae0ad133f645513c3d83f08757a843a".into())
        );
        assert_eq!(hash(HashAlgorithm::Md5, true, "world"), Value::String("172c8e95398cc72ab5358ead6981e7e5".into()));
        // A varchar(10) gets the first 10 hex digits; null stays null.
        let m = ColumnMapper {
            mapper: Mapper::Hash { algorithm: HashAlgorithm::Md5, salt: b"salt".to_vec(), v2: true },
            column: SourceColumn::of(1043, 14),
        };
        assert_eq!(m.apply(Value::String("world".into())), Value::String("172c8e9539".into()));
        assert_eq!(m.apply(Value::Null), Value::Null);
        assert_eq!(
            crate::postgres::java_keys::serialized_string("a\u{0}é\u{1F600}")[4..],
            [0x74, 0, 11, b'a', 0xc0, 0x80, 0xc3, 0xa9, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]
        );
    }

    #[test]
    fn mappers_apply_in_debeziums_order_with_its_schema_parameters() {
        let r = rules(&[
            ("column.mask.hash.SHA-256.with.salt.pepper", "public.t.h"),
            ("column.mask.with.3.chars", "public.t.m, public.t.both"),
            ("column.truncate.to.2.chars", "public\\.t\\.(tr|both|b)"),
        ]);
        let t = TableId { schema: "public".into(), table: "t".into() };
        let m = |c: &str, src| r.mapper_for(&t, c, src);
        // Truncation wins over masking (Debezium reads truncation rules first).
        let both = m("both", TEXT).unwrap();
        assert_eq!(both.apply(Value::String("abcdef".into())), Value::String("ab".into()));
        assert_eq!(both.alter_schema(Schema::string()).parameter("truncateLength"), Some("2"));
        let tr = m("tr", SourceColumn::of(1043, 9)).unwrap();
        assert_eq!(tr.apply(Value::String("a😀b".into())), Value::String("a".into()), "no half surrogate pair");
        assert_eq!(tr.alter_schema(Schema::string()).parameter("truncateLength"), Some("2"));
        let short = m("tr", SourceColumn::of(1043, 5)).unwrap();
        assert_eq!(short.alter_schema(Schema::string()).parameter("truncateLength"), None, "varchar(1) cannot be cut to 2");
        assert_eq!(
            m("b", SourceColumn { character: false, length: None }).unwrap().apply(Value::Bytes(vec![1, 2, 3])),
            Value::Bytes(vec![1, 2])
        );
        let mask = m("m", TEXT).unwrap();
        assert_eq!(mask.apply(Value::String("secret".into())), Value::String("***".into()));
        assert_eq!(mask.apply(Value::Null), Value::String("***".into()), "Debezium masks nulls too");
        assert_eq!(mask.alter_schema(Schema::string().optional()).parameter("masked"), Some("true"));
        let int_mask = m("m", SourceColumn { character: false, length: None }).unwrap();
        assert_eq!(int_mask.apply(Value::Int32(5)), Value::Int32(5), "only character columns are masked");
        let h = m("h", TEXT).unwrap();
        assert!(matches!(h.apply(Value::String("x".into())), Value::String(s) if s.len() == 64));
        assert!(m("other", TEXT).is_none());
        assert!(r.mapper_for(&TableId { schema: "public".into(), table: "t2".into() }, "m", TEXT).is_none());
    }

    #[test]
    fn malformed_mapper_keys_are_named() {
        for key in [
            "column.mask.with.x.chars",
            "column.truncate.to.5",
            "column.mask.hash.SHA-256",
            "column.mask.hash.SHA-256.with.salt.",
            "column.mask.other",
        ] {
            let props: Props = [(key.to_owned(), "a.b.c".to_owned())].into_iter().collect();
            let err = ColumnRules::mappers_from(&props).unwrap_err().to_string();
            assert!(err.contains(key), "{key}: {err}");
        }
        let props: Props = [("column.mask.hash.SHA3-256.with.salt.s".to_owned(), "a.b.c".to_owned())].into_iter().collect();
        let err = ColumnRules::mappers_from(&props).unwrap_err().to_string();
        assert!(err.contains("SHA3-256") && err.contains("not supported"), "{err}");
    }

    #[test]
    fn column_filters_match_whole_qualified_names() {
        let t = TableId { schema: "public".into(), table: "users".into() };
        let (include, exclude) = ColumnRules::column_filter(&[], &["public\\.users\\.pass.*".into(), ".*\\.ssn".into()]).unwrap();
        let r = ColumnRules { include, exclude, ..ColumnRules::default() };
        assert!(r.includes(&t, "id") && r.includes(&t, "xpassword"));
        assert!(!r.includes(&t, "password") && !r.includes(&t, "SSN"));
        let (include, exclude) = ColumnRules::column_filter(&["public.users.(id|name)".into()], &[]).unwrap();
        let r = ColumnRules { include, exclude, ..ColumnRules::default() };
        assert!(r.includes(&t, "id") && r.includes(&t, "name") && !r.includes(&t, "email"));
        assert!(!r.includes(&TableId { schema: "public".into(), table: "other".into() }, "id"));
        assert!(ColumnRules::default().includes(&t, "anything"));
        let err = ColumnRules::column_filter(&["a.b.c".into()], &["a.b.d".into()]).unwrap_err().to_string();
        assert!(err.contains(COLUMN_EXCLUDE_LIST), "{err}");
    }
}
