//! `heartbeat.action.query`: a statement run on a session of its own every
//! `heartbeat.interval.ms` while streaming, typically an insert into a heartbeat table, so
//! that a low-traffic database produces changes and its slot advances even while other
//! databases of the server fill the WAL.
//!
//! Errors: a lost session is retriable (the next heartbeat reconnects); an error the server
//! reports for the statement (missing table, no permission, …) fails the task with a trace
//! that names the key and the server's message (never the connection's credentials).
//! Debezium logs such errors and carries on; a heartbeat that never runs lets the WAL
//! grow unnoticed, so this version stops instead.

use std::time::{Duration, Instant};

use sluice_api::{ConnectError, ConnectResult};
use tokio_postgres::Client;

use super::catalog;
use super::config::{PostgresConfig, HEARTBEAT_ACTION_QUERY};

pub struct HeartbeatAction {
    query: String,
    interval: Duration,
    /// The session of its own, opened at the first heartbeat and after a lost one.
    client: Option<Client>,
    last: Option<Instant>,
}

impl HeartbeatAction {
    /// `None` unless both the query and a positive interval are configured.
    pub fn new(cfg: &PostgresConfig) -> Option<Self> {
        let query = cfg.heartbeat_action_query.clone()?;
        (cfg.heartbeat_interval_ms > 0).then(|| Self {
            query,
            interval: Duration::from_millis(cfg.heartbeat_interval_ms),
            client: None,
            last: None,
        })
    }

    /// Runs the query when a heartbeat is due.
    pub async fn maybe_run(&mut self, cfg: &PostgresConfig) -> ConnectResult<()> {
        if self.last.is_some_and(|l| l.elapsed() < self.interval) {
            return Ok(());
        }
        self.last = Some(Instant::now());
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = Some(catalog::connect(cfg).await.map_err(|(_, e)| e)?);
        }
        let client = self.client.as_ref().expect("connected above");
        let done = catalog::bounded(cfg, &format!("running {HEARTBEAT_ACTION_QUERY}"), client.batch_execute(&self.query)).await;
        match done.and_then(|executed| executed.map_err(classify)) {
            Ok(()) => {
                tracing::debug!("heartbeat action query executed");
                Ok(())
            }
            Err(e) => {
                self.client = None;
                Err(e)
            }
        }
    }
}

fn classify(e: tokio_postgres::Error) -> ConnectError {
    use tokio_postgres::error::SqlState;
    let Some(db) = e.as_db_error() else {
        return ConnectError::retriable_from(format!("{HEARTBEAT_ACTION_QUERY}: connection to postgres lost; retrying"), e);
    };
    let code = db.code().clone();
    let message = format!("{HEARTBEAT_ACTION_QUERY} failed (SQLSTATE {}): {}", code.code(), db.message());
    if code == SqlState::ADMIN_SHUTDOWN || code == SqlState::CANNOT_CONNECT_NOW || code == SqlState::CRASH_SHUTDOWN {
        ConnectError::retriable_from(message, e)
    } else {
        ConnectError::fatal_from(format!("{message}; fix the query or remove {HEARTBEAT_ACTION_QUERY}"), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> PostgresConfig {
        let mut p: sluice_api::Props =
            [("database.hostname", "h"), ("database.user", "u"), ("database.dbname", "d"), ("topic.prefix", "p")]
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
        p.extend(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        PostgresConfig::parse(&p).unwrap()
    }

    #[test]
    fn runs_only_with_a_query_and_an_interval() {
        assert!(HeartbeatAction::new(&cfg(&[])).is_none());
        assert!(HeartbeatAction::new(&cfg(&[("heartbeat.action.query", "INSERT INTO hb DEFAULT VALUES")])).is_none(), "interval 0: off");
        assert!(HeartbeatAction::new(&cfg(&[("heartbeat.interval.ms", "100"), ("heartbeat.action.query", "  ")])).is_none());
        let a =
            HeartbeatAction::new(&cfg(&[("heartbeat.interval.ms", "100"), ("heartbeat.action.query", "INSERT INTO hb DEFAULT VALUES")]))
                .unwrap();
        assert_eq!((a.query.as_str(), a.interval), ("INSERT INTO hb DEFAULT VALUES", Duration::from_millis(100)));
    }
}
