//! The contract of `Log` (see `sluice_runtime::log`), written once and run against each
//! backend: the embedded log, and with the `kafka` feature the Kafka log against a broker
//! started by `tests/services/kafka.sh` (noida-db; a broker that does not start fails the
//! test).

mod backends;
mod contract;

/// Runs one contract check against every backend.
macro_rules! contract_tests {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let backend = crate::backends::Backend::embedded();
                    crate::contract::$name(&backend).await;
                }
            )*
        }
        #[cfg(feature = "kafka")]
        mod kafka {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let backend = crate::backends::Backend::kafka();
                    crate::contract::$name(&backend).await;
                }
            )*
        }
    };
}

contract_tests!(
    append_assigns_offsets_in_call_order,
    acks_resolve_in_call_order,
    acknowledged_records_are_visible_to_a_fresh_reader,
    round_trip_keeps_nulls_headers_and_timestamps,
    read_from_an_offset_and_bounded_by_bytes,
    reading_again_inside_the_last_batch_misses_nothing,
    read_at_the_end_waits_at_most_max_wait,
    waiting_read_returns_a_record_appended_meanwhile,
    partition_count_creates_missing_topics,
    ensure_topic_keeps_an_existing_topic,
    create_topic_applies_its_settings_once,
    compacted_topic_keeps_the_newest_value_per_key,
    group_offsets_round_trip,
);

/// Kafka only: with no broker listening, operations fail as retriable
/// (`LogError::Unavailable`, which the runtime turns into a retriable `ConnectError`)
/// within the configured timeouts instead of hanging.
#[cfg(feature = "kafka")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_without_a_broker_is_retriable() {
    use std::time::{Duration, Instant};

    use sluice_api::TopicPartition;
    use sluice_runtime::log::kafka::{KafkaLog, KafkaOptions};
    use sluice_runtime::log::{Log, LogError, LogRecord, Produce};

    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let props = [("bootstrap.servers", format!("127.0.0.1:{port}")), ("producer.delivery.timeout.ms", "2000".into())];
    let mut options = KafkaOptions::from_worker_props(&props.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()).unwrap();
    options.request_timeout = Duration::from_secs(2);
    let log = KafkaLog::connect(options).unwrap();
    let t = Instant::now();
    let err = log.offsets(&TopicPartition::new("t", 0)).await.unwrap_err();
    assert!(matches!(err, LogError::Unavailable { .. }), "{err:?}");
    let record = LogRecord { value: Some(b"v".to_vec()), ..LogRecord::default() };
    let err = log.append(vec![Produce { topic: "t".into(), partition: 0, record }]).await.unwrap_err();
    assert!(matches!(err, LogError::Unavailable { .. }), "{err:?}");
    let connect: sluice_api::ConnectError = err.into();
    assert!(connect.is_retriable(), "{connect}");
    assert!(t.elapsed() < Duration::from_secs(15), "took {:?}", t.elapsed());
}
