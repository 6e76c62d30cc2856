//! `sluice.max.records.per.second`: a ceiling on the records a connector moves, so that one
//! heavy connector cannot take a worker's CPU, disk and network from the others.
//!
//! The connector's rate is shared evenly by its tasks. Each task keeps a token bucket that
//! holds at most one second of its share: after a batch of `n` records the task waits until
//! the bucket has paid for them, so over any window longer than a second the task passes
//! at most its share (plus one batch). A source waits before its next `poll`, a sink before
//! its next fetch: what waits is read later, not dropped or held in memory.

use std::time::{Duration, Instant};

use sluice_api::{ConnectError, ConnectResult, Props};
use tokio_util::sync::CancellationToken;

pub const KEY: &str = "sluice.max.records.per.second";

#[derive(Debug)]
pub struct RateLimit {
    /// Records per second for this task.
    rate: f64,
    /// Records the bucket holds now; negative while a batch is being paid off.
    allowance: f64,
    last: Instant,
}

impl RateLimit {
    /// The limit of one of `tasks` tasks of a connector; `None` when the key is unset.
    pub fn from_config(config: &Props, tasks: u32) -> ConnectResult<Option<Self>> {
        let Some(total) = parse(config)? else { return Ok(None) };
        let rate = total / f64::from(tasks.max(1));
        Ok(Some(Self { rate, allowance: rate, last: Instant::now() }))
    }

    /// The validation error of the key, if any.
    pub fn validate(config: &Props) -> Vec<(String, String)> {
        match parse(config) {
            Ok(_) => Vec::new(),
            Err(ConnectError::Config { key, message }) => vec![(key, message)],
            Err(e) => vec![(KEY.to_owned(), e.to_string())],
        }
    }

    /// The wait that `n` more records need now (zero when the bucket holds them).
    fn charge(&mut self, n: u64, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.allowance = (self.allowance + elapsed * self.rate).min(self.rate) - n as f64;
        if self.allowance >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.allowance / self.rate)
        }
    }

    /// After `n` records: waits until the rate allows them. False when `shutdown` came first.
    pub async fn pace(&mut self, n: u64, shutdown: &CancellationToken) -> bool {
        let wait = self.charge(n, Instant::now());
        if wait.is_zero() {
            return true;
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => true,
            _ = shutdown.cancelled() => false,
        }
    }
}

fn parse(config: &Props) -> ConnectResult<Option<f64>> {
    let Some(v) = config.get(KEY).map(|v| v.trim()).filter(|v| !v.is_empty()) else { return Ok(None) };
    match v.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(Some(r)),
        _ => Err(ConnectError::config(
            KEY,
            format!("Invalid value {v} for configuration {KEY}: expected a number of records per second above 0"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(v: &str) -> Props {
        [(KEY.to_owned(), v.to_owned())].into_iter().collect()
    }

    #[test]
    fn the_bucket_holds_one_second_and_debts_are_waited_out() {
        let mut r = RateLimit::from_config(&props("100"), 1).unwrap().unwrap();
        let t0 = r.last;
        assert_eq!(r.charge(100, t0), Duration::ZERO, "one second's worth passes at once");
        assert_eq!(r.charge(50, t0), Duration::from_millis(500));
        // Half a second later the debt is paid; a long idle time saves at most one second.
        assert_eq!(r.charge(0, t0 + Duration::from_millis(500)), Duration::ZERO);
        assert_eq!(r.charge(150, t0 + Duration::from_secs(60)), Duration::from_millis(500));
    }

    #[test]
    fn the_rate_is_shared_by_the_tasks() {
        let mut r = RateLimit::from_config(&props("300"), 3).unwrap().unwrap();
        let t0 = r.last;
        assert_eq!(r.charge(200, t0), Duration::from_secs(1));
    }

    #[test]
    fn bad_values_are_named() {
        assert!(RateLimit::from_config(&Props::new(), 1).unwrap().is_none());
        for bad in ["0", "-5", "fast", "NaN", "inf"] {
            let e = RateLimit::validate(&props(bad));
            assert_eq!(e.len(), 1, "{bad}");
            assert_eq!(e[0].0, KEY);
        }
        assert!(RateLimit::validate(&props("0.5")).is_empty());
    }
}
