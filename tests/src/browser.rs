//! A real browser for the status page's tests: Debian's headless chromium, driven over the
//! W3C WebDriver protocol (plain HTTP) through Debian's chromedriver. Missing either fails
//! the test (tests/services/setup.sh installs both).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    agent: ureq::Agent,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless chromium session with a fresh profile.
    pub fn start() -> Browser {
        let port = crate::free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver; tests/services/setup.sh installs it)");
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(60))).build().into();
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut b = Browser { driver, port, session: String::new(), agent, _profile: profile };
        let deadline = Instant::now() + Duration::from_secs(30);
        while b.call("GET", "/status", None).get("value").and_then(|v| v["ready"].as_bool()) != Some(true) {
            assert!(Instant::now() < deadline, "chromedriver did not become ready");
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = json!([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1280,1000",
            format!("--user-data-dir={}", b._profile.path().display()),
        ]);
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}}}});
        let created = b.call("POST", "/session", Some(caps));
        b.session = created["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {created}")).to_owned();
        b
    }

    fn call(&self, method: &str, path: &str, body: Option<Json>) -> Json {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let req = ureq::http::Request::builder().method(method).uri(url).header("content-type", "application/json");
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        match self.agent.run(req.body(body).expect("a request")) {
            Ok(mut r) => serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default()).unwrap_or(Json::Null),
            Err(_) => Json::Null,
        }
    }

    fn session_call(&self, method: &str, path: &str, body: Option<Json>) -> Json {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    pub fn goto(&self, url: &str) {
        let r = self.session_call("POST", "/url", Some(json!({"url": url})));
        assert!(r["value"].is_null(), "navigate to {url}: {r}");
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub fn eval(&self, script: &str) -> Json {
        self.session_call("POST", "/execute/sync", Some(json!({"script": script, "args": []})))["value"].clone()
    }

    /// What a person sees: the page's rendered text.
    pub fn text(&self) -> String {
        self.eval("return document.body.innerText").as_str().unwrap_or_default().to_owned()
    }

    /// Waits until `check(text)` holds; on timeout fails with the page's text.
    pub fn wait_text(&self, timeout: Duration, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text();
            if check(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; the page shows:\n{text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// How many elements match `css`.
    pub fn count(&self, css: &str) -> usize {
        self.session_call("POST", "/elements", Some(json!({"using": "css selector", "value": css})))["value"].as_array().map_or(0, Vec::len)
    }

    /// Clicks the first element matching `css`, waiting up to 10 s for it. The page redraws
    /// itself every few seconds, so an element found just before a redraw is looked up again.
    pub fn click(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found = self.session_call("POST", "/element", Some(json!({"using": "css selector", "value": css})));
            // The W3C element reference key.
            let Some(id) = found["value"]["element-6066-11e4-a52e-4f735466cecf"].as_str() else {
                assert!(Instant::now() < deadline, "no element {css}: {found}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let r = self.session_call("POST", &format!("/element/{id}/click"), Some(json!({})));
            if r["value"].is_null() {
                return;
            }
            assert!(r["value"]["error"] == "stale element reference" && Instant::now() < deadline, "click {css}: {r}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Accepts the confirmation dialog the last click opened, returning its text.
    pub fn accept_dialog(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.session_call("GET", "/alert/text", None)["value"].clone();
            if let Some(t) = text.as_str() {
                self.session_call("POST", "/alert/accept", Some(json!({})));
                return t.to_owned();
            }
            assert!(Instant::now() < deadline, "no dialog opened");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Saves a PNG of the page.
    pub fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let shot = self.session_call("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD.decode(shot["value"].as_str().expect("a screenshot")).expect("base64 PNG");
        std::fs::write(path, png).expect("write the screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A reverse proxy that serves a worker under a path prefix, as an ingress would: requests
/// for `PREFIX/...` go to the worker as `/...` (HTTP/1.1, one request per connection).
pub struct PrefixProxy {
    pub port: u16,
}

impl PrefixProxy {
    pub fn start(prefix: &'static str, backend: u16) -> PrefixProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                std::thread::spawn(move || {
                    let _ = Self::relay(client, prefix, backend);
                });
            }
        });
        PrefixProxy { port }
    }

    fn relay(mut client: std::net::TcpStream, prefix: &str, backend: u16) -> std::io::Result<()> {
        use std::io::{Read, Write};
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if client.read(&mut byte)? == 0 {
                return Ok(());
            }
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let mut lines = head.split("\r\n");
        let request = lines.next().unwrap_or_default();
        let mut parts = request.splitn(3, ' ');
        let (method, target, version) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"), parts.next().unwrap_or("HTTP/1.1"));
        let Some(path) = target.strip_prefix(prefix) else {
            client.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
            return Ok(());
        };
        let path = if path.is_empty() { "/" } else { path };
        let mut length = 0usize;
        let mut out = format!("{method} {path} {version}\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("connection:") || lower.starts_with("keep-alive:") {
                continue;
            }
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        let mut body = vec![0u8; length];
        client.read_exact(&mut body)?;
        let mut server = std::net::TcpStream::connect(("127.0.0.1", backend))?;
        server.write_all(out.as_bytes())?;
        server.write_all(&body)?;
        std::io::copy(&mut server, &mut client)?;
        Ok(())
    }
}
