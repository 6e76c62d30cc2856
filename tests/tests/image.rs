//! The container image as the README runs it, on a real Docker engine: built from
//! `docker/Dockerfile` (stage `prebuilt`, around the binary under test), started with
//! `docker run -p … -v VOLUME:/var/lib/sluice/data IMAGE` and `CONNECT_*` variables, next to
//! PostgreSQL in a container on a private network.

use std::time::{Duration, Instant};

use sluice_tests::containers::{docker_ok, sluice_image, PgContainer, Rest, Scope, PG_PASSWORD};
use sluice_tests::{eventually, json};

/// The warehouse side: `items` as the sink will fill it, and a log of every row the sink
/// writes (an insert or an update of the same id), so a change applied twice shows.
const WAREHOUSE_DDL: &str = "
    CREATE TABLE items (id int PRIMARY KEY, name text);
    CREATE TABLE applied (id int NOT NULL, op text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
    CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      INSERT INTO applied (id, op) VALUES (NEW.id, TG_OP); RETURN NULL; END $$;
    CREATE TRIGGER logged AFTER INSERT OR UPDATE ON items FOR EACH ROW EXECUTE FUNCTION log_write();";

fn source_config(slot: &str) -> sluice_tests::Json {
    json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "pg", "database.port": "5432", "database.user": "postgres",
        "database.password": PG_PASSWORD, "database.dbname": "postgres", "topic.prefix": "srv",
        "slot.name": slot, "table.include.list": "public.items", "poll.interval.ms": "100"
    })
}

fn sink_config() -> sluice_tests::Json {
    json!({
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "topics": "srv.public.items", "connection.url": "jdbc:postgresql://pg:5432/wh",
        "connection.username": "postgres", "connection.password": PG_PASSWORD,
        "insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": "true",
        "collection.name.format": "${source.table}"
    })
}

fn wait_equal(pg: &PgContainer, rows: usize) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let src = pg.sql("postgres", "SELECT id, name FROM items ORDER BY id");
        let dst = pg.sql("wh", "SELECT id, name FROM items ORDER BY id");
        if src == dst && src.lines().count() == rows {
            return;
        }
        assert!(Instant::now() < deadline, "the warehouse differs from the source: {} vs {} rows", src.lines().count(), dst.lines().count());
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn the_image_runs_as_the_readme_says_and_keeps_its_place_across_stop_and_start() {
    let scope = Scope::new("image");
    let net = scope.network("net");
    let pg = PgContainer::start(&scope, "pg", &net);
    pg.sql("postgres", "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)");
    pg.sql("postgres", "CREATE DATABASE wh");
    pg.sql("wh", WAREHOUSE_DDL);

    let image = sluice_image();
    let size: u64 = docker_ok(&["image", "inspect", "-f", "{{.Size}}", &image]).parse().unwrap();
    eprintln!("image {image}: {:.1} MB", size as f64 / 1e6);

    // The README's `docker run -p 8083:8083 -v sluice-data:/var/lib/sluice/data sluice`,
    // with a free host port, this test's volume, and worker settings as CONNECT_* variables.
    let volume = format!("{}:/var/lib/sluice/data", scope.name("data"));
    let sluice = scope.run(
        "sluice",
        &net,
        &[
            "-p",
            "127.0.0.1::8083",
            "-v",
            &volume,
            "-e",
            "CONNECT_OFFSET_FLUSH_INTERVAL_MS=500",
            "-e",
            "CONNECT_REST_ADVERTISED_HOST_NAME=sluice.example",
        ],
        &image,
        &[],
    );
    let rest = Rest::new(sluice.published_port(8083));
    let root = rest.wait_for("/", Duration::from_secs(60), |code, _| code == 200);
    assert!(root["version"].is_string(), "{root}");
    assert_eq!(rest.get("/health").0, 200);

    // Non-root, as the image says and as the process really runs.
    assert_eq!(sluice.inspect("{{.Config.User}}"), "10001:10001");
    let uids = docker_ok(&["top", &sluice.name, "-o", "pid,uid"]);
    let uids: Vec<&str> = uids.lines().skip(1).filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert!(!uids.is_empty() && uids.iter().all(|u| *u == "10001"), "processes in the container run as {uids:?}");

    let (code, body) = rest.post("/connectors", &json!({"name": "src", "config": source_config("image_slot")}));
    assert_eq!(code, 201, "{body}");
    let (code, body) = rest.post("/connectors", &json!({"name": "wh", "config": sink_config()}));
    assert_eq!(code, 201, "{body}");
    let status = rest.wait_running("src", 1, Duration::from_secs(60));
    assert_eq!(status["connector"]["worker_id"], "sluice.example:8083", "CONNECT_REST_ADVERTISED_HOST_NAME reached the worker");
    rest.wait_running("wh", 1, Duration::from_secs(60));

    pg.sql("postgres", "INSERT INTO items SELECT g, 'first-' || g FROM generate_series(1, 200) g");
    wait_equal(&pg, 200);

    // The image's HEALTHCHECK runs `sluice health` inside the container.
    eventually(Duration::from_secs(60), "docker to report the container healthy", || {
        sluice.inspect("{{.State.Health.Status}}") == "healthy"
    });

    // docker stop: SIGTERM, a graceful stop (exit code 0, not killed after the grace time).
    let stopping = Instant::now();
    sluice.stop(Duration::from_secs(30));
    let took = stopping.elapsed();
    assert_eq!(sluice.inspect("{{.State.ExitCode}}"), "0", "a graceful exit on SIGTERM; log:\n{}", sluice.logs());
    assert!(took < Duration::from_secs(25), "docker stop took {took:?}");

    // Changes made while it is stopped, then more after it is back.
    pg.sql("postgres", "INSERT INTO items SELECT g, 'while-stopped-' || g FROM generate_series(201, 300) g");
    sluice.start();
    let rest = Rest::new(sluice.published_port(8083));
    rest.wait_for("/health", Duration::from_secs(60), |code, _| code == 200);
    rest.wait_running("src", 1, Duration::from_secs(60));
    rest.wait_running("wh", 1, Duration::from_secs(60));
    pg.sql("postgres", "INSERT INTO items SELECT g, 'after-' || g FROM generate_series(301, 400) g");
    wait_equal(&pg, 400);

    // Nothing lost and nothing applied twice: every id was written to the warehouse once,
    // by an insert, across the stop and start.
    let twice = pg.sql("wh", "SELECT id, count(*), string_agg(op, ',') FROM applied GROUP BY id HAVING count(*) <> 1 OR bool_or(op <> 'INSERT') ORDER BY id LIMIT 10");
    assert!(twice.is_empty(), "rows written more than once (id|writes|ops):\n{twice}");
    assert_eq!(pg.sql("wh", "SELECT count(DISTINCT id) FROM applied"), "400");
    assert!(!sluice.logs().contains(PG_PASSWORD), "the password appears in the container's log");
}

/// `docker compose` (Compose v2) where the client has it, else Compose v1's `docker-compose`.
fn compose_command() -> Vec<String> {
    let v2 = std::process::Command::new("docker").args(["compose", "version"]).output().is_ok_and(|o| o.status.success());
    if v2 {
        vec!["docker".into(), "compose".into()]
    } else {
        vec!["docker-compose".into()]
    }
}

/// The quick start of `docker/compose.yaml` as the README runs it, with the images made on
/// this machine in place of the registry's (POSTGRES_IMAGE, SLUICE_IMAGE): the writer's
/// changes reach the warehouse table.
#[test]
fn the_compose_quick_start_streams_a_changing_table_into_the_warehouse() {
    let scope = Scope::new("compose");
    let sluice = sluice_image();
    let postgres = sluice_tests::containers::image("postgres", &[]);
    let port = sluice_tests::free_port();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../docker/compose.yaml");
    let base = compose_command();
    let compose = |args: &[&str]| -> String {
        let out = std::process::Command::new(&base[0])
            .args(&base[1..])
            .args(["-p", &scope.prefix, "-f", file])
            .args(args)
            .env("POSTGRES_IMAGE", &postgres)
            .env("SLUICE_IMAGE", &sluice)
            .env("SLUICE_REST_PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run docker compose");
        assert!(out.status.success(), "compose {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    compose(&["up", "-d", "--no-build"]);
    // None until the table exists (the sink creates it in the warehouse).
    let psql = |service: &str, db: &str, sql: &str| -> Option<String> {
        let id = compose(&["ps", "-q", service]);
        let (code, out, _) = sluice_tests::containers::docker(&["exec", &id, "psql", "-U", "postgres", "-d", db, "-XAtc", sql]);
        (code == 0).then(|| out.trim().to_owned())
    };

    let rest = Rest::new(port);
    rest.wait_for("/", Duration::from_secs(60), |code, _| code == 200);
    rest.wait_running("orders-source", 1, Duration::from_secs(90));
    rest.wait_running("orders-warehouse", 1, Duration::from_secs(90));
    let query = "SELECT id, customer, amount::numeric(10,2), status FROM orders ORDER BY id";
    eventually(Duration::from_secs(90), "the writer's new orders in the warehouse", || {
        // The seed rows have ids 1 to 20; the writer's come after them.
        let rows = psql("warehouse", "warehouse", "SELECT count(*) FROM orders WHERE id > 20");
        rows.and_then(|r| r.parse::<u32>().ok()).is_some_and(|n| n >= 3)
    });
    compose(&["stop", "writer"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let src = psql("source-db", "postgres", query).expect("the source table");
        let dst = psql("warehouse", "warehouse", query).unwrap_or_default();
        if src == dst {
            eprintln!("the warehouse holds the source's {} orders", src.lines().count());
            break;
        }
        assert!(Instant::now() < deadline, "the warehouse differs from the source:\nsource:\n{src}\nwarehouse:\n{dst}");
        std::thread::sleep(Duration::from_millis(500));
    }
    compose(&["down", "-v"]);
}
