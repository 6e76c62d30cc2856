//! Per-column rules of Debezium's relational connectors, matched against a column's
//! fully-qualified name `schema.table.column` (regular expressions, whole name,
//! case-insensitive):
//!
//! - `message.key.columns`: the columns of each table's message key, instead of its
//!   primary key.

use regex::{Regex, RegexBuilder};
use sluice_api::{ConnectError, ConnectResult};

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
}
