//! The backends under test, each with what it needs to live (a directory, a broker).

#[cfg(feature = "kafka")]
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_runtime::log::embedded::{EmbeddedLog, EmbeddedOptions};
use sluice_runtime::log::Log;

pub struct Backend {
    pub log: Arc<dyn Log>,
    kind: Kind,
    _dir: tempfile::TempDir,
}

enum Kind {
    Embedded(Arc<EmbeddedLog>),
    #[cfg(feature = "kafka")]
    Kafka {
        broker: Broker,
    },
}

impl Backend {
    pub fn embedded() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Small compacted segments so that compaction has sealed segments to clean.
        let options =
            EmbeddedOptions { compacted_segment_bytes: 256, maintenance_interval: Duration::from_secs(3600), ..EmbeddedOptions::default() };
        let log = Arc::new(EmbeddedLog::open(dir.path(), options).unwrap());
        Self { log: log.clone(), kind: Kind::Embedded(log), _dir: dir }
    }

    #[cfg(feature = "kafka")]
    pub fn kafka() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::start(dir.path().join("broker"));
        let log = Arc::new(broker.connect());
        Self { log, kind: Kind::Kafka { broker }, _dir: dir }
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Embedded(_) => "embedded",
            #[cfg(feature = "kafka")]
            Kind::Kafka { .. } => "kafka",
        }
    }

    /// A second, independent handle on the same log where the backend allows one (Kafka:
    /// new clients); `None` for the embedded log, which one process opens once.
    pub fn second_handle(&self) -> Option<Arc<dyn Log>> {
        match &self.kind {
            Kind::Embedded(_) => None,
            #[cfg(feature = "kafka")]
            Kind::Kafka { broker } => Some(Arc::new(broker.connect())),
        }
    }

    /// Makes the backend compact what it can now. `false` when compaction cannot be forced
    /// from a client (Kafka: the broker's log cleaner runs on its own schedule).
    pub fn compact_now(&self) -> bool {
        match &self.kind {
            Kind::Embedded(log) => {
                log.run_maintenance().unwrap();
                true
            }
            #[cfg(feature = "kafka")]
            Kind::Kafka { .. } => false,
        }
    }
}

/// A broker process started with `tests/services/kafka.sh`, stopped on drop.
#[cfg(feature = "kafka")]
pub struct Broker {
    dir: PathBuf,
    pub bootstrap: String,
}

#[cfg(feature = "kafka")]
impl Broker {
    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/services/kafka.sh")
    }

    pub fn start(dir: PathBuf) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let kind = std::env::var("SLUICE_TEST_BROKER").unwrap_or_else(|_| "noida".to_owned());
        let out = std::process::Command::new(Self::script())
            .arg("start")
            .arg(&dir)
            .arg(port.to_string())
            .arg(&kind)
            .output()
            .expect("run tests/services/kafka.sh");
        assert!(out.status.success(), "the test broker did not start:\n{}", String::from_utf8_lossy(&out.stderr));
        Self { dir, bootstrap: format!("127.0.0.1:{port}") }
    }

    pub fn connect(&self) -> sluice_runtime::log::kafka::KafkaLog {
        use sluice_runtime::log::kafka::{KafkaLog, KafkaOptions};
        let props = [("bootstrap.servers", self.bootstrap.as_str()), ("consumer.fetch.max.wait.ms", "100"), ("producer.linger.ms", "1")];
        let props = props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut options = KafkaOptions::from_worker_props(&props).unwrap();
        options.request_timeout = Duration::from_secs(15);
        KafkaLog::connect(options).unwrap()
    }
}

#[cfg(feature = "kafka")]
impl Drop for Broker {
    fn drop(&mut self) {
        let _ = std::process::Command::new(Self::script()).arg("stop").arg(&self.dir).status();
    }
}
