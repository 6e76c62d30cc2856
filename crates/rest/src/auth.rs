//! Who may use the REST API. Two ways in, either or both configured:
//!
//! - HTTP Basic, configured as Kafka Connect's `BasicAuthSecurityRestExtension` is:
//!   `rest.extension.classes` names the extension, and a JAAS file, found through
//!   `-Djava.security.auth.login.config=FILE` in `KAFKA_OPTS` (as Connect's images pass it) or
//!   the worker key `sluice.rest.auth.jaas.config`, has a `KafkaConnect` entry whose
//!   `PropertyFileLoginModule` points at a users file of `user=password` lines. These users
//!   may do everything, as in Connect.
//!
//!   ```text
//!   KafkaConnect {
//!     org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required
//!     file="/etc/kafka/connect.password";
//!   };
//!   ```
//! - Bearer tokens (ours): `sluice.rest.auth.tokens.file` lists `NAME ROLE sha256:HEX` lines,
//!   the SHA-256 of each token, never the token (`sluice rest-token NAME ROLE` makes one).
//!   Role `admin` may do everything; role `read` may only read (`GET`, `HEAD`, and validating
//!   a config), and any other request is 403.
//!
//! Every request needs credentials, as in Connect (`/health` and `/metrics` too), except the
//! status page's HTML, `GET /ui`, which holds no data, and `GET /health` from a loopback
//! address (the container's own health check); a refused
//! one gets 401 with Connect's text, "User cannot access the resource.". Where sluice
//! differs, on purpose:
//! - `rest.extension.classes` naming anything else, or `rest.servlet.initializor.classes`
//!   naming anything, stops the worker at start, naming the class: ignoring it would serve an
//!   open or altered API to a user who asked for something else.
//! - An empty users or tokens file stops the worker at start (Connect lets every request in).
//! - A client address with 10 failed attempts within a minute is answered 429 until the
//!   minute has passed, whatever it sends. Failures are logged with the user name and the
//!   address, never the password or token; one line per address and minute.
//! - The 401 carries `WWW-Authenticate: Basic` (or `Bearer` with tokens alone), so a browser
//!   asks for the credentials.
//!
//! Passwords and token hashes are compared in constant time. A follower forwarding a write to
//! its leader sends the client's `Authorization` header along, as Connect's `RestClient` does.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sluice_api::{ConnectError, ConnectResult, Props};
use sluice_runtime::worker::config::parse_properties;

use crate::ApiError;

/// Kafka Connect's Basic authentication extension.
pub const BASIC_AUTH_EXTENSION: &str = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension";
/// The login module its JAAS entry names.
pub const PROPERTY_FILE_LOGIN_MODULE: &str = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule";
/// The worker key naming the REST extensions.
pub const EXTENSIONS_KEY: &str = "rest.extension.classes";
/// Our worker key for the JAAS file, when `KAFKA_OPTS` does not name one.
pub const JAAS_KEY: &str = "sluice.rest.auth.jaas.config";
/// Our worker key for the bearer tokens file.
pub const TOKENS_KEY: &str = "sluice.rest.auth.tokens.file";
/// Connect's servlet initializers (Java classes run inside Jetty).
pub const INITIALIZERS_KEY: &str = "rest.servlet.initializor.classes";
/// Connect's answer to a request it did not authenticate.
pub const UNAUTHORIZED: &str = "User cannot access the resource.";

/// Failed attempts from one address within [`WINDOW`] before it is answered 429.
const MAX_FAILURES: u32 = 10;
const WINDOW: Duration = Duration::from_secs(60);

/// What a principal may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `GET`, `HEAD` and config validation.
    Read,
    /// Everything.
    Admin,
}

/// Who made a request (in the request's extensions once authenticated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
}

/// One line of the tokens file.
struct Token {
    name: String,
    role: Role,
    sha256: [u8; 32],
}

/// The users and tokens allowed in, and the failed attempts per client address.
pub struct RestAuth {
    /// Basic users and their passwords; `None` without the Basic extension.
    users: Option<HashMap<String, String>>,
    tokens: Vec<Token>,
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

struct Failures {
    since: Instant,
    count: u32,
}

impl std::fmt::Debug for RestAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestAuth").field("users", &self.users.as_ref().map(HashMap::len)).field("tokens", &self.tokens.len()).finish_non_exhaustive()
    }
}

/// What the worker's REST extensions and tokens file ask for: `None` when neither is
/// configured. `kafka_opts` is the `KAFKA_OPTS` environment variable.
pub fn from_worker(props: &Props, kafka_opts: Option<&str>) -> ConnectResult<Option<Arc<RestAuth>>> {
    if let Some(initializers) = props.get(INITIALIZERS_KEY).filter(|v| !v.trim().is_empty()) {
        return Err(ConnectError::config(
            INITIALIZERS_KEY,
            format!("{} cannot run in sluice (they are Java classes for Connect's Jetty server); remove the key", initializers.trim()),
        ));
    }
    let classes: Vec<&str> =
        props.get(EXTENSIONS_KEY).map(|v| v.split(',').map(str::trim).filter(|c| !c.is_empty()).collect()).unwrap_or_default();
    if let Some(other) = classes.iter().find(|c| **c != BASIC_AUTH_EXTENSION) {
        return Err(ConnectError::config(
            EXTENSIONS_KEY,
            format!(
                "{other} is not available in sluice; serving the API without the protection it adds would leave it open. \
                 The REST extension sluice has is {BASIC_AUTH_EXTENSION}"
            ),
        ));
    }
    let users = if classes.is_empty() { None } else { Some(basic_users(props, kafka_opts)?) };
    let tokens = match props.get(TOKENS_KEY).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        Some(path) => read_tokens(Path::new(path))?,
        None => Vec::new(),
    };
    if users.is_none() && tokens.is_empty() {
        return Ok(None);
    }
    tracing::info!(
        basic_users = users.as_ref().map_or(0, HashMap::len),
        tokens = tokens.len(),
        "REST API: every request needs credentials"
    );
    Ok(Some(Arc::new(RestAuth { users, tokens, failures: Mutex::new(HashMap::new()) })))
}

fn basic_users(props: &Props, kafka_opts: Option<&str>) -> ConnectResult<HashMap<String, String>> {
    let jaas = match props.get(JAAS_KEY).filter(|v| !v.trim().is_empty()) {
        Some(path) => PathBuf::from(path.trim()),
        None => kafka_opts.and_then(jaas_from_kafka_opts).ok_or_else(|| {
            ConnectError::config(
                EXTENSIONS_KEY,
                format!(
                    "{BASIC_AUTH_EXTENSION} needs a JAAS file: pass -Djava.security.auth.login.config=FILE in KAFKA_OPTS \
                     or set {JAAS_KEY}"
                ),
            )
        })?,
    };
    let users_file = users_file(&jaas)?;
    let text = std::fs::read_to_string(&users_file)
        .map_err(|e| ConnectError::config(JAAS_KEY, format!("cannot read the users file {} named in {}: {e}", users_file.display(), jaas.display())))?;
    let users: HashMap<String, String> = parse_properties(&text).into_iter().collect();
    if users.is_empty() {
        return Err(ConnectError::config(
            JAAS_KEY,
            format!("the users file {} has no users; sluice does not serve an API that lets every request in", users_file.display()),
        ));
    }
    Ok(users)
}

/// The tokens file: `NAME ROLE sha256:HEX` lines, `#` comments.
fn read_tokens(path: &Path) -> ConnectResult<Vec<Token>> {
    let text = std::fs::read_to_string(path).map_err(|e| ConnectError::config(TOKENS_KEY, format!("cannot read {}: {e}", path.display())))?;
    let mut tokens = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| ConnectError::config(TOKENS_KEY, format!("{} line {}: {why} (expected NAME ROLE sha256:HEX)", path.display(), n + 1));
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, role, hash] = fields.as_slice() else { return Err(bad("not three fields")) };
        let role = match *role {
            "read" => Role::Read,
            "admin" => Role::Admin,
            _ => return Err(bad("the role is neither read nor admin")),
        };
        let hex = hash.strip_prefix("sha256:").ok_or_else(|| bad("the hash does not start with sha256:"))?;
        let sha256 = decode_hex(hex).ok_or_else(|| bad("the hash is not 64 hexadecimal digits"))?;
        if tokens.iter().any(|t: &Token| t.name == *name) {
            return Err(bad("the name is used twice"));
        }
        tokens.push(Token { name: (*name).to_owned(), role, sha256 });
    }
    if tokens.is_empty() {
        return Err(ConnectError::config(
            TOKENS_KEY,
            format!("{} has no tokens; sluice does not serve an API that lets every request in", path.display()),
        ));
    }
    Ok(tokens)
}

fn decode_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn sha256(token: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// A new token for `name` with `role` (`read` or `admin`): the token, shown once, and its
/// line for the tokens file.
pub fn new_token(name: &str, role: &str) -> Result<(String, String), String> {
    if name.is_empty() || name.chars().any(char::is_whitespace) {
        return Err("a token's name is one word".into());
    }
    if role != "read" && role != "admin" {
        return Err(format!("'{role}' is not a role (read or admin)"));
    }
    let mut bytes = [0u8; 32];
    use std::io::Read as _;
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    let token = format!("slc_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes));
    let hex: String = sha256(&token).iter().map(|b| format!("{b:02x}")).collect();
    Ok((token.clone(), format!("{name} {role} sha256:{hex}")))
}

/// An `Authorization` header value for a probe on the worker's own machine (`sluice health`,
/// the image's HEALTHCHECK): the first user (by name) of the users file the worker reads, or
/// `None` when no JAAS file is configured or it cannot be read. `jaas_key` is the value of
/// [`JAAS_KEY`], `kafka_opts` the `KAFKA_OPTS` environment variable.
pub fn local_probe_authorization(jaas_key: Option<&str>, kafka_opts: Option<&str>) -> Option<String> {
    let jaas = match jaas_key.map(str::trim).filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => jaas_from_kafka_opts(kafka_opts?)?,
    };
    let text = std::fs::read_to_string(users_file(&jaas).ok()?).ok()?;
    let (user, password) = parse_properties(&text).into_iter().next()?;
    Some(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))))
}

/// The path `-Djava.security.auth.login.config=` names in `KAFKA_OPTS` (quotes removed).
fn jaas_from_kafka_opts(opts: &str) -> Option<PathBuf> {
    const FLAG: &str = "-Djava.security.auth.login.config=";
    let at = opts.find(FLAG)? + FLAG.len();
    let rest = &opts[at..];
    let path = match rest.chars().next()? {
        q @ ('"' | '\'') => rest[1..].split(q).next()?,
        _ => rest.split_whitespace().next()?,
    };
    // Java also takes `==FILE` (replace rather than add to the default configuration).
    let path = path.trim_start_matches('=');
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// The users file the `KafkaConnect` entry of the JAAS file at `jaas` names.
fn users_file(jaas: &Path) -> ConnectResult<PathBuf> {
    let text = std::fs::read_to_string(jaas)
        .map_err(|e| ConnectError::config(JAAS_KEY, format!("cannot read the JAAS file {}: {e}", jaas.display())))?;
    let entries = parse_jaas(&text).map_err(|e| ConnectError::config(JAAS_KEY, format!("the JAAS file {}: {e}", jaas.display())))?;
    let modules = entries.get("KafkaConnect").ok_or_else(|| {
        ConnectError::config(
            JAAS_KEY,
            format!("the JAAS file {} has no KafkaConnect entry, which {BASIC_AUTH_EXTENSION} reads", jaas.display()),
        )
    })?;
    match modules.as_slice() {
        [m] if m.class == PROPERTY_FILE_LOGIN_MODULE => {
            let file = m.options.get("file").filter(|f| !f.trim().is_empty()).ok_or_else(|| {
                ConnectError::config(JAAS_KEY, format!("{PROPERTY_FILE_LOGIN_MODULE} in {} has no file option", jaas.display()))
            })?;
            Ok(PathBuf::from(file))
        }
        [m] => Err(ConnectError::config(
            JAAS_KEY,
            format!(
                "the KafkaConnect entry of {} names {}; the login module sluice has is {PROPERTY_FILE_LOGIN_MODULE}",
                jaas.display(),
                m.class
            ),
        )),
        _ => Err(ConnectError::config(
            JAAS_KEY,
            format!("the KafkaConnect entry of {} must name exactly one login module, {PROPERTY_FILE_LOGIN_MODULE}", jaas.display()),
        )),
    }
}

#[derive(Debug, PartialEq)]
struct LoginModule {
    class: String,
    flag: String,
    options: HashMap<String, String>,
}

/// Reads a JAAS login configuration: `Name { Class Flag key=value ...; ... };` entries, with
/// `//` and `/* */` comments and double-quoted values.
fn parse_jaas(text: &str) -> Result<HashMap<String, Vec<LoginModule>>, String> {
    #[derive(Debug, PartialEq)]
    enum Tok {
        Word(String),
        Quoted(String),
        Sym(char),
    }
    let mut toks = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                loop {
                    match chars.next() {
                        Some('/') if last == '*' => break,
                        Some(c) => last = c,
                        None => return Err("a comment is not closed".into()),
                    }
                }
            }
            '{' | '}' | ';' | '=' => toks.push(Tok::Sym(c)),
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => s.extend(chars.next()),
                        Some(c) => s.push(c),
                        None => return Err("a quoted value is not closed".into()),
                    }
                }
                toks.push(Tok::Quoted(s));
            }
            c => {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '{' | '}' | ';' | '=' | '"') {
                        break;
                    }
                    s.push(n);
                    chars.next();
                }
                toks.push(Tok::Word(s));
            }
        }
    }
    let mut entries = HashMap::new();
    let mut it = toks.into_iter().peekable();
    let word = |t: Option<Tok>, what: &str| match t {
        Some(Tok::Word(w)) => Ok(w),
        other => Err(format!("expected {what}, found {other:?}")),
    };
    while it.peek().is_some() {
        let name = word(it.next(), "an entry name")?;
        if it.next() != Some(Tok::Sym('{')) {
            return Err(format!("expected {{ after {name}"));
        }
        let mut modules = Vec::new();
        loop {
            match it.next() {
                Some(Tok::Sym('}')) => break,
                Some(Tok::Word(class)) => {
                    let flag = word(it.next(), "a control flag (required, requisite, sufficient or optional)")?;
                    let mut options = HashMap::new();
                    loop {
                        match it.next() {
                            Some(Tok::Sym(';')) => break,
                            Some(Tok::Word(key)) => {
                                if it.next() != Some(Tok::Sym('=')) {
                                    return Err(format!("expected = after option {key} of {class}"));
                                }
                                let value = match it.next() {
                                    Some(Tok::Quoted(v) | Tok::Word(v)) => v,
                                    other => return Err(format!("expected a value for option {key} of {class}, found {other:?}")),
                                };
                                options.insert(key, value);
                            }
                            other => return Err(format!("expected an option or ; in {class}, found {other:?}")),
                        }
                    }
                    modules.push(LoginModule { class, flag, options });
                }
                other => return Err(format!("expected a login module or }} in {name}, found {other:?}")),
            }
        }
        if it.next() != Some(Tok::Sym(';')) {
            return Err(format!("expected ; after the {name} entry"));
        }
        entries.insert(name, modules);
    }
    Ok(entries)
}

/// Equal without an early exit: the time taken does not say how much of `a` matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

impl RestAuth {
    /// The principal an `Authorization` header proves, or the user name it claimed.
    fn principal(&self, header: Option<&HeaderValue>) -> Result<Principal, Option<String>> {
        let value = header.and_then(|h| h.to_str().ok()).ok_or(None)?;
        let (scheme, credentials) = value.split_once(' ').ok_or(None)?;
        if scheme.eq_ignore_ascii_case("bearer") {
            let presented = sha256(credentials.trim());
            // Every token is compared, found or not.
            let mut found = None;
            for t in &self.tokens {
                if same(&presented, &t.sha256) {
                    found = Some(t);
                }
            }
            return found.map(|t| Principal { name: t.name.clone(), role: t.role }).ok_or(None);
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(None);
        }
        let users = self.users.as_ref().ok_or(None)?;
        let decoded = base64::engine::general_purpose::STANDARD.decode(credentials.trim()).map_err(|_| None)?;
        let decoded = String::from_utf8(decoded).map_err(|_| None)?;
        let (user, password) = decoded.split_once(':').filter(|(u, _)| !u.is_empty()).ok_or(None)?;
        // An unknown user costs the same comparison as a known one.
        let (expected, known) = match users.get(user) {
            Some(p) => (p.as_bytes(), true),
            None => (&b"\0unknown user\0"[..], false),
        };
        if same(password.as_bytes(), expected) && known {
            Ok(Principal { name: user.to_owned(), role: Role::Admin })
        } else {
            Err(Some(user.to_owned()))
        }
    }

    /// Whether `addr` has used up its failed attempts; the seconds left when it has.
    fn blocked(&self, addr: IpAddr) -> Option<u64> {
        let mut failures = self.failures.lock().expect("failures lock");
        let f = failures.get(&addr)?;
        let elapsed = f.since.elapsed();
        if elapsed >= WINDOW {
            failures.remove(&addr);
            return None;
        }
        (f.count >= MAX_FAILURES).then(|| (WINDOW - elapsed).as_secs().max(1))
    }

    /// Counts a failed attempt; true for the first of its address and window (logged).
    fn failed(&self, addr: IpAddr) -> bool {
        let mut failures = self.failures.lock().expect("failures lock");
        if failures.len() > 10_000 {
            failures.retain(|_, f| f.since.elapsed() < WINDOW);
        }
        let f = failures.entry(addr).or_insert(Failures { since: Instant::now(), count: 0 });
        if f.since.elapsed() >= WINDOW {
            *f = Failures { since: Instant::now(), count: 0 };
        }
        f.count += 1;
        f.count == 1 || f.count == MAX_FAILURES
    }
}

/// Whether a `read` principal may make this request: reads, and validating a config.
fn is_read(method: &Method, path: &str) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        || (*method == Method::PUT && path.starts_with("/connector-plugins/") && path.ends_with("/config/validate"))
}

/// Lets a request through when its credentials are a user's or a token's (and its role
/// allows it); 401 otherwise, 403 for a read-only principal's write, 429 for an address that
/// failed too often.
pub async fn require(State(auth): State<Arc<RestAuth>>, mut req: Request, next: Next) -> Response {
    let addr = req.extensions().get::<ConnectInfo<SocketAddr>>().map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    // The status page holds no data (it reads the API with the user's credentials); `/health`
    // asked from the worker's own machine is the container's health check (`sluice health`),
    // which cannot hold a token.
    if matches!(*req.method(), Method::GET | Method::HEAD) && (req.uri().path() == "/ui" || (req.uri().path() == "/health" && addr.is_loopback())) {
        return next.run(req).await;
    }
    if let Some(wait) = auth.blocked(addr) {
        return ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("Too many failed authentication attempts from this address; try again in {wait} s"),
        )
        .into_response();
    }
    match auth.principal(req.headers().get(header::AUTHORIZATION)) {
        Ok(p) if p.role == Role::Read && !is_read(req.method(), req.uri().path()) => ApiError::new(
            StatusCode::FORBIDDEN,
            format!("{} has the read role: {} {} changes the cluster and needs the admin role", p.name, req.method(), req.uri().path()),
        )
        .into_response(),
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(user) => {
            if auth.failed(addr) {
                tracing::warn!(
                    %addr,
                    user = user.as_deref().unwrap_or("(none)"),
                    method = %req.method(),
                    path = req.uri().path(),
                    "REST request refused: no valid credentials (after {MAX_FAILURES} failures in a minute the address is refused until the minute ends)"
                );
            }
            let challenge = if auth.users.is_some() { "Basic realm=\"Kafka Connect\"" } else { "Bearer realm=\"sluice\"" };
            let mut response = (StatusCode::UNAUTHORIZED, UNAUTHORIZED).into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_connects_jaas_file() {
        let text = r#"
            // the worker's REST API
            KafkaConnect {
              org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required
              file="/etc/kafka/connect.password" debug=true;
            };
            /* another application */ Other { com.example.Module optional; };
        "#;
        let entries = parse_jaas(text).unwrap();
        let m = &entries["KafkaConnect"][0];
        assert_eq!((m.class.as_str(), m.flag.as_str()), (PROPERTY_FILE_LOGIN_MODULE, "required"));
        assert_eq!(m.options["file"], "/etc/kafka/connect.password");
        assert_eq!(m.options["debug"], "true");
        assert_eq!(entries["Other"][0].class, "com.example.Module");
        assert!(parse_jaas("KafkaConnect { x required file=\"a\" }").unwrap_err().contains("expected"));
        assert!(parse_jaas("KafkaConnect { x required file=\"a ; };").unwrap_err().contains("not closed"));
    }

    #[test]
    fn finds_the_jaas_file_in_kafka_opts() {
        let opts = "-Xmx1g -Djava.security.auth.login.config=/etc/kafka/jaas.conf -Dother=1";
        assert_eq!(jaas_from_kafka_opts(opts), Some(PathBuf::from("/etc/kafka/jaas.conf")));
        assert_eq!(jaas_from_kafka_opts("-Djava.security.auth.login.config=\"/a b/j.conf\""), Some(PathBuf::from("/a b/j.conf")));
        assert_eq!(jaas_from_kafka_opts("-Djava.security.auth.login.config==/x.conf"), Some(PathBuf::from("/x.conf")));
        assert_eq!(jaas_from_kafka_opts("-Xmx1g"), None);
    }

    fn auth(users: &[(&str, &str)], tokens: Vec<Token>) -> RestAuth {
        let users = (!users.is_empty()).then(|| users.iter().map(|(u, p)| ((*u).to_owned(), (*p).to_owned())).collect());
        RestAuth { users, tokens, failures: Mutex::new(HashMap::new()) }
    }

    #[test]
    fn checks_basic_credentials() {
        let auth = auth(&[("ops", "s3cret:x")], Vec::new());
        let basic = |s: &str| HeaderValue::from_str(&format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(s))).unwrap();
        let admin = |n: &str| Ok(Principal { name: n.to_owned(), role: Role::Admin });
        assert_eq!(auth.principal(Some(&basic("ops:s3cret:x"))), admin("ops"), "a password may hold a colon");
        assert_eq!(auth.principal(Some(&basic("ops:s3cret"))), Err(Some("ops".to_owned())));
        assert_eq!(auth.principal(Some(&basic("eve:s3cret:x"))), Err(Some("eve".to_owned())));
        assert_eq!(auth.principal(Some(&basic(":s3cret:x"))), Err(None));
        assert_eq!(auth.principal(Some(&HeaderValue::from_static("Bearer abc"))), Err(None));
        assert_eq!(auth.principal(Some(&HeaderValue::from_static("Basic !!!"))), Err(None));
        assert_eq!(auth.principal(None), Err(None));
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"abcd") && !same(b"", b"a"));
    }

    #[test]
    fn tokens_are_kept_hashed_and_carry_their_role() {
        let (token, line) = new_token("dash", "read").unwrap();
        assert!(token.starts_with("slc_") && token.len() > 40, "{token}");
        assert!(!line.contains(&token) && line.starts_with("dash read sha256:"), "{line}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens");
        let (admin_token, admin_line) = new_token("ci", "admin").unwrap();
        std::fs::write(&file, format!("# tokens\n{line}\n\n{admin_line}\n")).unwrap();
        let auth = auth(&[], read_tokens(&file).unwrap());
        let bearer = |t: &str| HeaderValue::from_str(&format!("Bearer {t}")).unwrap();
        assert_eq!(auth.principal(Some(&bearer(&token))), Ok(Principal { name: "dash".into(), role: Role::Read }));
        assert_eq!(auth.principal(Some(&bearer(&admin_token))), Ok(Principal { name: "ci".into(), role: Role::Admin }));
        assert_eq!(auth.principal(Some(&bearer("slc_guess"))), Err(None));
        let basic = HeaderValue::from_str(&format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("dash:x"))).unwrap();
        assert_eq!(auth.principal(Some(&basic)), Err(None), "no Basic users without the extension");
        assert!(new_token("two words", "read").is_err() && new_token("x", "owner").is_err());
        for (bad, why) in [("a read", "three fields"), ("a owner sha256:00", "role"), ("a read md5:00", "sha256:"), ("a read sha256:zz", "hexadecimal"), ("", "no tokens")] {
            std::fs::write(&file, bad).unwrap();
            let e = read_tokens(&file).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(TOKENS_KEY) && e.contains(why), "{bad}: {e}");
        }
        assert!(is_read(&Method::GET, "/connectors") && is_read(&Method::PUT, "/connector-plugins/x/config/validate"));
        assert!(!is_read(&Method::PUT, "/connectors/x/pause") && !is_read(&Method::POST, "/connectors"));
    }

    #[test]
    fn an_address_is_refused_after_too_many_failures() {
        let auth = auth(&[], Vec::new());
        let (a, b) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        for i in 0..MAX_FAILURES {
            assert_eq!(auth.blocked(a), None, "attempt {i}");
            auth.failed(a);
        }
        assert!(auth.blocked(a).is_some_and(|s| s <= 60));
        assert_eq!(auth.blocked(b), None, "another address is not refused");
    }

    #[test]
    fn only_the_basic_auth_extension_is_taken() {
        let props = |v: &str| Props::from([(EXTENSIONS_KEY.to_owned(), v.to_owned())]);
        let err = from_worker(&props("com.example.OAuthExtension"), None).unwrap_err();
        assert!(err.to_string().contains("com.example.OAuthExtension") && err.to_string().contains(EXTENSIONS_KEY), "{err}");
        let err = from_worker(&props(BASIC_AUTH_EXTENSION), None).unwrap_err();
        assert!(err.to_string().contains("KAFKA_OPTS"), "{err}");
        assert!(from_worker(&props(" "), None).unwrap().is_none());
        assert!(from_worker(&Props::new(), None).unwrap().is_none());
        let servlet = Props::from([(INITIALIZERS_KEY.to_owned(), "com.example.Init".to_owned())]);
        let err = from_worker(&servlet, None).unwrap_err().to_string();
        assert!(err.contains(INITIALIZERS_KEY) && err.contains("com.example.Init"), "{err}");
    }
}
