//! `serve` over a real socket, and its shutdown.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::support::app;

#[tokio::test]
async fn serves_until_cancelled() {
    let app = app();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(sluice_rest::serve(listener, app.router.clone(), shutdown.clone()));

    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"GET /connectors/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut response)).await.unwrap().unwrap();
    assert!(response.starts_with("HTTP/1.1 404"), "{response}");
    assert!(response.ends_with(r#"{"error_code":404,"message":"Connector x not found"}"#), "{response}");

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), server).await.expect("server stops").unwrap().unwrap();
}
