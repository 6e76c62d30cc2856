//! `sluice health`: a dependency-free HTTP check of `GET /health`, for the image's
//! HEALTHCHECK (the runtime image has no curl).

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};

/// The worker's own address from the same `CONNECT_*` variables the worker reads.
fn default_target() -> String {
    if let Ok(l) = std::env::var("CONNECT_LISTENERS") {
        // The first http:// listener (an https-only worker needs one, e.g. on 127.0.0.1).
        if let Some(rest) = l.split(',').find_map(|f| f.trim().strip_prefix("http://")) {
            if let Some((host, port)) = rest.rsplit_once(':') {
                let host = if host.is_empty() || host == "0.0.0.0" { "127.0.0.1" } else { host };
                return format!("{host}:{port}");
            }
        }
    }
    let port = std::env::var("CONNECT_REST_PORT").unwrap_or_else(|_| "8083".to_owned());
    format!("127.0.0.1:{port}")
}

pub fn main(url: Option<&str>) -> anyhow::Result<()> {
    let target = match url {
        Some(u) => u.strip_prefix("http://").ok_or_else(|| anyhow!("only http:// URLs are supported"))?.trim_end_matches('/').to_owned(),
        None => default_target(),
    };
    let addr = target.split('/').next().unwrap_or(&target);
    // A worker whose API asks for credentials (`rest.extension.classes`): the probe runs
    // beside it and reads the same users file (an open API ignores the header).
    let jaas = std::env::var("CONNECT_SLUICE_REST_AUTH_JAAS_CONFIG").ok();
    let opts = std::env::var("KAFKA_OPTS").ok();
    let authorization = sluice_rest::auth::local_probe_authorization(jaas.as_deref(), opts.as_deref());
    let (status, body) = get_health(addr, authorization.as_deref())?;
    if status != "200" {
        bail!("not healthy: HTTP {status} {body}");
    }
    println!("{body}");
    Ok(())
}

/// `GET /health` on `addr`: the status code and body.
fn get_health(addr: &str, authorization: Option<&str>) -> anyhow::Result<(String, String)> {
    let mut stream = TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    write!(stream, "GET /health HTTP/1.0\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response.split_whitespace().nth(1).unwrap_or("").to_owned();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Ok((status, body))
}
