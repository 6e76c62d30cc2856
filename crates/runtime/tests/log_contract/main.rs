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
    compacted_topic_keeps_the_newest_value_per_key,
    group_offsets_round_trip,
);
