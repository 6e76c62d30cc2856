//! Kafka's transactional producer for exactly-once source tasks.
//!
//! ```text
//!  init (once: fences older producers with this transactional.id, aborts their transaction)
//!  begin ─▶ send records ─▶ send offset records ─▶ commit (flushes, then commits)
//!                                  └─ any failure ─▶ abort; the task fails and restarts
//!                                                    from the last committed offsets
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};

use super::{client_config, config_error, future_record, kafka_error, ClientLog, KafkaOptions, DEFAULT_DELIVERY_TIMEOUT_MS};
use crate::log::{LogError, LogResult, Produce, Transactional};

pub struct KafkaTransactional {
    producer: Arc<FutureProducer<ClientLog>>,
    id: String,
    /// For init and abort; commit waits up to the delivery timeout.
    request_timeout: Duration,
}

impl KafkaTransactional {
    pub fn new(options: &KafkaOptions, transactional_id: &str) -> LogResult<Self> {
        let producer = client_config(
            &options.clients.producer,
            // librdkafka wants `message.timeout.ms` at most `transaction.timeout.ms` (60 s by
            // default) and lowers it to that when unset.
            &[("acks", "all"), ("max.in.flight.requests.per.connection", "5")],
        )
        // Not overridable: they are what makes the writes exactly-once.
        .set("enable.idempotence", "true")
        .set("transactional.id", transactional_id)
        .clone()
        .create_with_context(ClientLog)
        .map_err(|e| config_error(&options.clients.producer, "transactional producer", e))?;
        Ok(Self { producer: Arc::new(producer), id: transactional_id.to_owned(), request_timeout: options.request_timeout })
    }

    async fn blocking(
        &self,
        what: &str,
        f: impl FnOnce(&FutureProducer<ClientLog>) -> Result<(), KafkaError> + Send + 'static,
    ) -> LogResult<()> {
        let producer = Arc::clone(&self.producer);
        let context = format!("{what} (transactional.id {})", self.id);
        tokio::task::spawn_blocking(move || f(&producer)).await.map_err(|_| LogError::Closed)?.map_err(|e| kafka_error(context, e))
    }
}

#[async_trait]
impl Transactional for KafkaTransactional {
    async fn init(&self) -> LogResult<()> {
        let timeout = self.request_timeout * 2;
        self.blocking("initializing transactions", move |p| p.init_transactions(timeout)).await
    }

    fn begin(&self) -> LogResult<()> {
        self.producer.begin_transaction().map_err(|e| kafka_error(format!("beginning a transaction (transactional.id {})", self.id), e))
    }

    fn send(&self, records: &[Produce]) -> LogResult<()> {
        let deadline = Instant::now() + Duration::from_millis(DEFAULT_DELIVERY_TIMEOUT_MS.parse().unwrap_or(120_000));
        for p in records {
            let mut record = future_record(p);
            loop {
                match self.producer.send_result(record) {
                    // The delivery is checked by commit, which fails if any record failed.
                    Ok(_delivery) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) if Instant::now() < deadline => {
                        record = r;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err((e, _)) => return Err(kafka_error(format!("producing to {} partition {}", p.topic, p.partition), e)),
                }
            }
        }
        Ok(())
    }

    async fn commit(&self) -> LogResult<()> {
        let timeout = Duration::from_millis(DEFAULT_DELIVERY_TIMEOUT_MS.parse().unwrap_or(120_000));
        self.blocking("committing a transaction", move |p| p.commit_transaction(timeout)).await
    }

    async fn abort(&self) -> LogResult<()> {
        let timeout = self.request_timeout;
        self.blocking("aborting a transaction", move |p| p.abort_transaction(timeout)).await
    }
}
