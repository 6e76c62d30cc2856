//! A real Apache Kafka Connect 4.3 distributed worker (`ConnectDistributed` on the JVM, the
//! jars of tests/services/kafka-connect.sh), for tests that put sluice and Connect in one
//! cluster. Its log goes to `<dir>/connect.log`; dropping it kills the JVM.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, Json};

pub struct JavaConnect {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    agent: ureq::Agent,
}

fn script(arg: &str) -> String {
    let out = Command::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("services/kafka-connect.sh"))
        .arg(arg)
        .output()
        .expect("run tests/services/kafka-connect.sh");
    assert!(out.status.success(), "kafka-connect.sh {arg}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl JavaConnect {
    /// Starts a worker with `props` (plus its REST listener on a free port) and waits until
    /// its REST API answers.
    pub fn start(dir: &Path, props: &[(String, String)]) -> JavaConnect {
        std::fs::create_dir_all(dir).unwrap();
        let port = free_port();
        let mut text = format!("listeners=http://127.0.0.1:{port}\nrest.advertised.host.name=127.0.0.1\n");
        for (k, v) in props {
            text.push_str(&format!("{k}={v}\n"));
        }
        let file = dir.join("connect-distributed.properties");
        std::fs::write(&file, text).unwrap();
        let log = std::fs::File::create(dir.join("connect.log")).unwrap();
        let child = Command::new("java")
            .arg(format!("-Dlog4j2.configurationFile={}", script("log4j")))
            .arg("-Xmx512m")
            .arg("-cp")
            .arg(script("classpath"))
            .arg("org.apache.kafka.connect.cli.ConnectDistributed")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("java (17) runs Kafka Connect");
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(100))).build().into();
        let c = JavaConnect { child: Some(child), port, dir: dir.to_path_buf(), agent };
        let deadline = Instant::now() + Duration::from_secs(120);
        while c.agent.get(c.url("/")).call().ok().map(|r| r.status().as_u16()) != Some(200) {
            assert!(Instant::now() < deadline, "Kafka Connect did not answer within 120 s; its log:\n{}", c.log_tail(60));
            std::thread::sleep(Duration::from_millis(500));
        }
        c
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `127.0.0.1:<port>`, the worker id Connect shows in statuses.
    pub fn worker_id(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("connect.log")).unwrap_or_default()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().filter(|l| !l.contains("jvm.classpath")).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Status 0 when no answer came: Connect holds a request up to 90 s while its herder is
    /// busy (a rebalance), and callers retry.
    fn finish(resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, Json) {
        let mut resp = match resp {
            Ok(r) => r,
            Err(e) => return (0, Json::String(e.to_string())),
        };
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        (status, if text.trim().is_empty() { Json::Null } else { serde_json::from_str(&text).unwrap_or(Json::String(text)) })
    }

    pub fn get(&self, path: &str) -> (u16, Json) {
        Self::finish(self.agent.get(self.url(path)).call())
    }

    pub fn post(&self, path: &str, body: &Json) -> (u16, Json) {
        Self::finish(self.agent.post(self.url(path)).header("Content-Type", "application/json").send(body.to_string()))
    }

    /// SIGTERM: Connect stops its connectors and leaves the group.
    pub fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(60);
            while c.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

impl Drop for JavaConnect {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
