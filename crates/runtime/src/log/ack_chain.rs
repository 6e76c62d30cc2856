//! Acknowledgements in call order for logs whose writes complete out of order (Kafka
//! delivers partitions independently; a split log has two backends).
//!
//! ```text
//! append #1 ──▶ deliveries #1 ──▶ done #1 ─┐
//! append #2 ──▶ deliveries #2 ──▶ (wait done #1) ──▶ done #2 ─┐
//! append #3 ──▶ deliveries #3 ──▶ (wait done #2) ──▶ done #3
//! ```
//!
//! Each call's completion runs as its own task, so a caller that drops or never polls an
//! earlier future does not hold back later ones.

use std::future::Future;
use std::sync::Mutex;

use tokio::sync::oneshot;

use super::{AppendFuture, LogError, LogResult};

#[derive(Default)]
pub(crate) struct AckChain {
    last: Mutex<Option<oneshot::Receiver<()>>>,
}

impl AckChain {
    /// Wraps the completion of one append so that it resolves only after the completion of
    /// every earlier append wrapped by this chain. Must be called in append (call) order,
    /// from within a tokio runtime.
    pub(crate) fn chain<F>(&self, completion: F) -> AppendFuture
    where
        F: Future<Output = LogResult<Vec<i64>>> + Send + 'static,
    {
        let (done_tx, done_rx) = oneshot::channel();
        let (result_tx, result_rx) = oneshot::channel();
        let previous = self.last.lock().unwrap_or_else(|p| p.into_inner()).replace(done_rx);
        tokio::spawn(async move {
            let out = completion.await;
            if let Some(previous) = previous {
                // An error means the earlier task ended without signalling (the runtime is
                // shutting down): nothing left to wait for.
                let _ = previous.await;
            }
            // The result first, then the signal: once a later call's result is out, every
            // earlier one is too.
            let _ = result_tx.send(out);
            let _ = done_tx.send(());
        });
        Box::pin(async move { result_rx.await.map_err(|_| LogError::Closed)? })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn later_completions_wait_for_earlier_ones() {
        let chain = AckChain::default();
        let (slow_tx, slow_rx) = oneshot::channel::<()>();
        let first = chain.chain(async move {
            let _ = slow_rx.await;
            Ok(vec![1])
        });
        let second = chain.chain(async { Ok(vec![2]) });
        let mut second = std::pin::pin!(second);
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut second).await.is_err(), "second resolved before first");
        slow_tx.send(()).unwrap();
        assert_eq!(second.await.unwrap(), vec![2]);
        assert_eq!(first.await.unwrap(), vec![1]);
    }

    #[tokio::test]
    async fn a_dropped_earlier_future_does_not_block() {
        let chain = AckChain::default();
        drop(chain.chain(async { Ok(vec![1]) }));
        assert_eq!(chain.chain(async { Ok(vec![2]) }).await.unwrap(), vec![2]);
    }
}
