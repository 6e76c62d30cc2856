//! `sluice health`: a dependency-free HTTP check of `GET /health`, for the image's
//! HEALTHCHECK (the runtime image has no curl).

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};

/// The worker's own address from the same `CONNECT_*` variables the worker reads.
fn default_target() -> String {
    if let Ok(l) = std::env::var("CONNECT_LISTENERS") {
        if let Some(rest) = l.split(',').next().and_then(|f| f.trim().strip_prefix("http://")) {
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
    let mut stream = TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    write!(stream, "GET /health HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response.split_whitespace().nth(1).unwrap_or("");
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    if status != "200" {
        bail!("not healthy: HTTP {status} {body}");
    }
    println!("{body}");
    Ok(())
}
