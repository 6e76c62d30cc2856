//! Standalone mode: one worker, its state in the embedded log. Also the first brick of
//! distributed mode (`sluice distributed`): the same single worker with everything in Kafka.
//!
//! Without `bootstrap.servers` every topic lives in the embedded log under `data.dir`.
//! With it, as `connect-standalone` does, data topics and sink consumer groups live in
//! Kafka while the worker's own state stays local: the config, offset and status topics
//! remain in the embedded log (Connect keeps standalone offsets in a file and configs in
//! memory). A [`SplitLog`] routes by topic name:
//!
//! ```text
//! herder, tasks ──▶ SplitLog ──┬─ config/offset/status topics ──▶ EmbeddedLog (data.dir)
//!                              └─ every other topic, groups ────▶ KafkaLog (bootstrap.servers)
//! ```
//!
//! `sluice distributed WORKER.properties` keeps configs, offsets and statuses in Kafka's
//! three internal topics too (`config.storage.topic`, `offset.storage.topic`,
//! `status.storage.topic`, created compacted; the config topic with one partition), so a
//! worker's state survives the loss of its machine. Workers with the same `group.id` form
//! one cluster (`sluice_runtime::herder::group`): each runs the share of connectors and
//! tasks the group's leader assigns it, and forwards REST writes to the leader.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _};
use sluice_runtime::herder::group::member::GroupMember;
use sluice_runtime::herder::group::worker::ClusterWorker;
use sluice_runtime::herder::group::GroupSettings;
use sluice_runtime::herder::standalone::{Cluster, StandaloneHerder};
use sluice_runtime::herder::Herder;
use sluice_runtime::log::embedded::{EmbeddedLog, EmbeddedOptions, FsyncPolicy};
use sluice_runtime::log::kafka::{KafkaLog, KafkaOptions};
use sluice_runtime::log::split::SplitLog;
use sluice_runtime::log::Log;
use sluice_runtime::plugins::Plugins;
use sluice_runtime::task::exactly_once::{WorkerSupport, WORKER_KEY};
use sluice_runtime::worker::config::{parse_properties, WorkerConfig};
use tokio_util::sync::CancellationToken;

/// Where the worker keeps its topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The embedded log; with `bootstrap.servers`, data topics in Kafka.
    Standalone,
    /// Everything in Kafka; workers with the same `group.id` share the work.
    Distributed,
}

/// Keys `connect-distributed` requires (they have no defaults there).
const DISTRIBUTED_REQUIRED: &[&str] =
    &["bootstrap.servers", "group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"];

/// What the command line gives a worker.
#[derive(Debug, Default)]
pub struct Args {
    pub worker_file: Option<String>,
    pub connector_files: Vec<String>,
    /// `--connectors-dir`: overrides `connectors.dir` (and `CONNECT_CONNECTORS_DIR`).
    pub connectors_dir: Option<String>,
}

pub fn run_mode(mode: Mode, args: Args) -> anyhow::Result<()> {
    let loggers = sluice_runtime::logging::init("info").context("could not set up logging")?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("sluice").build()?;
    runtime.block_on(run(mode, args, loggers))
}

async fn run(mode: Mode, args: Args, loggers: sluice_runtime::logging::LogLevels) -> anyhow::Result<()> {
    let Args { worker_file, connector_files, connectors_dir } = args;
    let file_props = match &worker_file {
        Some(path) => parse_properties(&std::fs::read_to_string(path).with_context(|| format!("cannot read worker properties {path}"))?),
        None => Default::default(),
    };
    let flag = connectors_dir.map(|d| ("CONNECT_CONNECTORS_DIR".to_owned(), d));
    let worker = WorkerConfig::from_sources(file_props, std::env::vars().chain(flag)).context("invalid worker configuration")?;
    let auth = sluice_rest::auth::from_worker(&worker.props, std::env::var("KAFKA_OPTS").ok().as_deref())
        .context("invalid REST API settings")?;
    // The `ssl.*` keys also configure the Kafka clients: they are read for the REST API only
    // when a listener is https (as Connect reads them only then).
    let (https, forward_tls) = if worker.rest_listeners.iter().any(|l| l.https) {
        (
            Some(sluice_rest::tls::server_config(&worker.props, sluice_rest::tls::PREFIX).context("invalid https listener settings")?),
            sluice_rest::tls::forwarding_tls(&worker.props).context("invalid https listener settings")?,
        )
    } else {
        (None, None)
    };
    let admin_listeners = worker.admin_listeners.clone().unwrap_or_default();
    let admin_https = if admin_listeners.iter().any(|l| l.https) {
        Some(sluice_rest::tls::server_config(&worker.props, sluice_rest::tls::ADMIN_PREFIX).context("invalid https admin listener settings")?)
    } else {
        None
    };
    let connectors = connector_files.iter().map(|f| crate::connector_file::load(&PathBuf::from(f))).collect::<anyhow::Result<Vec<_>>>()?;

    check_exactly_once(mode, &worker)?;
    check_distributed_keys(mode, &worker)?;
    let group = match mode {
        Mode::Distributed => Some(GroupSettings::from_worker_props(&worker.props).map_err(|e| anyhow!("invalid group settings: {e}"))?),
        Mode::Standalone => None,
    };
    if let Some(settings) = &group {
        // At most a few seconds: a broker that is down now is waited for by the member.
        match tokio::time::timeout(std::time::Duration::from_secs(5), GroupMember::probe(settings)).await {
            Ok(Ok(coordinator)) => tracing::debug!(%coordinator, "the group coordinator answers"),
            Ok(Err(e)) if e.is_refusal() => bail!("group membership: {e}"),
            Ok(Err(e)) => tracing::warn!(error = %e, "the group coordinator cannot be reached yet; the worker keeps trying"),
            Err(_) => tracing::warn!("the group coordinator did not answer within 5 s; the worker keeps trying"),
        }
    }
    let (log, cluster_id) = open_log(mode, &worker).await?;

    let plugins = Arc::new(Plugins::new(sluice_connectors::connectors()));
    let signing = group.as_ref().map(|g| g.signing.clone()).unwrap_or_default();
    let member = group.map(GroupMember::new);
    let url = worker.advertised_url();
    let (herder, snapshot) = match &member {
        Some(m) => StandaloneHerder::open_member(worker.clone(), log.clone(), plugins, Cluster::new(url.clone(), m.rejoin_handle(), signing)).await,
        None => StandaloneHerder::open(worker.clone(), log.clone(), plugins).await,
    }
    .context("cannot read the internal topics")?;

    // (https, admin only, listener)
    let mut bound = Vec::new();
    for l in &worker.rest_listeners {
        bound.push((l.https, false, rest_listener(&l.host, l.port).await?));
    }
    for l in &admin_listeners {
        bound.push((l.https, true, rest_listener(&l.host, l.port).await?));
    }
    let addr = bound
        .iter()
        .map(|(https, _, l)| {
            let scheme = if *https { "https" } else { "http" };
            l.local_addr().map_or_else(|_| format!("{scheme}://?"), |a| format!("{scheme}://{a}"))
        })
        .collect::<Vec<_>>()
        .join(",");
    let shutdown = CancellationToken::new();
    herder.set_loggers(loggers.clone());
    let directory = sluice_runtime::declared::reconcile::Directory::new(worker.connectors_dir.clone());
    let state = sluice_rest::RestState {
        herder: herder.clone() as Arc<dyn Herder>,
        loggers,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        commit: option_env!("SLUICE_COMMIT").unwrap_or("unknown").to_owned(),
        kafka_cluster_id: cluster_id,
        directory: Some(directory.clone()),
        auth,
        cors: sluice_rest::cors::Cors::from_worker(&worker.props),
        forward_tls,
    };
    use sluice_rest::Serves;
    let main = if worker.admin_listeners.is_some() { Serves::WithoutAdmin } else { Serves::All };
    let (router, admin_router) = (sluice_rest::router_for(state.clone(), main), sluice_rest::router_for(state, Serves::AdminOnly));
    let mut servers = Vec::new();
    for (is_https, admin, listener) in bound {
        let (router, config) = if admin { (admin_router.clone(), &admin_https) } else { (router.clone(), &https) };
        servers.push(match (is_https, config) {
            (true, Some(config)) => tokio::spawn(sluice_rest::serve_tls(listener, config.clone(), router, shutdown.clone())),
            _ => tokio::spawn(sluice_rest::serve(listener, router, shutdown.clone())),
        });
    }
    tracing::info!(listen = %addr, worker_id = %worker.worker_id(), "REST API listening");

    herder.start(snapshot).await;
    let membership = CancellationToken::new();
    let mut member_loop = None;
    if let Some(member) = member {
        tokio::spawn(herder.clone().follow_configs(membership.clone()));
        tokio::spawn(herder.status_store().follow(membership.clone()));
        let member_worker = Arc::new(ClusterWorker { herder: herder.clone(), url });
        member_loop = Some(tokio::spawn(member.run(member_worker, membership.clone())));
        tracing::info!(group.id = %worker.props["group.id"], "joining the group: this worker runs the connectors and tasks the group assigns it");
    }
    for declared in connectors {
        let name = declared.name;
        match herder.put_connector_config(&name, declared.config, true, declared.state).await {
            Ok((created, _)) => tracing::info!(connector = %name, created, "connector from the command line applied"),
            Err(e) => bail!("connector {name} from the command line was rejected: {e}"),
        }
    }
    // After the command line's connectors, so a directory that declares the same names
    // reports them as conflicts instead of fighting over them.
    let reconciling = CancellationToken::new();
    tokio::spawn(directory.run(herder.clone() as Arc<dyn Herder>, reconciling.clone()));
    tracing::info!("worker started");

    wait_for_signal().await;
    reconciling.cancel();
    tracing::info!("stopping: tasks get task.shutdown.graceful.timeout.ms to finish and commit");
    herder.shutdown().await;
    // Leave the group after the tasks stopped, so the others rebalance at once.
    membership.cancel();
    if let Some(m) = member_loop {
        let _ = m.await;
    }
    shutdown.cancel();
    for server in servers {
        let _ = server.await;
    }
    drop(herder);
    tracing::info!("stopped");
    Ok(())
}

/// `exactly.once.source.support=enabled` only where it can be kept: in distributed mode,
/// where records and source offsets live in the same Kafka cluster and commit together.
fn check_exactly_once(mode: Mode, worker: &WorkerConfig) -> anyhow::Result<()> {
    if worker.exactly_once_source != WorkerSupport::Enabled {
        return Ok(());
    }
    if mode == Mode::Standalone {
        bail!(
            "{WORKER_KEY}=enabled needs distributed mode (as in Kafka Connect): in standalone mode the source offsets live in the local log, not in Kafka, so they cannot commit in the same transaction as the records; remove the key or run `sluice distributed`"
        );
    }
    Ok(())
}

/// Distributed mode needs the keys `connect-distributed` requires.
fn check_distributed_keys(mode: Mode, worker: &WorkerConfig) -> anyhow::Result<()> {
    if mode != Mode::Distributed {
        return Ok(());
    }
    let missing: Vec<&str> =
        DISTRIBUTED_REQUIRED.iter().copied().filter(|k| worker.props.get(*k).is_none_or(|v| v.trim().is_empty())).collect();
    if !missing.is_empty() {
        bail!("distributed mode needs {} in the worker properties (as connect-distributed does)", missing.join(", "));
    }
    Ok(())
}

/// The log the herder runs on, and the cluster id REST shows.
async fn open_log(mode: Mode, worker: &WorkerConfig) -> anyhow::Result<(Arc<dyn Log>, String)> {
    let kafka = || -> anyhow::Result<KafkaLog> {
        let options = KafkaOptions::from_worker_props(&worker.props)
            .map_err(|e| anyhow!("invalid Kafka client settings: {e}"))?
            .with_read_committed_topics([worker.config_topic.clone(), worker.offset_topic.clone(), worker.status_topic.clone()]);
        KafkaLog::connect(options).map_err(|e| anyhow!("cannot create the Kafka clients: {e}"))
    };
    if mode == Mode::Distributed {
        let kafka = kafka()?;
        let id = kafka.cluster_id().await.unwrap_or_else(|| "unknown".to_owned());
        tracing::info!(cluster_id = %id, config.storage.topic = %worker.config_topic, offset.storage.topic = %worker.offset_topic, status.storage.topic = %worker.status_topic, "every topic, including the worker's state, lives in Kafka");
        return Ok((Arc::new(kafka), id));
    }
    let fsync = FsyncPolicy::parse(&worker.log_fsync).map_err(|e| anyhow!("invalid value for log.fsync: {e}"))?;
    std::fs::create_dir_all(&worker.data_dir).with_context(|| format!("cannot create data.dir {}", worker.data_dir.display()))?;
    let options = EmbeddedOptions { fsync, cache_bytes: worker.log_cache_bytes, ..EmbeddedOptions::default() };
    let log = EmbeddedLog::open(&worker.data_dir, options)
        .with_context(|| format!("cannot open the embedded log in {}", worker.data_dir.display()))?;
    let embedded: Arc<dyn Log> = Arc::new(log);
    tracing::info!(data_dir = %worker.data_dir.display(), fsync = %worker.log_fsync, "embedded log open");
    Ok(match &worker.bootstrap_servers {
        None => (embedded, format!("sluice-embedded-{}", cluster_id(&worker.data_dir))),
        Some(servers) => {
            let kafka = kafka()?;
            let id = kafka.cluster_id().await.unwrap_or_else(|| "unknown".to_owned());
            tracing::info!(bootstrap.servers = %servers, cluster_id = %id, "data topics and sink groups live in Kafka; the worker's own topics stay in the embedded log");
            let internal = [worker.config_topic.clone(), worker.offset_topic.clone(), worker.status_topic.clone()];
            (Arc::new(SplitLog::new(internal, embedded, Arc::new(kafka))), id)
        }
    })
}

/// A stable identifier of this data directory, shown as `kafka_cluster_id`.
fn cluster_id(dir: &std::path::Path) -> String {
    let path = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    format!("{:08x}", sluice_runtime::partitioner::murmur2(path.to_string_lossy().as_bytes()) as u32)
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}

/// The REST listener. A listener without a host takes every interface, IPv6 and IPv4 on one
/// dual-stack socket as Kafka Connect's does, or IPv4 alone where the host has no IPv6; a host
/// (`0.0.0.0` included) is bound as given.
async fn rest_listener(host: &str, port: u16) -> anyhow::Result<tokio::net::TcpListener> {
    if host.is_empty() {
        match dual_stack(port) {
            Ok(l) => return Ok(l),
            Err(e) => tracing::info!(error = %e, port, "no IPv6 listener; listening on IPv4 only"),
        }
        let addr = format!("0.0.0.0:{port}");
        return tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"));
    }
    let addr = format!("{host}:{port}");
    tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))
}

fn dual_stack(port: u16) -> std::io::Result<tokio::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_only_v6(false)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    let addr = std::net::SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port));
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    tokio::net::TcpListener::from_std(socket.into())
}
