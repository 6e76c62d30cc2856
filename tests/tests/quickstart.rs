//! The README's first command, `configs/quickstart.sh`, run as a newcomer runs it (with the
//! binary under test instead of a release build, its state in a temporary directory and
//! free ports): the warehouse table fills, ends equal to the source table once the writer
//! stops, and Ctrl-C (SIGINT to the script's process group, as a terminal sends it) stops
//! Postgres, sluice and the script's loops.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_tests::{binary, free_port, Psql};

/// Changes the script's writer makes before it stops (QUICKSTART_CHANGES): one in ten is a
/// delete, six are updates, three are inserts.
const CHANGES: u32 = 40;
const COMPARE: &str = "SELECT id, customer, item, qty, price, status, updated_at FROM orders ORDER BY id";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository root").to_path_buf()
}

/// The running script, in its own process group; interrupted (then killed) on drop.
struct Quickstart {
    child: Child,
    status: Option<ExitStatus>,
    state: PathBuf,
    output: Arc<Mutex<String>>,
}

impl Quickstart {
    fn start(state: &Path, pg_port: u16, rest_port: u16) -> Quickstart {
        let root = repo_root();
        let mut cmd = Command::new(root.join("configs/quickstart.sh"));
        cmd.current_dir(&root)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("SLUICE_BIN", binary())
            .env("QUICKSTART_DIR", state)
            .env("QUICKSTART_PG_PORT", pg_port.to_string())
            .env("QUICKSTART_REST_PORT", rest_port.to_string())
            .env("QUICKSTART_CHANGES", CHANGES.to_string())
            .env_remove("RUST_LOG");
        for (k, _) in std::env::vars() {
            if k.starts_with("CONNECT_") {
                cmd.env_remove(k);
            }
        }
        let mut child = cmd.spawn().expect("run configs/quickstart.sh");
        let output = Arc::new(Mutex::new(String::new()));
        let streams = [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ];
        for stream in streams.into_iter().flatten() {
            let out = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut o = out.lock().expect("output lock");
                    o.push_str(&line);
                    o.push('\n');
                }
            });
        }
        Quickstart { child, status: None, state: state.to_path_buf(), output }
    }

    fn pgid(&self) -> u32 {
        self.child.id()
    }

    fn printed(&self) -> String {
        self.output.lock().expect("output lock").clone()
    }

    /// What the script printed and the end of sluice's log, for failure messages.
    fn report(&self) -> String {
        let log = std::fs::read_to_string(self.state.join("sluice.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
        format!("script output:\n{}\nsluice.log (last lines):\n{}", self.printed(), tail.join("\n"))
    }

    /// The exit status, once the script has exited.
    fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Ctrl-C: SIGINT to the whole process group; whether `kill` succeeded.
    fn interrupt(&self) -> bool {
        Command::new("kill").args(["-INT", "--", &format!("-{}", self.pgid())]).status().is_ok_and(|s| s.success())
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.exited()
    }
}

impl Drop for Quickstart {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.interrupt();
            if self.wait_exit(Duration::from_secs(60)).is_none() {
                let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.pgid())]).status();
                let _ = self.child.wait();
            }
        }
        // A cluster the script could not stop (it runs outside the process group).
        let _ = Command::new("bash")
            .arg(repo_root().join("tests/services/postgres.sh"))
            .arg("stop")
            .arg(self.state.join("postgres"))
            .arg("immediate")
            .status();
    }
}

/// `sql`'s unaligned, tuples-only output in `db`, or None while psql fails (the cluster or
/// the table is not there yet).
fn try_sql(pg: Psql, db: &str, sql: &str) -> Option<String> {
    let out = pg.command(db).args(["-At", "-c", sql]).output().expect("run psql");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn accepts_connections(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_ok()
}

/// Processes still in process group `pgid`, or whose command line names `path`.
fn leftovers(pgid: u32, path: &Path) -> Vec<String> {
    let path = path.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
        let Some((_, after)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let (state, group) = (fields.first().copied().unwrap_or(""), fields.get(2).and_then(|g| g.parse::<u32>().ok()));
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if group == Some(pgid) || cmdline.contains(&path) {
            found.push(format!("{pid} [{state}] {}", cmdline.trim()));
        }
    }
    found
}

/// The row counts in the watcher's lines "… warehouse.orders: N rows …".
fn watched_counts(printed: &str) -> Vec<u64> {
    printed
        .lines()
        .filter_map(|l| l.split_once("warehouse.orders: ").and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok()))
        .collect()
}

#[test]
fn quickstart_mirrors_a_changing_table_and_ctrl_c_stops_everything() {
    let state = tempfile::Builder::new().prefix("sluice-quickstart").tempdir_in("/tmp").expect("a state directory");
    // As root the script's Postgres runs as the 'postgres' user, which must reach the directory.
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod the state directory");
    let (pg_port, rest_port) = (free_port(), free_port());
    assert_ne!(pg_port, rest_port, "two distinct free ports");
    let pg = Psql(pg_port);
    let mut qs = Quickstart::start(state.path(), pg_port, rest_port);

    // Rows reach the warehouse table.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = qs.exited() {
            panic!("the script exited with {status} before rows reached the warehouse\n{}", qs.report());
        }
        let rows = try_sql(pg, "warehouse", "SELECT count(*) FROM orders").and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        if rows > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no rows in warehouse.orders within 120 s\n{}", qs.report());
        std::thread::sleep(Duration::from_millis(500));
    }

    // The writer stops after CHANGES changes; then the warehouse catches up and stays equal.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !qs.printed().contains("writer: done") {
        assert!(qs.exited().is_none(), "the script exited while the writer ran\n{}", qs.report());
        assert!(Instant::now() < deadline, "the writer did not finish {CHANGES} changes within 120 s\n{}", qs.report());
        std::thread::sleep(Duration::from_millis(500));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let (source, warehouse) = loop {
        let source = try_sql(pg, "shop", COMPARE).expect("read shop.orders");
        let warehouse = try_sql(pg, "warehouse", COMPARE).unwrap_or_default();
        if source == warehouse {
            break (source, warehouse);
        }
        assert!(
            Instant::now() < deadline,
            "warehouse.orders did not become equal to shop.orders within 60 s\nsource:\n{source}\nwarehouse:\n{warehouse}\n{}",
            qs.report()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // The mirrored workload had inserts, updates and deletes.
    let rows = warehouse.lines().count() as u64;
    assert_eq!(rows, source.lines().count() as u64);
    let inserted: u64 = try_sql(pg, "shop", "SELECT last_value FROM orders_id_seq").expect("read the sequence").parse().unwrap();
    assert!(inserted > 10, "the writer inserted no rows (sequence at {inserted})");
    assert!(rows < inserted, "no row was deleted: {rows} rows of {inserted} inserted");
    let updated: u64 =
        try_sql(pg, "warehouse", "SELECT count(*) FROM orders WHERE status <> 'new'").expect("count updated rows").parse().unwrap();
    assert!(updated > 0, "no updated row reached the warehouse:\n{warehouse}");
    // The script shows the warehouse table, labelled, with rows in it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !watched_counts(&qs.printed()).iter().any(|&n| n > 0) {
        assert!(Instant::now() < deadline, "the script never printed a non-empty warehouse.orders\n{}", qs.report());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(accepts_connections(rest_port), "sluice's REST port {rest_port} is closed while the script runs\n{}", qs.report());

    // Ctrl-C stops everything the script started.
    assert!(qs.interrupt(), "kill -INT of the script's process group failed");
    let status = qs.wait_exit(Duration::from_secs(60));
    let status = status.unwrap_or_else(|| panic!("the script did not exit within 60 s of SIGINT\n{}", qs.report()));
    assert_eq!(status.code(), Some(130), "the script's exit after SIGINT\n{}", qs.report());
    assert!(!accepts_connections(pg_port), "Postgres still listens on {pg_port} after Ctrl-C\n{}", qs.report());
    assert!(!accepts_connections(rest_port), "sluice still listens on {rest_port} after Ctrl-C\n{}", qs.report());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = leftovers(qs.pgid(), state.path());
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "processes left after Ctrl-C:\n{}\n{}", left.join("\n"), qs.report());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(qs.printed().contains("stopped"), "the script did not say it stopped\n{}", qs.report());
}
