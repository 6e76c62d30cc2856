//! Drives the real `sluice` binary for end-to-end tests: starts a worker on a free
//! loopback port with its own data directory, talks to its REST API, and stops it with
//! SIGTERM or SIGKILL.
//!
//! The binary is `$SLUICE_BIN`, else `sluice` beside the test executable's target
//! directory (`tests/run.sh` builds it first).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use serde_json::{json, Value as Json};

pub mod browser;
pub mod containers;
pub mod fault_proxy;
pub mod java_connect;
pub use fault_proxy::{Fault, FaultProxy};

/// The sluice binary under test.
pub fn binary() -> PathBuf {
    if let Ok(p) = std::env::var("SLUICE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>/sluice
    let bin = exe.parent().and_then(Path::parent).expect("target dir").join("sluice");
    assert!(bin.exists(), "{} does not exist: build it first (cargo build -p sluice) or set SLUICE_BIN", bin.display());
    bin
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port").local_addr().expect("local addr").port()
}

/// How a worker is started.
#[derive(Clone, Debug)]
pub enum Launch {
    /// `sluice standalone DIR/worker.properties [connector files]` with these extra properties.
    Properties { props: Vec<(String, String)>, connector_files: Vec<PathBuf> },
    /// `sluice distributed DIR/worker.properties` with these properties (plus the listener).
    Distributed { props: Vec<(String, String)> },
    /// The container entrypoint: `sluice` with no arguments, configured only by these
    /// environment variables.
    EnvOnly { env: Vec<(String, String)> },
}

pub struct Worker {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    launch: Launch,
    /// Everything the worker printed (stdout and stderr), for failure messages and log checks.
    pub output: Arc<Mutex<String>>,
    agent: ureq::Agent,
    /// Environment variables the worker gets on top of the test's (see [`Worker::launch_with`]).
    env: Vec<(String, String)>,
}

/// What [`Worker::launch_with`] adds to a launch.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Environment variables for the worker process.
    pub env: Vec<(String, String)>,
    /// An `Authorization` header value every request of this `Worker` carries (the health
    /// wait included): for workers whose REST API requires credentials.
    pub authorization: Option<String>,
}

/// A new bearer token from `sluice rest-token NAME ROLE`: (the token, printed once on stdout;
/// its line for the tokens file, on stderr).
pub fn rest_token(name: &str, role: &str) -> (String, String) {
    let (code, token, err) = Worker::cli(&["rest-token", name, role]);
    assert_eq!(code, 0, "sluice rest-token {name} {role}: {err}");
    (token.trim().to_owned(), err.lines().last().unwrap_or_default().trim().to_owned())
}

/// `Basic <base64(user:password)>`.
pub fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

impl Worker {
    /// Starts a worker whose data lives in `dir/data` and waits until `/health` says ready.
    pub fn start(dir: &Path, props: &[(&str, &str)]) -> Worker {
        Self::launch(
            dir,
            Launch::Properties {
                props: props.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                connector_files: Vec::new(),
            },
        )
    }

    pub fn launch(dir: &Path, launch: Launch) -> Worker {
        Self::launch_with(dir, launch, Extras::default())
    }

    /// [`Worker::launch`] with environment variables and credentials.
    pub fn launch_with(dir: &Path, launch: Launch, extras: Extras) -> Worker {
        let mut config = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(60)));
        if let Some(value) = extras.authorization {
            config = config.middleware(move |mut req: ureq::http::Request<ureq::SendBody>, next: ureq::middleware::MiddlewareNext| {
                req.headers_mut().insert("authorization", value.parse().expect("a header value"));
                next.handle(req)
            });
        }
        let agent: ureq::Agent = config.build().into();
        let mut w =
            Worker { child: None, port: free_port(), dir: dir.to_path_buf(), launch, output: Arc::default(), agent, env: extras.env };
        w.spawn();
        w
    }

    fn spawn(&mut self) {
        std::fs::create_dir_all(&self.dir).expect("worker dir");
        let mut cmd = Command::new(binary());
        cmd.current_dir(&self.dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.env_remove("RUST_LOG");
        for (k, _) in std::env::vars() {
            if k.starts_with("CONNECT_") {
                cmd.env_remove(k);
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        match &self.launch {
            Launch::Properties { props, connector_files } => {
                // Most tests check Kafka Connect's own contract, where a failed task stays
                // FAILED: their workers run with `restart.policy=never`. Tests of the
                // automatic restarts pass `restart.policy=on-failure` (a later key wins).
                let mut text = format!(
                    "listeners=http://127.0.0.1:{}\ndata.dir={}\noffset.flush.interval.ms=1000\nrestart.policy=never\n",
                    self.port,
                    self.dir.join("data").display()
                );
                // `{port}` in a value is the worker's REST port (a later key wins).
                for (k, v) in props {
                    text.push_str(&format!("{k}={}\n", v.replace("{port}", &self.port.to_string())));
                }
                let file = self.dir.join("worker.properties");
                std::fs::write(&file, text).expect("write worker.properties");
                cmd.arg("standalone").arg(&file).args(connector_files);
            }
            Launch::Distributed { props } => {
                let mut text = format!("listeners=http://127.0.0.1:{}\noffset.flush.interval.ms=1000\nrestart.policy=never\n", self.port);
                // `{port}` in a value is the worker's REST port (a later key wins).
                for (k, v) in props {
                    text.push_str(&format!("{k}={}\n", v.replace("{port}", &self.port.to_string())));
                }
                let file = self.dir.join("worker.properties");
                std::fs::write(&file, text).expect("write worker.properties");
                cmd.arg("distributed").arg(&file);
            }
            Launch::EnvOnly { env } => {
                cmd.env("CONNECT_LISTENERS", format!("http://127.0.0.1:{}", self.port));
                for (k, v) in env {
                    cmd.env(k, v);
                }
            }
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", binary().display()));
        for stream in [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let out = self.output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut o = out.lock().expect("output lock");
                    o.push_str(&line);
                    o.push('\n');
                }
            });
        }
        self.child = Some(child);
        self.wait_healthy(Duration::from_secs(60));
    }

    /// Waits until `GET /health` answers 200, or panics with the worker's output.
    pub fn wait_healthy(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("sluice exited with {status} before becoming healthy; output:\n{}", self.output());
            }
            if let Ok(mut resp) = self.agent.get(self.url("/health")).call() {
                if resp.status().as_u16() == 200 {
                    let _ = resp.body_mut().read_to_string();
                    return;
                }
            }
            assert!(Instant::now() < deadline, "sluice did not become healthy in {timeout:?}; output:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn output(&self) -> String {
        self.output.lock().expect("output lock").clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn finish(resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, Json) {
        let mut resp = resp.expect("HTTP request to sluice failed");
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let body = if text.trim().is_empty() { Json::Null } else { serde_json::from_str(&text).unwrap_or(Json::String(text)) };
        (status, body)
    }

    pub fn get(&self, path: &str) -> (u16, Json) {
        Self::finish(self.agent.get(self.url(path)).call())
    }

    /// A GET whose answer is not JSON: status, content type and body.
    pub fn get_text(&self, path: &str) -> (u16, String, String) {
        let mut resp = self.agent.get(self.url(path)).call().unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let ctype = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let body = resp.body_mut().read_to_string().unwrap_or_else(|e| panic!("GET {path}: {e}"));
        (resp.status().as_u16(), ctype, body)
    }

    pub fn delete(&self, path: &str) -> (u16, Json) {
        Self::finish(self.agent.delete(self.url(path)).call())
    }

    pub fn post(&self, path: &str, body: &Json) -> (u16, Json) {
        Self::finish(self.agent.post(self.url(path)).header("Content-Type", "application/json").send(body.to_string()))
    }

    pub fn post_empty(&self, path: &str) -> (u16, Json) {
        Self::finish(self.agent.post(self.url(path)).send_empty())
    }

    pub fn put(&self, path: &str, body: &Json) -> (u16, Json) {
        Self::finish(self.agent.put(self.url(path)).header("Content-Type", "application/json").send(body.to_string()))
    }

    pub fn put_empty(&self, path: &str) -> (u16, Json) {
        Self::finish(self.agent.put(self.url(path)).send_empty())
    }

    pub fn patch(&self, path: &str, body: &Json) -> (u16, Json) {
        Self::finish(self.agent.patch(self.url(path)).header("Content-Type", "application/json").send(body.to_string()))
    }

    /// Sends raw bytes (e.g. malformed JSON).
    pub fn send_raw(&self, method: &str, path: &str, body: &str) -> (u16, Json) {
        let url = self.url(path);
        let r = match method {
            "POST" => self.agent.post(url).header("Content-Type", "application/json").send(body),
            "PUT" => self.agent.put(url).header("Content-Type", "application/json").send(body),
            "PATCH" => self.agent.patch(url).header("Content-Type", "application/json").send(body),
            other => panic!("unsupported method {other}"),
        };
        Self::finish(r)
    }

    /// Any method, optional `Content-Type` and body; the answer with its headers (for
    /// `Location`, or for requests the helpers above cannot make).
    pub fn call(&self, method: &str, path: &str, content_type: Option<&str>, body: &str) -> Reply {
        let headers: Vec<(&str, &str)> = content_type.map(|ct| ("Content-Type", ct)).into_iter().collect();
        self.call_with(method, path, &headers, body)
    }

    /// [`Worker::call`] with any request headers.
    pub fn call_with(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut req = ureq::http::Request::builder().method(method).uri(self.url(path));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(body.to_owned()).expect("a valid request");
        let mut resp = self.agent.run(req).expect("HTTP request to sluice failed");
        let status = resp.status().as_u16();
        let headers = resp.headers().iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned())).collect();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let body = if text.trim().is_empty() { Json::Null } else { serde_json::from_str(&text).unwrap_or(Json::String(text)) };
        Reply { status, headers, body }
    }

    /// Polls `GET path` until `check` accepts the body.
    pub fn wait_for(&self, path: &str, timeout: Duration, check: impl Fn(u16, &Json) -> bool) -> Json {
        let deadline = Instant::now() + timeout;
        loop {
            let (code, body) = self.get(path);
            if check(code, &body) {
                return body;
            }
            assert!(Instant::now() < deadline, "timed out waiting on {path}; last answer {code} {body}\noutput:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// [`eventually`], but a timeout shows the end of this worker's log.
    pub fn eventually(&self, timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        while !f() {
            if Instant::now() >= deadline {
                let log = strip_ansi(&self.output());
                let lines: Vec<&str> = log.lines().collect();
                panic!(
                    "timed out after {timeout:?} waiting for {what}; the worker's last lines:\n{}",
                    lines[lines.len().saturating_sub(60)..].join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the connector and all its (≥ `tasks`) tasks are RUNNING.
    /// Connectors `src` (FileStreamSource: `input` into `topic`, with `source_extra` keys)
    /// and `sink` (FileStreamSink: `topic` into `output`), both RUNNING.
    pub fn start_file_pipeline(&self, input: &Path, output: &Path, topic: &str, source_extra: &[(&str, &str)]) {
        let mut source = json!({"connector.class": "FileStreamSource", "file": input.to_str().unwrap(), "topic": topic});
        for (k, v) in source_extra {
            source[*k] = json!(v);
        }
        let (code, body) = self.post("/connectors", &json!({"name": "src", "config": source}));
        assert_eq!(code, 201, "{body}");
        let sink = json!({"connector.class": "FileStreamSink", "file": output.to_str().unwrap(), "topics": topic});
        let (code, body) = self.post("/connectors", &json!({"name": "sink", "config": sink}));
        assert_eq!(code, 201, "{body}");
        self.wait_running("src", 1);
        self.wait_running("sink", 1);
    }

    /// Starts sampling the status of `connector` every 100 ms (see [`StatusWatch`]): a
    /// sighting per task trace.
    pub fn watch_status(&self, connector: &str) -> StatusWatch {
        StatusWatch::start(self.url(&format!("/connectors/{connector}/status")), |_, status| {
            status["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| {
                    let trace = t["trace"].as_str()?.lines().next().unwrap_or("").to_owned();
                    Some((t["id"].as_u64().unwrap_or(0), t["state"].as_str().unwrap_or("").to_owned(), trace))
                })
                .collect()
        })
    }

    /// Starts sampling `GET /health` every 100 ms: a sighting per answer other than 200
    /// (`state`: the HTTP status and the worker status, `trace`: its message).
    pub fn watch_health(&self) -> StatusWatch {
        StatusWatch::start(self.url("/health"), |code, health| match code {
            200 => Vec::new(),
            _ => vec![(
                0,
                format!("{code} {}", health["status"].as_str().unwrap_or("")),
                health["message"].as_str().unwrap_or("").to_owned(),
            )],
        })
    }

    pub fn wait_running(&self, name: &str, tasks: usize) -> Json {
        self.wait_for(&format!("/connectors/{name}/status"), Duration::from_secs(30), |code, b| {
            code == 200
                && b["connector"]["state"] == "RUNNING"
                && b["tasks"].as_array().is_some_and(|t| t.len() >= tasks && t.iter().all(|t| t["state"] == "RUNNING"))
        })
    }

    /// `PUT /connectors/{name}/stop` (204), then waits until the connector is STOPPED.
    pub fn stop_connector(&self, name: &str) -> Json {
        let (code, body) = self.put(&format!("/connectors/{name}/stop"), &json!({}));
        assert_eq!(code, 204, "PUT /connectors/{name}/stop: {body}");
        self.wait_for(&format!("/connectors/{name}/status"), Duration::from_secs(30), |_, b| b["connector"]["state"] == "STOPPED")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL: no chance to flush or commit anything.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = c.try_wait().expect("wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("sluice did not exit within 30 s of SIGTERM; output:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the same worker again (same port, data and files).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the worker before restarting it");
        self.spawn();
    }

    /// Runs `sluice ARGS…` to completion and returns (exit code, stdout, stderr).
    pub fn cli(args: &[&str]) -> (i32, String, String) {
        let out = Command::new(binary()).args(args).output().expect("run sluice");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// `sluice MODE DIR/worker.properties` with the properties `text`, expected to exit non-zero
/// within `timeout`: its output (stdout, then stderr).
pub fn failing_start(mode: &str, dir: &Path, text: &str, env: &[(&str, &str)], timeout: Duration) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("worker.properties");
    std::fs::write(&file, text).unwrap();
    let mut cmd = Command::new(binary());
    cmd.arg(mode).arg(&file).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped()).env_remove("KAFKA_OPTS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run sluice");
    let deadline = Instant::now() + timeout;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the worker kept running on {text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the worker exited cleanly on {text}");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Starts `sluice standalone` on `props` (after a listener and `data.dir` of its own) and
/// expects it to exit non-zero within 30 s; its output.
pub fn refuses_to_start(dir: &Path, props: &str, env: &[(&str, &str)]) -> String {
    let text = format!("listeners=http://127.0.0.1:{}\ndata.dir={}\n{props}", free_port(), dir.join("data").display());
    failing_start("standalone", dir, &text, env, Duration::from_secs(30))
}

/// A whole HTTP answer, from [`Worker::call`].
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// Names are lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Json,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Lines of a file (empty when it does not exist yet).
pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).map(|s| s.lines().map(str::to_owned).collect()).unwrap_or_default()
}

/// Waits until `f` returns true.
/// The errors a `config/validate` answer gives for `key`.
pub fn validate_errors_of(infos: &Json, key: &str) -> Vec<String> {
    infos["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["value"]["name"] == key)
        .flat_map(|c| c["value"]["errors"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_owned()))
        .collect()
}

/// The records of `topic` in the embedded log under `data` (`sluice topics consume`), one
/// JSON object each; none while the topic does not exist yet. Any other failure fails the test.
pub fn consume_topic(data: &Path, topic: &str) -> Vec<Json> {
    let (code, out, err) = Worker::cli(&["topics", "consume", topic, "--data-dir", data.to_str().expect("utf-8 path"), "--from-beginning"]);
    if code != 0 {
        assert!(err.contains("does not exist"), "sluice topics consume {topic} failed: {err}");
        return Vec::new();
    }
    out.lines().map(|l| serde_json::from_str(l).expect("a JSON record")).collect()
}

pub fn eventually(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Kafka-protocol broker started with `tests/services/kafka.sh` (noida-db unless
/// `SLUICE_TEST_BROKER` says `tansu`), stopped on drop. A broker that does not start fails
/// the test.
pub struct KafkaBroker {
    dir: PathBuf,
    pub bootstrap: String,
    /// The client settings a secured broker needs (`security.protocol`, `ssl.ca.location`,
    /// `sasl.mechanism`, `sasl.username`, `sasl.password`); empty for a plain one.
    pub security: Vec<(String, String)>,
}

impl KafkaBroker {
    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("services/kafka.sh")
    }

    pub fn start(dir: &Path) -> KafkaBroker {
        Self::start_kind(dir, &std::env::var("SLUICE_TEST_BROKER").unwrap_or_else(|_| "noida".to_owned()))
    }

    /// A broker of this kind (`noida` or `tansu`, see tests/services/kafka.sh).
    pub fn start_kind(dir: &Path, kind: &str) -> KafkaBroker {
        Self::start_with(dir, kind, "")
    }

    /// tansu behind kafka.sh's TLS/SASL proxy: `security` is `ssl`, `sasl_plaintext` or
    /// `sasl_ssl` (see `KAFKA_SECURITY` in tests/services/kafka.sh: tansu itself serves
    /// neither TLS nor SASL, so these tests check the clients' TLS and SASL against that
    /// proxy, and the Kafka protocol behind it against tansu).
    pub fn start_secured(dir: &Path, security: &str) -> KafkaBroker {
        Self::start_with(dir, "tansu", security)
    }

    fn start_with(dir: &Path, kind: &str, security: &str) -> KafkaBroker {
        let port = free_port();
        let out = Command::new(Self::script())
            .arg("start")
            .arg(dir)
            .arg(port.to_string())
            .arg(kind)
            .env("KAFKA_SECURITY", security)
            .output()
            .expect("run tests/services/kafka.sh");
        assert!(out.status.success(), "the test broker did not start:\n{}", String::from_utf8_lossy(&out.stderr));
        let security = String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        KafkaBroker { dir: dir.to_path_buf(), bootstrap: format!("127.0.0.1:{port}"), security }
    }

    /// One of [`KafkaBroker::security`]'s values.
    pub fn security_setting(&self, key: &str) -> &str {
        self.security.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("the broker printed no {key}"))
    }
}

impl KafkaBroker {
    /// Removes `member_id` from the group `group` with a LeaveGroup (v1) sent on the
    /// member's behalf, and returns the broker's error code (0: removed). This is what a
    /// real broker does by itself when a member stops heartbeating for `session.timeout.ms`;
    /// noida 0.2.3 never does (tests/services/kafka-quirks/README.md), so tests of a
    /// SIGKILLed worker call this, after the session timeout, in place of that expiry.
    /// The broker must be its own group coordinator (one broker).
    pub fn expire_group_member(&self, group: &str, member_id: &str) -> i16 {
        leave_group_for(&self.bootstrap, group, member_id)
    }
}

/// Sends LeaveGroup (v1) for `member_id` of `group` to the broker at `bootstrap`, which must be
/// the group's coordinator, and returns its error code (0: removed). See
/// [`KafkaBroker::expire_group_member`] for why tests do this.
pub fn leave_group_for(bootstrap: &str, group: &str, member_id: &str) -> i16 {
    use std::io::{Read, Write};
    fn put_str(buf: &mut Vec<u8>, s: &str) {
        buf.extend_from_slice(&(s.len() as i16).to_be_bytes());
        buf.extend_from_slice(s.as_bytes());
    }
    // Header v1 (api key 13 LeaveGroup, version 1, correlation id, client id), body v1.
    let mut msg = Vec::new();
    msg.extend_from_slice(&13i16.to_be_bytes());
    msg.extend_from_slice(&1i16.to_be_bytes());
    msg.extend_from_slice(&7i32.to_be_bytes());
    put_str(&mut msg, "sluice-tests-session-expiry");
    put_str(&mut msg, group);
    put_str(&mut msg, member_id);
    let mut stream = std::net::TcpStream::connect(bootstrap).expect("connect to the test broker");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
    stream.write_all(&(msg.len() as i32).to_be_bytes()).expect("send LeaveGroup");
    stream.write_all(&msg).expect("send LeaveGroup");
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).expect("LeaveGroup response");
    let mut resp = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut resp).expect("LeaveGroup response");
    // correlation id, throttle time, error code
    assert_eq!(i32::from_be_bytes(resp[0..4].try_into().unwrap()), 7, "LeaveGroup response correlation id");
    i16::from_be_bytes(resp[8..10].try_into().unwrap())
}

/// `text` without ANSI colour sequences (worker logs are coloured).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        let _ = Command::new(Self::script()).arg("stop").arg(&self.dir).status();
    }
}

/// The numbered lines `line-000000`, `line-000001`, … that [`LineWriter`] appends.
pub fn numbered_lines(total: usize) -> Vec<String> {
    (0..total).map(|i| format!("line-{i:06}")).collect()
}

/// Appends [`numbered_lines`] to a file in chunks of 100, pausing between chunks, on its own
/// thread: a source that keeps growing while a test kills and restarts the worker.
pub struct LineWriter {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LineWriter {
    pub fn start(path: &Path, total: usize, pause: Duration) -> Self {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (path, flag) = (path.to_path_buf(), done.clone());
        let thread = std::thread::spawn(move || {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("open the input file");
            for chunk in numbered_lines(total).chunks(100) {
                let text: String = chunk.iter().map(|l| format!("{l}\n")).collect();
                f.write_all(text.as_bytes()).expect("append to the input file");
                std::thread::sleep(pause);
            }
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        Self { done, thread: Some(thread) }
    }

    pub fn is_done(&self) -> bool {
        self.done.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            t.join().expect("the line writer panicked");
        }
    }
}

/// Asserts that `delivered`, duplicates set aside, is exactly [`numbered_lines`]`(total)` in
/// order (`what` names where the lines were read).
pub fn assert_first_deliveries(delivered: &[String], total: usize, what: &str) {
    let expected = numbered_lines(total);
    let firsts = first_deliveries(delivered);
    assert!(
        firsts == expected,
        "{what} holds every line, first deliveries in input order: {} unique of {total}, first difference at {:?}",
        firsts.len(),
        firsts.iter().zip(&expected).position(|(a, b)| a != b)
    );
}

/// Each distinct item at its first occurrence, in order: what an at-least-once stream
/// delivered once duplicates are set aside.
pub fn first_deliveries(items: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items.iter().filter(|l| seen.insert(l.as_str())).cloned().collect()
}

/// The interpreter of the tests' tools venv (`tests/services/tools.sh`: Prometheus' parser).
pub fn tools_python() -> PathBuf {
    let out = Command::new("bash").arg(service_script("tools.sh")).arg("python").output().expect("run tools.sh");
    assert!(out.status.success(), "tools.sh python failed: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn service_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("services").join(name)
}

/// An S3 server (moto, started by `tests/services/s3.sh`) with one bucket, stopped on drop.
/// A server that does not start fails the test. [`Moto::py`] runs Python from the same venv
/// (boto3, pyarrow and duckdb, all installed by s3.sh) to read back what the sink wrote.
pub struct Moto {
    pid: String,
    pub port: u16,
    pub bucket: String,
    python: PathBuf,
}

impl Moto {
    pub fn start(bucket: &str) -> Self {
        let script = service_script("s3.sh");
        let port = free_port();
        let out = Command::new("bash").arg(&script).arg("start").arg(port.to_string()).output().expect("run s3.sh");
        assert!(out.status.success(), "s3.sh start failed (this test needs a real S3 server): {}", String::from_utf8_lossy(&out.stderr));
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let venv = Command::new("bash").arg(&script).arg("install").output().expect("run s3.sh install");
        let python = PathBuf::from(String::from_utf8_lossy(&venv.stdout).trim()).join("bin/python");
        let m = Self { pid, port, bucket: bucket.to_owned(), python };
        m.py(&format!("s3.create_bucket(Bucket={bucket:?})"));
        m
    }

    /// The venv's Python (boto3, pyarrow, duckdb), to run with `-I`.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// `http://127.0.0.1:PORT`, the sink's `store.url`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs Python with `s3` (a boto3 client for this server) and `BUCKET` defined; returns
    /// stdout. A failing script fails the test. A script that ran through leaves with
    /// `os._exit(0)`: pyarrow's thread pool can abort the interpreter's normal shutdown
    /// ("terminate called without an active exception") after all the work is done.
    pub fn py(&self, body: &str) -> String {
        let code = format!(
            "import boto3,json,io,os,sys\ns3=boto3.client('s3',endpoint_url='http://127.0.0.1:{}',region_name='us-east-1',aws_access_key_id='t',aws_secret_access_key='t')\nBUCKET={:?}\n{body}\nsys.stdout.flush()\nsys.stderr.flush()\nos._exit(0)\n",
            self.port, self.bucket
        );
        let out = Command::new(&self.python).arg("-I").arg("-c").arg(code).output().expect("run python");
        assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The keys of the objects under `prefix`, sorted.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self.py(&format!(
            "keys=[o['Key'] for p in s3.get_paginator('list_objects_v2').paginate(Bucket=BUCKET,Prefix={prefix:?}) for o in p.get('Contents',[])]\nprint(json.dumps(sorted(keys)))"
        ));
        serde_json::from_str(&out).expect("keys JSON")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(service_script("s3.sh")).arg("stop").arg(&self.pid).status();
    }
}

/// The Python of the test broker's venv (tests/services/kafka.sh), which has confluent-kafka.
pub fn kafka_python() -> PathBuf {
    std::env::var("KAFKA_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/sluice-test/kafka-venv"))
        .join("bin/python")
}

/// Every record of `topic` on a Kafka-protocol broker, from the start to the end of each
/// partition, read by confluent-kafka with this `isolation.level`, as `pick` (a Python
/// expression over `key` and `value`, each the JSON the record holds, a string when it is not
/// JSON, None when absent) makes of it: `"[key, value]"` for the whole record, or only what a
/// test needs of large topics. No records when the topic does not exist.
pub fn kafka_records(bootstrap: &str, topic: &str, isolation: &str, pick: &str) -> Vec<Json> {
    let script = r#"
import json, sys
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, isolation, pick = sys.argv[1:5]
pick = compile(pick, "pick", "eval")
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "sluice-tests-check", "enable.auto.commit": False,
              "isolation.level": isolation, "enable.partition.eof": True, "auto.offset.reset": "earliest"})
md = c.list_topics(topic, timeout=10)
if md.topics[topic].error is not None:
    print("[]"); raise SystemExit(0)
parts = list(md.topics[topic].partitions)
c.assign([TopicPartition(topic, p, 0) for p in parts])
def load(b):
    if b is None:
        return None
    try:
        return json.loads(b)
    except ValueError:
        return b.decode("utf-8", "replace")
done, out = set(), []
while len(done) < len(parts):
    m = c.poll(5)
    if m is None:
        break
    if m.error():
        if m.error().code() == -191:  # _PARTITION_EOF
            done.add(m.partition())
            continue
        raise SystemExit(str(m.error()))
    out.append(eval(pick, {"key": load(m.key()), "value": load(m.value())}))
print(json.dumps(out))
"#;
    let out = Command::new(kafka_python())
        .arg("-I")
        .arg("-c")
        .arg(script)
        .args([bootstrap, topic, isolation, pick])
        .output()
        .expect("run python");
    assert!(out.status.success(), "the check consumer failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the check consumer's JSON")
}

/// psql against a test cluster: cheap to copy into a writer thread.
#[derive(Clone, Copy, Debug)]
pub struct Psql(pub u16);

impl Psql {
    /// `psql` for database `db`, stopping at the first error.
    pub fn command(&self, db: &str) -> Command {
        let pgbin = PathBuf::from(std::env::var("PGBIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into()));
        let mut c = Command::new(pgbin.join("psql"));
        c.args(["-h", "127.0.0.1", "-p", &self.0.to_string(), "-U", "postgres", "-d", db, "-X", "-q", "-v", "ON_ERROR_STOP=1"]);
        c
    }

    /// Runs SQL in `db`; returns its unaligned, tuples-only output, trimmed.
    pub fn sql(&self, db: &str, sql: &str) -> String {
        let out = self.command(db).args(["-At", "-c", sql]).output().expect("run psql");
        assert!(out.status.success(), "psql failed on {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// The user of [`Postgres::start_tls_client_cert`] that authenticates by certificate.
pub const CERT_USER: &str = "sluice";

/// A throwaway PostgreSQL 15 cluster with logical replication on, started by
/// `tests/services/postgres.sh` and stopped (immediate) on drop. A cluster that does not
/// start fails the test.
pub struct Postgres {
    dir: tempfile::TempDir,
    pub port: u16,
}

impl Postgres {
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// A cluster that serves TLS only (unencrypted TCP connections are refused); its CA
    /// certificate is [`Postgres::ca_cert`].
    pub fn start_tls() -> Self {
        Self::start_with(true)
    }

    /// A TLS-only cluster where user [`CERT_USER`] (a superuser with REPLICATION) must
    /// present a client certificate signed by [`Postgres::ca_cert`], for ordinary and
    /// replication sessions alike; its certificate and key are [`Postgres::client_cert`].
    /// `postgres` still connects without one.
    pub fn start_tls_client_cert() -> Self {
        Self::start_mode("cert")
    }

    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("tls/ca.crt")
    }

    /// The client certificate (CN=[`CERT_USER`]) and its unencrypted PEM PKCS#8 key.
    pub fn client_cert(&self) -> (PathBuf, PathBuf) {
        (self.dir.path().join("tls/client.crt"), self.dir.path().join("tls/client.key"))
    }

    fn start_with(tls: bool) -> Self {
        Self::start_mode(if tls { "1" } else { "0" })
    }

    fn start_mode(tls: &str) -> Self {
        let port = free_port();
        let dir = tempfile::Builder::new().prefix("sluice-e2e-pg").tempdir_in("/tmp").expect("a directory for the cluster");
        let out = Command::new("bash")
            .env("PG_TLS", tls)
            .arg(service_script("postgres.sh"))
            .arg("start")
            .arg(dir.path())
            .arg(port.to_string())
            .output()
            .expect("run postgres.sh");
        assert!(out.status.success(), "postgres.sh start failed (is PostgreSQL 15 installed?): {}", String::from_utf8_lossy(&out.stderr));
        Self { dir, port }
    }

    pub fn psql(&self) -> Psql {
        Psql(self.port)
    }

    /// Stops the server (fast shutdown: sessions are ended) and starts it again on the
    /// same data and port.
    pub fn restart(&self) {
        self.stop();
        self.start_again();
    }

    /// Stops the server (fast shutdown: sessions are ended); [`Postgres::start_again`] brings
    /// it back on the same data and port.
    pub fn stop(&self) {
        let script = service_script("postgres.sh");
        let stop = Command::new("bash").arg(&script).arg("stop").arg(self.dir.path()).arg("fast").output().expect("run postgres.sh");
        if !stop.status.success() {
            let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "postgres.sh stop failed: {}\nserver.log (last lines, newest first):\n{}",
                String::from_utf8_lossy(&stop.stderr),
                tail.join("\n")
            );
        }
    }

    pub fn start_again(&self) {
        let script = service_script("postgres.sh");
        let start = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(self.dir.path())
            .arg(self.port.to_string())
            .output()
            .expect("run postgres.sh");
        assert!(start.status.success(), "postgres.sh start failed: {}", String::from_utf8_lossy(&start.stderr));
    }

    /// Runs SQL in database `postgres`; see [`Psql::sql`].
    pub fn sql(&self, sql: &str) -> String {
        self.psql().sql("postgres", sql)
    }

    /// A Debezium Postgres source on this cluster's `postgres` database capturing
    /// `public.items` into `srv.public.items`, with `extra` keys on top.
    pub fn source_config(&self, slot: &str, extra: &[(&str, &str)]) -> Json {
        with_keys(
            json!({
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": "127.0.0.1", "database.port": self.port.to_string(), "database.user": "postgres",
                "database.dbname": "postgres", "topic.prefix": "srv", "slot.name": slot,
                "table.include.list": "public.items", "poll.interval.ms": "100"
            }),
            extra,
        )
    }

    /// Debezium's JDBC sink writing `srv.public.items` into table `items` of database `db`
    /// (upserts by record key, deletes), with `extra` keys on top; `url_params` are added to
    /// the JDBC URL.
    pub fn sink_config(&self, db: &str, url_params: &str, extra: &[(&str, &str)]) -> Json {
        let url = format!(
            "jdbc:postgresql://127.0.0.1:{}/{db}{}",
            self.port,
            if url_params.is_empty() { String::new() } else { format!("?{url_params}") }
        );
        with_keys(
            json!({
                "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
                "topics": "srv.public.items", "connection.url": url,
                "connection.username": "postgres", "connection.password": "",
                "insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": "true",
                "collection.name.format": "${source.table}"
            }),
            extra,
        )
    }
}

fn with_keys(mut config: Json, extra: &[(&str, &str)]) -> Json {
    for (k, v) in extra {
        config[*k] = json!(v);
    }
    config
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(service_script("postgres.sh")).arg("stop").arg(self.dir.path()).arg("immediate").status();
    }
}

/// Prints one line of a fault schedule's figures, `reliability: {json}`, which
/// `bench/reliability.py` collects into `bench/reliability.md`: `schedule`, `faults` (what was
/// injected), `destination`, `written` (changes made at the source), `lost`, `duplicated`
/// and `recovery_s` (from the end of the fault to the destination complete), where known.
pub fn report_figures(figures: Json) {
    eprintln!("reliability: {figures}");
}

/// A psql session fed one SQL text per step (usually a transaction) until stopped:
/// concurrent writes for a test. `step(i)` is the text of step `i`.
pub struct SqlWriter {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(Child, u64)>,
}

impl SqlWriter {
    pub fn start(pg: &Postgres, pause: Duration, step: impl Fn(i64) -> String + Send + 'static) -> SqlWriter {
        Self::start_psql(pg.psql().command("postgres"), pause, step)
    }

    /// The same with any `psql` command line (e.g. one run with `docker exec -i`).
    pub fn start_psql(mut psql: Command, pause: Duration, step: impl Fn(i64) -> String + Send + 'static) -> SqlWriter {
        use std::io::Write as _;
        use std::sync::atomic::Ordering;
        let mut child = psql.stdin(Stdio::piped()).stdout(Stdio::null()).spawn().expect("psql");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut stdin = child.stdin.take().unwrap();
            let mut n: u64 = 0;
            while !flag.load(Ordering::SeqCst) {
                if stdin.write_all(step(n as i64).as_bytes()).is_err() {
                    break; // psql is gone (its session was cut); `finish` reports it
                }
                n += 1;
                std::thread::sleep(pause);
            }
            drop(stdin);
            (child, n)
        });
        SqlWriter { stop, thread }
    }

    /// Stops a writer whose session may have been cut (a server restart): no check that
    /// psql succeeded; returns how many steps it sent (some may not have committed).
    pub fn abandon(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let (mut child, n) = self.thread.join().unwrap_or_else(|_| panic!("the writer thread panicked"));
        let _ = child.wait();
        n
    }

    /// Stops the writer; returns how many steps it wrote (all committed once psql exits).
    pub fn finish(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let (mut child, n) = self.thread.join().unwrap();
        assert!(child.wait().unwrap().success(), "the writer's psql failed");
        n
    }
}

/// A REST resource (a connector's status, the worker's health) sampled every 100 ms on a
/// thread, from its start until [`StatusWatch::stop`]: what a user watching it during a
/// fault would have seen.
pub struct StatusWatch {
    stop: Arc<std::sync::atomic::AtomicBool>,
    join: Option<std::thread::JoinHandle<Vec<Sighting>>>,
}

/// A failure seen by a [`StatusWatch`] (a task's trace, an unhealthy worker).
#[derive(Debug, Clone)]
pub struct Sighting {
    /// Seconds since the watch started.
    pub at: f64,
    pub task: u64,
    pub state: String,
    /// The trace's first line, or the health message.
    pub trace: String,
}

impl StatusWatch {
    /// `sightings`: from an answer's HTTP status and body, what it shows: (task, state,
    /// trace) per failure seen.
    fn start(url: String, sightings: fn(u16, &Json) -> Vec<(u64, String, String)>) -> StatusWatch {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let join = std::thread::spawn(move || {
            let agent: ureq::Agent =
                ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(5))).build().into();
            let started = Instant::now();
            let mut seen: Vec<Sighting> = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                if let Ok(mut resp) = agent.get(&url).call() {
                    let code = resp.status().as_u16();
                    let body: Json = resp.body_mut().read_json().unwrap_or(Json::Null);
                    for (task, state, trace) in sightings(code, &body) {
                        // One sighting per change of trace.
                        if seen.last().is_none_or(|l| l.trace != trace || l.state != state || l.task != task) {
                            seen.push(Sighting { at: started.elapsed().as_secs_f64(), task, state, trace });
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        });
        StatusWatch { stop, join: Some(join) }
    }

    /// Stops sampling; the traces seen, in order (consecutive repeats once).
    pub fn stop(mut self) -> Vec<Sighting> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.join.take().expect("stopped once").join().expect("the status watch panicked")
    }
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
