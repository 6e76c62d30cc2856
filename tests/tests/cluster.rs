//! A cluster of sluice containers, as users run one: three (then four) workers of one
//! `group.id` from the image, a Kafka-protocol broker and PostgreSQL, on private Docker
//! networks. Workers reach the broker on one network and Postgres on another, so a worker
//! can be cut off from the group while it still reaches the database: the case where a
//! zombie would write.
//!
//! Broker: noida 0.2.3 in a container. It keeps topics, group offsets and transactions as
//! Apache Kafka does, which distributed mode needs; tansu's high watermark (the last batch's
//! base offset + 1) stops a worker's read of its config topic early. noida never expires a
//! member that stops heartbeating (tests/services/kafka-quirks/README.md), so after
//! `session.timeout.ms` this test sends the LeaveGroup that a real broker's expiry amounts to,
//! for the killed or cut-off worker's member id. Nothing in sluice depends on it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use sluice_tests::containers::{image, sluice_image, Container, PgContainer, Rest, Scope, PG_PASSWORD};
use sluice_tests::{eventually, json, Json, SqlWriter};

const GROUP: &str = "sluice-cluster";
const SESSION_MS: u64 = 6_000;
const DELAY_MS: u64 = 5_000;
const TABLES: usize = 3;

struct Node {
    name: String,
    container: Container,
    rest: Rest,
}

impl Node {
    fn id(&self) -> String {
        format!("{}:8083", self.name)
    }

    fn member_id(&self) -> String {
        let logs = self.container.logs();
        let line = logs.lines().rev().find(|l| l.contains("joined the group")).expect("the worker joined its group");
        let id = line.split("member_id=").nth(1).and_then(|r| r.split_whitespace().next()).expect("member_id in the join line");
        id.trim_matches('"').to_owned()
    }
}

struct Cluster {
    scope: Scope,
    db: String,
    kafka: String,
    image: String,
    broker_port: u16,
}

impl Cluster {
    fn worker(&self, name: &str) -> Node {
        let env: Vec<String> = [
            ("BOOTSTRAP_SERVERS", "broker:9092"),
            ("GROUP_ID", GROUP),
            ("CONFIG_STORAGE_TOPIC", "cluster-configs"),
            ("OFFSET_STORAGE_TOPIC", "cluster-offsets"),
            ("STATUS_STORAGE_TOPIC", "cluster-status"),
            ("REST_ADVERTISED_HOST_NAME", name),
            ("SESSION_TIMEOUT_MS", &SESSION_MS.to_string()),
            ("HEARTBEAT_INTERVAL_MS", "1000"),
            ("REBALANCE_TIMEOUT_MS", "10000"),
            ("SCHEDULED_REBALANCE_MAX_DELAY_MS", &DELAY_MS.to_string()),
            ("OFFSET_FLUSH_INTERVAL_MS", "500"),
            ("CONSUMER_FETCH_MAX_WAIT_MS", "100"),
        ]
        .iter()
        .map(|(k, v)| format!("CONNECT_{k}={v}"))
        .collect();
        let mut args = vec!["-p", "127.0.0.1::8083"];
        for e in &env {
            args.extend(["-e", e.as_str()]);
        }
        // Created on the database network (which also carries its published port), then joined
        // to the broker's network, then started: the worker sees both from its first moment.
        let container = self.scope.create(name, &self.db, &args, &self.image, &["distributed"]);
        container.connect(&self.kafka, name);
        container.start();
        let rest = Rest::new(container.published_port(8083));
        rest.wait_for("/", Duration::from_secs(60), |code, _| code == 200);
        Node { name: name.to_owned(), container, rest }
    }

    /// Stands in for the broker's session expiry of `node`'s member (see the module docs).
    fn expire(&self, node: &Node, member: &str) {
        std::thread::sleep(Duration::from_millis(SESSION_MS + 1_000));
        let code = sluice_tests::leave_group_for(&format!("127.0.0.1:{}", self.broker_port), GROUP, member);
        assert!(code == 0 || code == 25, "LeaveGroup on behalf of {} answered {code}", node.name);
    }
}

fn source(n: usize) -> Json {
    json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "pg", "database.port": "5432", "database.user": "postgres",
        "database.password": PG_PASSWORD, "database.dbname": "postgres", "topic.prefix": "srv",
        "slot.name": format!("cluster_slot_{n}"), "publication.name": format!("cluster_pub_{n}"),
        "table.include.list": format!("public.t{n}"), "poll.interval.ms": "100"
    })
}

fn sink(n: usize) -> Json {
    json!({
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "topics": format!("srv.public.t{n}"), "connection.url": "jdbc:postgresql://pg:5432/wh",
        "connection.username": "postgres", "connection.password": PG_PASSWORD,
        "insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": "true",
        "collection.name.format": "${source.table}"
    })
}

fn connectors() -> Vec<String> {
    (0..TABLES).flat_map(|n| [format!("src{n}"), format!("wh{n}")]).collect()
}

/// Who runs what: connector or `connector-task` → worker id, from `node`'s view; None while
/// anything is not RUNNING or the worker does not answer.
fn placement(node: &Node) -> Option<BTreeMap<String, String>> {
    let (code, all) = node.rest.try_get("/connectors?expand=status")?;
    if code != 200 {
        return None;
    }
    let mut placed = BTreeMap::new();
    for name in connectors() {
        let status = &all[&name]["status"];
        if status["connector"]["state"] != "RUNNING" {
            return None;
        }
        placed.insert(name.clone(), status["connector"]["worker_id"].as_str()?.to_owned());
        let tasks = status["tasks"].as_array()?;
        if tasks.is_empty() {
            return None;
        }
        for t in tasks {
            if t["state"] != "RUNNING" {
                return None;
            }
            placed.insert(format!("{name}-{}", t["id"]), t["worker_id"].as_str()?.to_owned());
        }
    }
    Some(placed)
}

/// Waits until everything runs, on workers that `ok` accepts; returns the placement.
fn wait_placed(node: &Node, timeout: Duration, what: &str, ok: impl Fn(&str) -> bool) -> BTreeMap<String, String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(p) = placement(node) {
            if p.values().all(|w| ok(w)) {
                return p;
            }
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}; last placement {:?}", placement(node));
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Waits until every node in `nodes` runs part of the work and the group has been quiet
/// (no worker joined or left a round) for a few seconds: a fault injected then meets
/// workers between rebalances, heartbeating. Returns the placement.
fn wait_settled(nodes: &[Node], what: &str) -> BTreeMap<String, String> {
    let joins = || -> usize { nodes.iter().map(|n| n.container.logs().matches("joined the group").count()).sum() };
    let deadline = Instant::now() + Duration::from_millis(DELAY_MS * 3 + 90_000);
    let mut last = (joins(), Instant::now());
    loop {
        let placed = placement(&nodes[0]);
        let everyone = placed.as_ref().is_some_and(|p| nodes.iter().all(|n| p.values().any(|w| *w == n.id())));
        let now = joins();
        if now != last.0 {
            last = (now, Instant::now());
        } else if everyone && last.1.elapsed() > Duration::from_secs(4) {
            return placed.expect("checked above");
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: the group did not settle; last placement {placed:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_cluster_of_containers_survives_a_kill_a_partition_and_a_rolling_restart() {
    let scope = Scope::new("cluster");
    // Names sort the database network first: it carries the published REST ports, and stays.
    let db = scope.network("a-db");
    let kafka = scope.network("b-kafka");
    let broker_image = image("broker", &["noida"]);
    let broker = scope.run("broker", &kafka, &["-p", "127.0.0.1::9092"], &broker_image, &[]);
    let broker_port = broker.published_port(9092);
    let pg = PgContainer::start(&scope, "pg", &db);
    pg.sql("postgres", "CREATE DATABASE wh");
    for n in 0..TABLES {
        pg.sql("postgres", &format!("CREATE TABLE t{n} (id int PRIMARY KEY, v text NOT NULL)"));
        pg.sql("wh", &format!("CREATE TABLE t{n} (id int PRIMARY KEY, v text)"));
    }
    // Every row the sinks write, with the address of the worker that wrote it.
    pg.sql(
        "wh",
        "CREATE TABLE writes (tbl text NOT NULL, id int NOT NULL, op text NOT NULL, addr inet, at timestamptz NOT NULL DEFAULT clock_timestamp());
         CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           INSERT INTO writes (tbl, id, op, addr) VALUES (TG_TABLE_NAME, NEW.id, TG_OP, inet_client_addr()); RETURN NULL; END $$;",
    );
    for n in 0..TABLES {
        pg.sql("wh", &format!("CREATE TRIGGER logged AFTER INSERT OR UPDATE ON t{n} FOR EACH ROW EXECUTE FUNCTION log_write()"));
    }

    let cluster = Cluster { image: sluice_image(), broker_port, db: db.clone(), kafka: kafka.clone(), scope };
    let mut nodes: Vec<Node> = (1..=3).map(|i| cluster.worker(&format!("w{i}"))).collect();
    for n in 0..TABLES {
        let (code, body) = nodes[n % 3].rest.post_settled("/connectors", &json!({"name": format!("src{n}"), "config": source(n)}));
        assert_eq!(code, 201, "{body}");
        let (code, body) = nodes[(n + 1) % 3].rest.post_settled("/connectors", &json!({"name": format!("wh{n}"), "config": sink(n)}));
        assert_eq!(code, 201, "{body}");
    }
    let placed = wait_placed(&nodes[0], Duration::from_secs(120), "every connector and task RUNNING", |_| true);
    let used: BTreeSet<&String> = placed.values().collect();
    eprintln!("placement: {placed:?}");
    assert_eq!(used.len(), 3, "the work spreads over the three workers: {placed:?}");

    // A steady writer: inserts only, each id once, round robin over the tables.
    let writer = SqlWriter::start_psql(pg.psql("postgres", true), Duration::from_millis(50), |i| {
        format!("INSERT INTO t{} VALUES ({i}, 'v{i}');\n", i % TABLES as i64)
    });

    // 1. docker kill: the killed worker's work runs on the survivors within the scheduled
    //    delay plus the session timeout (and the time to start it again).
    wait_settled(&nodes, "a settled group before the kill");
    let victim = 1;
    let victim_id = nodes[victim].id();
    let member = nodes[victim].member_id();
    eprintln!("killing {victim_id} (member {member})");
    nodes[victim].container.kill();
    let killed = Instant::now();
    cluster.expire(&nodes[victim], &member);
    let other = &nodes[(victim + 1) % 3];
    let after_kill = wait_placed(other, Duration::from_millis(SESSION_MS + DELAY_MS + 90_000), "the killed worker's work on the survivors", |w| {
        w != victim_id
    });
    let moved_in = killed.elapsed();
    eprintln!("after the kill, in {moved_in:?}: {after_kill:?}");
    assert!(
        moved_in < Duration::from_millis(SESSION_MS + DELAY_MS + 20_000),
        "the work moved only after {moved_in:?} (session {SESSION_MS} ms, delay {DELAY_MS} ms)"
    );
    // It comes back and rejoins.
    nodes[victim].container.start();
    nodes[victim].rest = Rest::new(nodes[victim].container.published_port(8083));
    nodes[victim].rest.wait_for("/", Duration::from_secs(60), |code, _| code == 200);

    // 2. A partition: one worker loses the broker's network but still reaches Postgres. It
    //    stops its work once it cannot heartbeat; the others take it over; when it is back it
    //    rejoins. No sink table is written by the cut-off worker after another took over.
    let placed = wait_settled(&nodes, "a settled group before the partition");
    let cut = (0..3)
        .max_by_key(|i| placed.iter().filter(|(k, w)| k.starts_with("wh") && k.contains('-') && **w == nodes[*i].id()).count())
        .unwrap();
    let cut_id = nodes[cut].id();
    let cut_addr = nodes[cut].container.address(&db);
    let cut_sinks: Vec<String> =
        placed.iter().filter(|(k, w)| k.starts_with("wh") && k.contains('-') && **w == cut_id).map(|(k, _)| k.clone()).collect();
    let member = nodes[cut].member_id();
    eprintln!("cutting {cut_id} ({cut_addr} on the database network) off the broker; it runs sink tasks {cut_sinks:?}");
    let cut_at = pg.sql("wh", "SELECT clock_timestamp()");
    nodes[cut].container.disconnect(&kafka);
    // Half the session timeout without a successful heartbeat, then its tasks' graceful stop.
    eventually(Duration::from_secs(30), "the cut-off worker to stop its work", || {
        nodes[cut].container.logs().contains("giving up this worker's assignment")
    });
    cluster.expire(&nodes[cut], &member);
    let survivor = &nodes[(cut + 1) % 3];
    let after_cut = wait_placed(survivor, Duration::from_millis(DELAY_MS + 90_000), "the cut-off worker's work on the others", |w| w != cut_id);
    eprintln!("after the partition: {after_cut:?}");
    // The new owners write before the worker comes back. RUNNING comes first: a source that
    // moved waits for the cut-off worker's replication session to let the slot go, then
    // streams, and only then do the sinks that moved have rows to write.
    let tables: Vec<String> = cut_sinks.iter().map(|task| format!("t{}", task.trim_start_matches("wh").split('-').next().unwrap())).collect();
    eventually(Duration::from_secs(90), "the new owners writing the cut-off worker's tables", || {
        tables.iter().all(|table| {
            pg.sql("wh", &format!("SELECT count(*) FROM writes WHERE tbl = '{table}' AND addr <> '{cut_addr}' AND at > '{cut_at}'")) != "0"
        })
    });
    std::thread::sleep(Duration::from_secs(2));
    let reconnect_at = pg.sql("wh", "SELECT clock_timestamp()");
    nodes[cut].container.connect(&kafka, &nodes[cut].name);
    for table in &tables {
        // The first write to the table by another worker after the cut marks the takeover.
        let zombie = pg.sql(
            "wh",
            &format!(
                "WITH takeover AS (SELECT min(at) AS at FROM writes WHERE tbl = '{table}' AND addr <> '{cut_addr}' AND at > '{cut_at}')
                 SELECT count(*) FROM writes, takeover WHERE tbl = '{table}' AND addr = '{cut_addr}'
                   AND writes.at > takeover.at AND writes.at < '{reconnect_at}'"
            ),
        );
        let took_over = pg.sql("wh", &format!("SELECT count(*) FROM writes WHERE tbl = '{table}' AND addr <> '{cut_addr}' AND at > '{cut_at}' AND at < '{reconnect_at}'"));
        assert_ne!(took_over, "0", "another worker wrote {table} while {cut_id} was cut off");
        assert_eq!(zombie, "0", "{table} was written by the cut-off worker after another worker took its sink over");
    }
    wait_placed(&nodes[(cut + 1) % 3], Duration::from_secs(90), "everything RUNNING after the partition healed", |_| true);

    // 3. A rolling restart of all three, one at a time.
    wait_settled(&nodes, "a settled group before the rolling restart");
    for i in 0..3 {
        let stopping = Instant::now();
        nodes[i].container.stop(Duration::from_secs(30));
        assert_eq!(nodes[i].container.inspect("{{.State.ExitCode}}"), "0", "{} stopped gracefully", nodes[i].name);
        eprintln!("{} stopped in {:?}", nodes[i].name, stopping.elapsed());
        let other = &nodes[(i + 1) % 3];
        let gone = nodes[i].id();
        wait_placed(other, Duration::from_millis(DELAY_MS + 90_000), "the stopped worker's work elsewhere", |w| w != gone);
        nodes[i].container.start();
        nodes[i].rest = Rest::new(nodes[i].container.published_port(8083));
        nodes[i].rest.wait_for("/", Duration::from_secs(60), |code, _| code == 200);
    }
    wait_placed(&nodes[0], Duration::from_secs(90), "everything RUNNING after the rolling restart", |_| true);

    // 4. A fourth worker gets a share of the work.
    let fourth = cluster.worker("w4");
    let with_fourth = wait_placed(&fourth, Duration::from_millis(DELAY_MS + 90_000), "work on the fourth worker", |_| true);
    eventually(Duration::from_secs(90), "a connector or task on the fourth worker", || {
        placement(&fourth).is_some_and(|p| p.values().any(|w| w == "w4:8083"))
    });
    eprintln!("with a fourth worker: {:?}", placement(&fourth).unwrap_or(with_fourth));
    nodes.push(fourth);

    // Nothing lost: every table in the warehouse equals its source.
    let steps = writer.finish();
    eprintln!("the writer inserted {steps} rows");
    for n in 0..TABLES {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let src = pg.sql("postgres", &format!("SELECT id, v FROM t{n} ORDER BY id"));
            let dst = pg.sql("wh", &format!("SELECT id, v FROM t{n} ORDER BY id"));
            if src == dst {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "t{n} in the warehouse differs from the source: {} vs {} rows",
                src.lines().count(),
                dst.lines().count()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let total: usize = (0..TABLES).map(|n| pg.sql("postgres", &format!("SELECT count(*) FROM t{n}")).parse::<usize>().unwrap()).sum();
    assert_eq!(total as u64, steps, "every insert the writer sent is in the source");
    let rewrites = pg.sql("wh", "SELECT count(*) FROM writes WHERE op = 'UPDATE'");
    eprintln!("{total} rows in the warehouse; {rewrites} rows written again (redelivered after the kill: at least once)");
}
