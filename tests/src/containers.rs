//! Containers for the tests that run sluice as users do: the image built from
//! `docker/Dockerfile`, Postgres and a Kafka-protocol broker, on private Docker networks made
//! by the test. Images come from `tests/services/docker.sh` (made on this machine, cached by
//! their inputs). Everything a [`Scope`] creates carries its name prefix and is removed when
//! it drops, also when the test fails.
//!
//! The tests reach containers only through ports published on 127.0.0.1 and `docker exec`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{service_script, Json};

/// `docker ARGS…` to completion: (exit code, stdout, stderr).
pub fn docker(args: &[&str]) -> (i32, String, String) {
    let out = Command::new("docker").args(args).stdin(Stdio::null()).output().expect("run docker (is the client installed?)");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `docker ARGS…`, which must succeed; its trimmed stdout.
pub fn docker_ok(args: &[&str]) -> String {
    let (code, out, err) = docker(args);
    assert_eq!(code, 0, "docker {} failed: {err}{out}", args.join(" "));
    out.trim().to_owned()
}

/// An image made by `tests/services/docker.sh WHAT ARGS…`; returns its tag.
pub fn image(what: &str, args: &[&str]) -> String {
    let out = Command::new("bash").arg(service_script("docker.sh")).arg(what).args(args).output().expect("run docker.sh");
    assert!(
        out.status.success(),
        "docker.sh {what} failed (is the Docker engine running?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().last().expect("docker.sh prints the tag").trim().to_owned()
}

/// The sluice image around the binary under test.
pub fn sluice_image() -> String {
    image("sluice", &[crate::binary().to_str().expect("a UTF-8 path")])
}

/// Names everything one test creates, and removes it all on drop.
pub struct Scope {
    pub prefix: String,
}

impl Scope {
    pub fn new(label: &str) -> Scope {
        let scope = Scope { prefix: format!("sluice-it-{label}-{}", std::process::id()) };
        scope.clean();
        scope
    }

    pub fn name(&self, part: &str) -> String {
        format!("{}-{part}", self.prefix)
    }

    /// A user-defined bridge network `PREFIX-part`; returns its name.
    pub fn network(&self, part: &str) -> String {
        let name = self.name(part);
        docker_ok(&["network", "create", &name]);
        name
    }

    /// `docker run -d --name PREFIX-part ARGS… IMAGE CMD…`, on `network` under the alias `part`.
    pub fn run(&self, part: &str, network: &str, args: &[&str], image: &str, cmd: &[&str]) -> Container {
        let name = self.name(part);
        let mut all = vec!["run", "-d", "--name", &name, "--network", network, "--network-alias", part, "--hostname", part];
        all.extend_from_slice(args);
        all.push(image);
        all.extend_from_slice(cmd);
        docker_ok(&all);
        Container { name }
    }

    /// `docker create` with the same arguments as [`Scope::run`]: a container to connect to
    /// more networks before it starts.
    pub fn create(&self, part: &str, network: &str, args: &[&str], image: &str, cmd: &[&str]) -> Container {
        let name = self.name(part);
        let mut all = vec!["create", "--name", &name, "--network", network, "--network-alias", part, "--hostname", part];
        all.extend_from_slice(args);
        all.push(image);
        all.extend_from_slice(cmd);
        docker_ok(&all);
        Container { name }
    }

    fn clean(&self) {
        let _ = Command::new("bash").arg(service_script("docker.sh")).arg("clean").arg(&self.prefix).status();
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Leave the evidence in the test output before it goes.
            let (_, names, _) = docker(&["ps", "-a", "--filter", &format!("name=^/{}", self.prefix), "--format", "{{.Names}}"]);
            for name in names.lines() {
                let (_, out, err) = docker(&["logs", "--tail", "40", name]);
                eprintln!("--- last log lines of {name} ---\n{out}{err}");
            }
        }
        self.clean();
    }
}

/// A container by name.
#[derive(Clone, Debug)]
pub struct Container {
    pub name: String,
}

impl Container {
    /// `docker exec NAME ARGS…`, which must succeed; its trimmed stdout.
    pub fn exec(&self, args: &[&str]) -> String {
        let mut all = vec!["exec", self.name.as_str()];
        all.extend_from_slice(args);
        docker_ok(&all)
    }

    /// The host port on 127.0.0.1 that `port`/tcp is published on.
    pub fn published_port(&self, port: u16) -> u16 {
        let out = docker_ok(&["port", &self.name, &format!("{port}/tcp")]);
        let line = out.lines().find(|l| l.starts_with("127.0.0.1:")).unwrap_or_else(|| panic!("{port} not published on 127.0.0.1: {out}"));
        line.rsplit(':').next().unwrap().parse().expect("a port number")
    }

    pub fn logs(&self) -> String {
        let (_, out, err) = docker(&["logs", &self.name]);
        crate::strip_ansi(&format!("{out}{err}"))
    }

    /// `docker inspect -f FORMAT NAME`.
    pub fn inspect(&self, format: &str) -> String {
        docker_ok(&["inspect", "-f", format, &self.name])
    }

    /// SIGKILL (`docker kill`): no chance to flush or leave the group.
    pub fn kill(&self) {
        docker_ok(&["kill", &self.name]);
    }

    /// SIGTERM, SIGKILL after `grace` (`docker stop -t`).
    pub fn stop(&self, grace: Duration) {
        docker_ok(&["stop", "-t", &grace.as_secs().to_string(), &self.name]);
    }

    pub fn start(&self) {
        docker_ok(&["start", &self.name]);
    }

    pub fn disconnect(&self, network: &str) {
        docker_ok(&["network", "disconnect", network, &self.name]);
    }

    pub fn connect(&self, network: &str, alias: &str) {
        docker_ok(&["network", "connect", "--alias", alias, network, &self.name]);
    }

    /// The container's address on `network`.
    pub fn address(&self, network: &str) -> String {
        self.inspect(&format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"))
    }
}

/// PostgreSQL 15 in a container (the image of `docker.sh postgres`), with logical
/// replication on; `postgres` is its superuser with password [`PG_PASSWORD`].
pub struct PgContainer {
    pub container: Container,
}

pub const PG_PASSWORD: &str = "pg-secret-7";

impl PgContainer {
    pub fn start(scope: &Scope, part: &str, network: &str) -> PgContainer {
        let image = image("postgres", &[]);
        let env = format!("POSTGRES_PASSWORD={PG_PASSWORD}");
        // A walsender whose client vanished with its container frees the slot after 10 s
        // instead of Postgres' default minute.
        let settings = ["wal_level=logical", "max_wal_senders=20", "max_replication_slots=20", "wal_sender_timeout=10s"];
        let cmd: Vec<&str> = settings.iter().flat_map(|s| ["-c", s]).collect();
        let container = scope.run(part, network, &["-e", &env], &image, &cmd);
        let pg = PgContainer { container };
        crate::eventually(Duration::from_secs(60), "postgres accepting connections in its container", || {
            docker(&["exec", &pg.container.name, "pg_isready", "-q", "-h", "127.0.0.1", "-U", "postgres"]).0 == 0
        });
        pg
    }

    /// `psql` in the container for database `db`, stopping at the first error.
    pub fn psql(&self, db: &str, interactive: bool) -> Command {
        let mut c = Command::new("docker");
        c.arg("exec");
        if interactive {
            c.arg("-i");
        }
        // The local socket: trusted, as in the official image.
        c.args([&self.container.name, "psql", "-U", "postgres", "-d", db, "-X", "-q", "-v", "ON_ERROR_STOP=1"]);
        c
    }

    /// Runs SQL in `db`; its unaligned, tuples-only output, trimmed.
    pub fn sql(&self, db: &str, sql: &str) -> String {
        let out = self.psql(db, false).args(["-At", "-c", sql]).output().expect("run psql in the container");
        assert!(out.status.success(), "psql failed on {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// Kafka Connect's REST API of a worker in a container, through its published port.
pub struct Rest {
    pub port: u16,
    agent: ureq::Agent,
}

impl Rest {
    pub fn new(port: u16) -> Rest {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(10))).build().into();
        Rest { port, agent }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn finish(resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Option<(u16, Json)> {
        let mut resp = resp.ok()?;
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let body = if text.trim().is_empty() { Json::Null } else { serde_json::from_str(&text).unwrap_or(Json::String(text)) };
        Some((status, body))
    }

    /// None while the worker does not answer (starting, stopped, cut off).
    pub fn try_get(&self, path: &str) -> Option<(u16, Json)> {
        Self::finish(self.agent.get(self.url(path)).call())
    }

    pub fn get(&self, path: &str) -> (u16, Json) {
        self.try_get(path).unwrap_or_else(|| panic!("no answer from 127.0.0.1:{} for {path}", self.port))
    }

    pub fn post(&self, path: &str, body: &Json) -> (u16, Json) {
        Self::finish(self.agent.post(self.url(path)).header("Content-Type", "application/json").send(body.to_string()))
            .unwrap_or_else(|| panic!("no answer from 127.0.0.1:{} for POST {path}", self.port))
    }

    /// POST, retried while the cluster answers 409 for a rebalance or the worker does not
    /// answer yet (as Connect's clients do), for up to a minute.
    pub fn post_settled(&self, path: &str, body: &Json) -> (u16, Json) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let reply = Self::finish(self.agent.post(self.url(path)).header("Content-Type", "application/json").send(body.to_string()));
            match reply {
                Some((409, _)) | None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(300)),
                Some(reply) => return reply,
                None => panic!("no answer from 127.0.0.1:{} for POST {path}", self.port),
            }
        }
    }

    /// Polls `GET path` until `check` accepts the answer.
    pub fn wait_for(&self, path: &str, timeout: Duration, check: impl Fn(u16, &Json) -> bool) -> Json {
        let deadline = Instant::now() + timeout;
        loop {
            let last = self.try_get(path);
            if let Some((code, body)) = &last {
                if check(*code, body) {
                    return body.clone();
                }
            }
            assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting on {path}; last answer {last:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the connector and all its (≥ `tasks`) tasks are RUNNING.
    pub fn wait_running(&self, name: &str, tasks: usize, timeout: Duration) -> Json {
        self.wait_for(&format!("/connectors/{name}/status"), timeout, |code, b| {
            code == 200
                && b["connector"]["state"] == "RUNNING"
                && b["tasks"].as_array().is_some_and(|t| t.len() >= tasks && t.iter().all(|t| t["state"] == "RUNNING"))
        })
    }
}
