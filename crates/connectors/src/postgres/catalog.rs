//! The ordinary (non-replication) session: catalog queries, slot and publication
//! management, and the column metadata that shapes each table's schemas.

use std::collections::HashMap;
use std::time::Duration;

use pgwire_replication::Lsn;
use sluice_api::{ConnectError, ConnectResult};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use super::column::SourceColumn;
use super::config::{self, AutocreateMode, PostgresConfig, TableFilter};
use super::envelope::ColumnSpec;
use super::mapping::{self, PgType};

/// A table the connector captures.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId {
    pub schema: String,
    pub table: String,
}

impl TableId {
    /// The quoted SQL name.
    pub fn quoted(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.table))
    }
}

impl std::fmt::Display for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.schema, self.table)
    }
}

pub fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

pub fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// What the catalog says about one column.
#[derive(Debug, Clone)]
pub struct ColumnMeta {
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
    pub not_null: bool,
    /// Position in the primary key, when part of it.
    pub pk_position: Option<usize>,
    /// The text form of the column's `DEFAULT` when it is a constant (see [`default_literal`]).
    pub default: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SlotInfo {
    pub plugin: String,
    pub database: String,
    pub confirmed_flush: Option<Lsn>,
    pub active: bool,
}

/// How long opening a session (TCP, TLS, authentication together) or a statement with a
/// quick answer may take: a server behind a network that drops packets answers nothing, and
/// the attempt must end to be retried.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// `work` within [`ANSWER_TIMEOUT`], or a retriable error naming the server and `what` was
/// being done.
pub async fn bounded<T>(cfg: &PostgresConfig, what: &str, work: impl std::future::Future<Output = T>) -> ConnectResult<T> {
    tokio::time::timeout(ANSWER_TIMEOUT, work).await.map_err(|_| {
        ConnectError::retriable(format!(
            "no answer from Postgres at {}:{} within {} s while {what}; retrying",
            cfg.hostname,
            cfg.port,
            ANSWER_TIMEOUT.as_secs()
        ))
    })
}

/// Opens an ordinary session; errors name the configuration key at fault where they can.
pub async fn connect(cfg: &PostgresConfig) -> Result<Client, (String, ConnectError)> {
    let tls = cfg.tls.connector().map_err(|e| {
        let key = cfg.tls.key_in(&e);
        (key.to_owned(), ConnectError::config(key, e))
    })?;
    match bounded(cfg, "opening a session", cfg.pg_config().connect(tls)).await.map_err(|e| (config::HOSTNAME.to_owned(), e))? {
        Ok((client, connection)) => {
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "postgres session ended");
                }
            });
            Ok(client)
        }
        Err(e) => Err(classify_connect_error(cfg, e)),
    }
}

/// The configuration key a connection error points at, and the error.
pub fn classify_connect_error(cfg: &PostgresConfig, e: tokio_postgres::Error) -> (String, ConnectError) {
    if let Some(refused) = crate::pg_tls::find_refusal(&e) {
        return (refused.key.to_owned(), ConnectError::permanent_from(refused.message.clone(), e));
    }
    let code = e.code().cloned();
    let (key, message, retriable) = match code.clone() {
        Some(c) if c == SqlState::INVALID_PASSWORD => (
            config::PASSWORD,
            format!("password authentication failed for user {:?}; check database.user and database.password", cfg.user),
            false,
        ),
        Some(c) if c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION && db_message(&e).contains("certificate") => {
            let what = match &cfg.tls.client {
                Some(c) => format!("check {} {} (for cert authentication its CN must be the user name)", config::SSLCERT, c.cert.display()),
                None => format!("set {} and {}", config::SSLCERT, config::SSLKEY),
            };
            (
                config::SSLCERT,
                format!("the server wants a valid client certificate for user {:?}: {}; {what}", cfg.user, db_message(&e)),
                false,
            )
        }
        Some(c) if c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            (config::USER, format!("user {:?} may not connect to database {:?}: {}", cfg.user, cfg.dbname, db_message(&e)), false)
        }
        Some(c) if c == SqlState::INVALID_CATALOG_NAME => {
            (config::DBNAME, format!("database {:?} does not exist on {}:{}", cfg.dbname, cfg.hostname, cfg.port), false)
        }
        Some(c) if c == SqlState::CANNOT_CONNECT_NOW || c == SqlState::ADMIN_SHUTDOWN || c == SqlState::TOO_MANY_CONNECTIONS => (
            config::HOSTNAME,
            format!("postgres at {}:{} is not accepting connections yet: {}", cfg.hostname, cfg.port, db_message(&e)),
            true,
        ),
        Some(_) => (config::HOSTNAME, format!("could not connect to {}:{}: {}", cfg.hostname, cfg.port, db_message(&e)), false),
        None => (config::HOSTNAME, format!("could not connect to {}:{} (is the server running?)", cfg.hostname, cfg.port), true),
    };
    let refused = code.as_ref().is_some_and(|c| {
        *c == SqlState::INVALID_PASSWORD || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION || *c == SqlState::INVALID_CATALOG_NAME
    });
    let err = if retriable {
        ConnectError::retriable_from(message, e)
    } else if refused {
        ConnectError::permanent_from(message, e)
    } else {
        ConnectError::fatal_from(message, e)
    };
    (key.to_owned(), err)
}

fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_else(|| e.to_string())
}

/// Wraps a query error: lost connections are retriable, the rest fatal.
pub fn query_error(what: &str, e: tokio_postgres::Error) -> ConnectError {
    // The server ending the session (shutdown, restart, an administrator's
    // pg_terminate_backend: SQLSTATE 57P0x) or a connection failure (class 08) is transient.
    let ended = e.code().is_some_and(|c| c.code().starts_with("57P") || c.code().starts_with("08"));
    if e.is_closed() || e.as_db_error().is_none() {
        ConnectError::retriable_from(format!("{what}: connection to postgres lost"), e)
    } else if ended {
        ConnectError::retriable_from(format!("{what}: the server ended the session: {}", db_message(&e)), e)
    } else {
        let msg = format!("{what}: {}", db_message(&e));
        ConnectError::fatal_from(msg, e)
    }
}

pub async fn slot(client: &Client, name: &str) -> ConnectResult<Option<SlotInfo>> {
    let rows = client
        .query(
            "SELECT plugin::text, database::text, confirmed_flush_lsn::text, active FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .map_err(|e| query_error("reading pg_replication_slots", e))?;
    Ok(rows.first().map(|r| SlotInfo {
        plugin: r.get::<_, Option<String>>(0).unwrap_or_default(),
        database: r.get::<_, Option<String>>(1).unwrap_or_default(),
        confirmed_flush: r.get::<_, Option<String>>(2).and_then(|s| Lsn::parse(&s).ok()),
        active: r.get(3),
    }))
}

pub async fn drop_slot(client: &Client, name: &str) -> ConnectResult<()> {
    client
        .execute("SELECT pg_drop_replication_slot($1) WHERE EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)", &[&name])
        .await
        .map_err(|e| query_error(&format!("dropping replication slot {name}"), e))?;
    Ok(())
}

/// Drops the slot (when it exists) once its walsender has let it go, which happens shortly
/// after the replication session ends; waits up to 5 s for that.
pub async fn drop_slot_when_released(client: &Client, name: &str) -> ConnectResult<()> {
    for _ in 0..50 {
        match slot(client, name).await? {
            Some(s) if s.active => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            _ => break,
        }
    }
    drop_slot(client, name).await
}

/// Ordinary and partitioned tables the filter includes, sorted by name.
pub async fn tables(client: &Client, filter: &TableFilter) -> ConnectResult<Vec<TableId>> {
    let rows = client
        .query(
            "SELECT n.nspname::text, c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1, 2",
            &[],
        )
        .await
        .map_err(|e| query_error("listing tables", e))?;
    Ok(rows.iter().map(|r| TableId { schema: r.get(0), table: r.get(1) }).filter(|t| filter.includes(&t.schema, &t.table)).collect())
}

/// The partitions of the included partitioned tables that the filter leaves out, as
/// `(root, partition)`. Without `publish.via.partition.root` their changes arrive under the
/// partitions' names, so these are not captured after the snapshot.
pub async fn partitions_left_out(client: &Client, included: &[TableId], filter: &TableFilter) -> ConnectResult<Vec<(TableId, TableId)>> {
    let rows = client
        .query(
            "SELECT rn.nspname::text, r.relname::text, pn.nspname::text, p.relname::text \
             FROM pg_inherits i JOIN pg_class r ON r.oid = i.inhparent JOIN pg_namespace rn ON rn.oid = r.relnamespace \
             JOIN pg_class p ON p.oid = i.inhrelid JOIN pg_namespace pn ON pn.oid = p.relnamespace \
             WHERE r.relkind = 'p' ORDER BY 1, 2, 3, 4",
            &[],
        )
        .await
        .map_err(|e| query_error("listing partitions", e))?;
    Ok(rows
        .iter()
        .map(|r| (TableId { schema: r.get(0), table: r.get(1) }, TableId { schema: r.get(2), table: r.get(3) }))
        .filter(|(root, part)| included.contains(root) && !filter.includes(&part.schema, &part.table))
        .collect())
}

/// Creates or updates the publication as `publication.autocreate.mode` says.
pub async fn ensure_publication(client: &Client, cfg: &PostgresConfig, included: &[TableId]) -> ConnectResult<()> {
    let name = &cfg.publication_name;
    let exists = !client
        .query("SELECT 1 FROM pg_publication WHERE pubname = $1", &[name])
        .await
        .map_err(|e| query_error("reading pg_publication", e))?
        .is_empty();
    let tables = || included.iter().map(TableId::quoted).collect::<Vec<_>>().join(", ");
    let with_root = if cfg.publish_via_partition_root { " WITH (publish_via_partition_root = true)" } else { "" };
    let sql = match (cfg.autocreate, exists) {
        (AutocreateMode::Disabled, false) => {
            return Err(ConnectError::fatal(format!(
                "publication {name:?} does not exist and publication.autocreate.mode is disabled; create it (CREATE PUBLICATION {} FOR ...) or change the mode",
                quote_ident(name)
            )))
        }
        (AutocreateMode::Disabled, true) | (AutocreateMode::AllTables, true) => return Ok(()),
        (AutocreateMode::AllTables, false) => format!("CREATE PUBLICATION {} FOR ALL TABLES{}", quote_ident(name), with_root),
        (AutocreateMode::Filtered, _) if included.is_empty() => {
            return Err(ConnectError::config(config::TABLE_INCLUDE_LIST, "publication.autocreate.mode=filtered but no table matches the include/exclude lists"))
        }
        (AutocreateMode::Filtered, false) => format!("CREATE PUBLICATION {} FOR TABLE {}{}", quote_ident(name), tables(), with_root),
        // A publication the connector manages follows its configuration, this key included.
        (AutocreateMode::Filtered, true) => format!(
            "ALTER PUBLICATION {0} SET TABLE {1}; ALTER PUBLICATION {0} SET (publish_via_partition_root = {2})",
            quote_ident(name),
            tables(),
            cfg.publish_via_partition_root
        ),
    };
    tracing::info!(publication = %name, %sql, "setting up publication");
    client.batch_execute(&sql).await.map_err(|e| query_error(&format!("creating publication {name}"), e))
}

/// Creates a logical slot with pgoutput without exporting a snapshot; returns its
/// consistent point.
pub async fn create_slot(client: &Client, name: &str) -> ConnectResult<Lsn> {
    let row = client
        .query_one("SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')", &[&name])
        .await
        .map_err(|e| query_error(&format!("creating replication slot {name}"), e))?;
    let lsn: String = row.get(0);
    Lsn::parse(&lsn).map_err(|e| ConnectError::fatal_from(format!("slot {name} returned a bad lsn {lsn}"), e))
}

/// The columns of a table, in attribute order.
pub async fn columns(client: &Client, table: &TableId) -> ConnectResult<Vec<ColumnMeta>> {
    let rows = client
        .query(
            "SELECT a.attname::text, a.atttypid, a.atttypmod, a.attnotnull, \
                    array_position(i.indkey::int2[], a.attnum), pg_get_expr(d.adbin, d.adrelid) \
             FROM pg_attribute a \
             JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary \
             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.attgenerated = '' \
             WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[&table.schema, &table.table],
        )
        .await
        .map_err(|e| query_error(&format!("reading the columns of {table}"), e))?;
    Ok(rows
        .iter()
        .map(|r| ColumnMeta {
            name: r.get(0),
            type_oid: r.get(1),
            type_modifier: r.get(2),
            not_null: r.get(3),
            pk_position: r.get::<_, Option<i32>>(4).map(|p| p as usize),
            default: r.get::<_, Option<String>>(5).as_deref().and_then(default_literal),
        })
        .collect())
}

/// The constant of a column `DEFAULT` as `pg_get_expr` writes it, in the text form the
/// replication stream uses for that type: `42`, `(-1)`, `'dflt'::text`, `'2020-01-01'::date`,
/// `true`. Anything else (a function such as `now()` or `nextval(…)`, an expression, `NULL`)
/// has no constant, and the column's schema gets no default, as in Debezium.
pub fn default_literal(expr: &str) -> Option<String> {
    let mut e = expr.trim();
    while let Some(inner) = e.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
        e = inner.trim();
    }
    if let Some(rest) = e.strip_prefix('\'') {
        // A quoted literal ('' is a quote), then nothing or a cast.
        let mut text = String::new();
        let mut chars = rest.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if matches!(chars.peek(), Some((_, '\''))) {
                    chars.next();
                    text.push('\'');
                    continue;
                }
                let after = rest[i + 1..].trim();
                let cast = after
                    .strip_prefix("::")
                    .is_some_and(|t| !t.is_empty() && t.chars().all(|c| c.is_alphanumeric() || " _.[]\"".contains(c)));
                return (after.is_empty() || cast).then_some(text);
            }
            text.push(c);
        }
        return None;
    }
    let number = e.strip_prefix('-').unwrap_or(e);
    if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.') && number.chars().filter(|c| *c == '.').count() <= 1 {
        return Some(e.to_owned());
    }
    match e {
        "true" => Some("t".to_owned()),
        "false" => Some("f".to_owned()),
        _ => None,
    }
}

/// Resolves column types, asking the catalog about enums, domains and their arrays.
#[derive(Default)]
pub struct TypeResolver {
    cache: HashMap<u32, Option<PgType>>,
}

impl TypeResolver {
    /// The specs of a table's catalog columns, each type resolved.
    pub async fn specs(&mut self, client: &Client, cols: &[ColumnMeta]) -> ConnectResult<Vec<ColumnSpec>> {
        let mut specs = Vec::with_capacity(cols.len());
        for c in cols {
            let ty = self.resolve(client, c.type_oid, c.type_modifier).await?;
            specs.push(ColumnSpec {
                name: c.name.clone(),
                source: SourceColumn::of(c.type_oid, c.type_modifier),
                ty,
                not_null: c.not_null,
                pk_position: c.pk_position,
                default: c.default.clone(),
            });
        }
        Ok(specs)
    }

    pub async fn resolve(&mut self, client: &Client, oid: u32, typmod: i32) -> ConnectResult<Option<PgType>> {
        if let Some(t) = mapping::builtin(oid, typmod) {
            return Ok(Some(t));
        }
        if let Some(t) = self.cache.get(&oid) {
            return Ok(t.clone());
        }
        let row = client
            .query_opt(
                "SELECT t.typtype::text, t.typelem, t.typbasetype, t.typtypmod, \
                        (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), \
                        (SELECT et.typtype::text FROM pg_type et WHERE et.oid = t.typelem), \
                        (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.typelem), \
                        t.typname::text, \
                        (SELECT et.typname::text FROM pg_type et WHERE et.oid = t.typelem) \
                 FROM pg_type t WHERE t.oid = $1",
                &[&oid],
            )
            .await
            .map_err(|e| query_error("reading pg_type", e))?;
        let ty = match row {
            None => None,
            Some(r) => {
                let typtype: String = r.get(0);
                let elem: u32 = r.get(1);
                let base: u32 = r.get(2);
                let base_mod: i32 = r.get(3);
                match typtype.as_str() {
                    "e" => r.get::<_, Option<String>>(4).map(|labels| PgType::Enum { labels }),
                    "d" => mapping::builtin(base, base_mod),
                    // An extension's type: its oid differs per database.
                    "b" if elem == 0 => extension_type(&r.get::<_, String>(7)),
                    "b" if elem != 0 => match (r.get::<_, Option<String>>(5).as_deref(), r.get::<_, Option<String>>(6)) {
                        (Some("e"), Some(labels)) => Some(PgType::Array(Box::new(PgType::Enum { labels }))),
                        _ => match r.get::<_, Option<String>>(8).as_deref() {
                            Some("ltree") => Some(PgType::Array(Box::new(PgType::Ltree))),
                            Some("citext") => Some(PgType::Array(Box::new(PgType::Text))),
                            _ => None,
                        },
                    },
                    _ => None,
                }
            }
        };
        self.cache.insert(oid, ty.clone());
        Ok(ty)
    }
}

/// The extension types Debezium maps, by type name.
fn extension_type(name: &str) -> Option<PgType> {
    match name {
        "hstore" => Some(PgType::Hstore),
        "ltree" => Some(PgType::Ltree),
        "citext" => Some(PgType::Text),
        _ => None,
    }
}

/// Checks that each entry of `table.include.list` matches at least one table; returns
/// the entries that match none.
pub async fn missing_included_tables(client: &Client, filter: &TableFilter) -> ConnectResult<Vec<String>> {
    let all = tables(client, &TableFilter::new(&[], &[], &[], &[])?).await?;
    let mut missing = Vec::new();
    for pattern in &filter.table_include_raw {
        let single = TableFilter::new(&[], &[], std::slice::from_ref(pattern), &[])?;
        if !all.iter().any(|t| single.includes(&t.schema, &t.table)) {
            missing.push(pattern.clone());
        }
    }
    Ok(missing)
}

/// `SET TRANSACTION SNAPSHOT` statement for an exported snapshot name.
pub fn set_snapshot_sql(name: &str) -> String {
    format!("SET TRANSACTION SNAPSHOT {}", quote_literal(name))
}

#[cfg(test)]
mod default_tests {
    use super::default_literal;

    #[test]
    fn constant_defaults_are_read_and_others_are_not() {
        for (expr, want) in [
            ("42", Some("42")),
            ("(-1)", Some("-1")),
            ("'-1.5'::numeric", Some("-1.5")),
            ("0.25", Some("0.25")),
            ("'dflt'::text", Some("dflt")),
            ("'it''s'::character varying", Some("it's")),
            ("''::text", Some("")),
            ("'2020-01-01'::date", Some("2020-01-01")),
            ("'{}'::integer[]", Some("{}")),
            ("true", Some("t")),
            ("false", Some("f")),
            ("nextval('t_id_seq'::regclass)", None),
            ("now()", None),
            ("CURRENT_TIMESTAMP", None),
            ("NULL::text", None),
            ("('a'::text || 'b'::text)", None),
            ("'x'::text || 'y'", None),
            ("1 + 2", None),
        ] {
            assert_eq!(default_literal(expr).as_deref(), want, "{expr}");
        }
    }
}
