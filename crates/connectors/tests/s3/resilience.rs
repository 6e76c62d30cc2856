//! Store outages, refused credentials and missing buckets.

use crate::harness::*;

/// The store goes away mid-stream: puts fail as retriable (the runtime redelivers), and once
/// it is back the same batch completes; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_outage_is_retried_and_nothing_is_lost() {
    let mut moto = Moto::start();
    moto.create_bucket().await;
    let mut t = task(moto.props(&[("format.class", format_class("json")), ("flush.size", "2")])).await.unwrap();
    put_retrying(&mut t, &orders(0, 4, |i| T0 + i), 1).await;
    let mut seen = Vec::new();
    for k in moto.keys().await {
        seen.extend(json_ids(&moto.get(&k).await, false));
    }
    assert_eq!(seen, vec![0, 1, 2, 3]);
    assert_eq!(durable(&mut t, &tp(), 4).await, Some(4));

    moto.stop();
    let batch = orders(4, 9, |i| T0 + i);
    let err = t.put(batch.clone()).await.unwrap_err();
    eprintln!("{}", err.trace());
    assert!(err.is_retriable(), "an unreachable store is retriable: {}", err.trace());
    assert!(err.to_string().contains("will retry"), "{err}");
    // Redelivered while the store is still down: still retriable, offsets do not move.
    assert!(t.put(batch.clone()).await.unwrap_err().is_retriable());
    assert_eq!(durable(&mut t, &tp(), 9).await, Some(4));

    // moto keeps objects in memory: the restarted server is empty, so only what is written
    // after the outage is there now.
    moto.restart();
    moto.create_bucket().await;
    put_retrying(&mut t, &batch, 20).await;
    let keys = moto.keys().await;
    assert_eq!(keys, vec!["topics/orders/partition=0/orders+0+0000000004.json", "topics/orders/partition=0/orders+0+0000000006.json"]);
    for k in &keys {
        seen.extend(json_ids(&moto.get(k).await, false));
    }
    assert_eq!(seen, (0..8).collect::<Vec<_>>(), "every record exactly once");
    assert_eq!(durable(&mut t, &tp(), 9).await, Some(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_fail_the_task_with_a_clear_error() {
    // moto checks SigV4 and the access key after its first request (which creates the bucket).
    let moto = Moto::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "1")]);
    moto.create_bucket().await;
    let props = moto.props(&[
        ("format.class", format_class("json")),
        ("flush.size", "2"),
        ("aws.access.key.id", "AKIAWRONG"),
        ("aws.secret.access.key", "nope"),
    ]);
    let err = match task(props).await {
        Ok(_) => panic!("a task with wrong credentials must not start"),
        Err(e) => e,
    };
    eprintln!("{}", err.trace());
    assert!(!err.is_retriable(), "{}", err.trace());
    let msg = err.to_string();
    assert!(msg.contains("refused") && msg.contains("aws.access.key.id"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_fails_the_task_with_a_clear_error() {
    let moto = Moto::start();
    let err = match task(moto.props(&[("format.class", format_class("json")), ("flush.size", "2")])).await {
        Ok(_) => panic!("a task writing to a missing bucket must not start"),
        Err(e) => e,
    };
    eprintln!("{}", err.trace());
    assert!(!err.is_retriable(), "{}", err.trace());
    assert!(err.to_string().contains("does not exist") && err.to_string().contains(BUCKET), "{err}");
}

/// Closing a partition drops its open objects: an unfinished multipart upload is aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_aborts_unfinished_multipart_uploads() {
    let moto = Moto::start();
    moto.create_bucket().await;
    let mut t =
        task(moto.props(&[("format.class", format_class("json")), ("flush.size", "1000000"), ("s3.part.size", "5242880")])).await.unwrap();
    let mut n = 0;
    while moto.incomplete_uploads().await == 0 {
        put_retrying(&mut t, &orders(n, n + 2000, |i| T0 + i), 1).await;
        n += 2000;
    }
    t.close(&[tp()]).await.unwrap();
    assert_eq!(moto.incomplete_uploads().await, 0);
    assert!(moto.keys().await.is_empty(), "nothing partial is visible");
}

/// A task killed mid-upload leaves an unfinished multipart upload; the next task that opens
/// the partition aborts it (and nothing of it ever became visible).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_aborts_uploads_left_by_a_crashed_task() {
    let moto = Moto::start();
    moto.create_bucket().await;
    let props = moto.props(&[("format.class", format_class("json")), ("flush.size", "1000000"), ("s3.part.size", "5242880")]);
    let mut t = task(props.clone()).await.unwrap();
    let mut n = 0;
    while moto.incomplete_uploads().await == 0 {
        put_retrying(&mut t, &orders(n, n + 2000, |i| T0 + i), 1).await;
        n += 2000;
    }
    drop(t); // a crash: no close, no abort
             // Another partition's upload (e.g. another task's) is left alone.
    let other = moto
        .client()
        .create_multipart_upload()
        .bucket(BUCKET)
        .key("topics/orders/partition=1/orders+1+0000000000.json")
        .send()
        .await
        .unwrap();
    assert_eq!(moto.incomplete_uploads().await, 2);
    let mut t = task(props).await.unwrap();
    t.open(&[tp()]).await.unwrap();
    assert_eq!(moto.incomplete_uploads().await, 1);
    let left = moto.client().list_multipart_uploads().bucket(BUCKET).send().await.unwrap();
    assert_eq!(left.uploads()[0].upload_id(), other.upload_id());
    assert!(moto.keys().await.is_empty());
}

/// A front for moto that answers the first `fail` requests itself with `status` and an S3
/// error `code`, then forwards every connection to moto untouched.
struct Flaky {
    port: u16,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Flaky {
    async fn start(upstream: u16, fail: usize, status: &'static str, code: &'static str) -> Self {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = requests.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else { return };
                let counter = counter.clone();
                tokio::spawn(async move {
                    // One whole request (headers and Content-Length body).
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 65536];
                    let head_end = loop {
                        let n = conn.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let len: usize =
                        head.lines().find_map(|l| l.strip_prefix("content-length:")).map(|v| v.trim().parse().unwrap_or(0)).unwrap_or(0);
                    while buf.len() < head_end + len {
                        let n = conn.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    if counter.fetch_add(1, Ordering::SeqCst) < fail {
                        let body = if head.starts_with("head ") {
                            String::new()
                        } else {
                            format!("<Error><Code>{code}</Code><Message>injected by the test</Message></Error>")
                        };
                        let reply = format!(
                            "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = conn.write_all(reply.as_bytes()).await;
                        let _ = conn.shutdown().await;
                        return;
                    }
                    let Ok(mut up) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else { return };
                    if up.write_all(&buf).await.is_ok() {
                        let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                    }
                });
            }
        });
        Self { port, requests }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// 503 SlowDown and 500 InternalError are retried inside the task with backoff
/// (`s3.part.retries`); a request that still fails after them is a retriable error (the
/// runtime redelivers); 403 AccessDenied is fatal at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_and_server_errors_are_retried_with_backoff() {
    let moto = Moto::start();
    moto.create_bucket().await;
    let key = "topics/orders/partition=0/orders+0+0000000000.json";

    // Two failures, three retries: the put succeeds without the runtime noticing.
    let flaky = Flaky::start(moto.port, 2, "503 Slow Down", "SlowDown").await;
    let url = flaky.url();
    let props =
        moto.props(&[("format.class", format_class("json")), ("flush.size", "2"), ("store.url", url.as_str()), ("s3.part.retries", "3")]);
    let mut t = task(props).await.expect("start through the flaky front");
    t.put(orders(0, 2, |i| T0 + i)).await.expect("retried inside the task");
    assert_eq!(json_ids(&moto.get(key).await, false), vec![0, 1]);
    assert!(flaky.requests() >= 3, "{} requests", flaky.requests());

    // More failures than retries: a retriable error that names the cause.
    let flaky = Flaky::start(moto.port, 1_000, "500 Internal Server Error", "InternalError").await;
    let url = flaky.url();
    let props = moto.props(&[
        ("format.class", format_class("json")),
        ("flush.size", "2"),
        ("store.url", url.as_str()),
        ("s3.part.retries", "2"),
        ("topics.dir", "five"),
    ]);
    let mut t = task(props).await.expect("an unhealthy store does not stop the start");
    let before = flaky.requests();
    let err = t.put(orders(0, 2, |i| T0 + i)).await.unwrap_err();
    eprintln!("{}", err.trace());
    assert!(err.is_retriable() && err.to_string().contains("InternalError"), "{}", err.trace());
    assert_eq!(flaky.requests() - before, 3, "one attempt and two retries");

    // Access denied: fatal, no retries.
    let flaky = Flaky::start(moto.port, 1_000, "403 Forbidden", "AccessDenied").await;
    let url = flaky.url();
    let props = moto.props(&[("format.class", format_class("json")), ("flush.size", "2"), ("store.url", url.as_str())]);
    let err = match task(props).await {
        Ok(_) => panic!("403 at start must fail the task"),
        Err(e) => e,
    };
    assert!(!err.is_retriable(), "{}", err.trace());
}
