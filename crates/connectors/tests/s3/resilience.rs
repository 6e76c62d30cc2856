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
    let props = moto.props(&[("format.class", format_class("json")), ("flush.size", "2"), ("aws.access.key.id", "AKIAWRONG"), ("aws.secret.access.key", "nope")]);
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
    let mut t = task(moto.props(&[("format.class", format_class("json")), ("flush.size", "1000000"), ("s3.part.size", "5242880")])).await.unwrap();
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
    let other = moto.client().create_multipart_upload().bucket(BUCKET).key("topics/orders/partition=1/orders+1+0000000000.json").send().await.unwrap();
    assert_eq!(moto.incomplete_uploads().await, 2);
    let mut t = task(props).await.unwrap();
    t.open(&[tp()]).await.unwrap();
    assert_eq!(moto.incomplete_uploads().await, 1);
    let left = moto.client().list_multipart_uploads().bucket(BUCKET).send().await.unwrap();
    assert_eq!(left.uploads()[0].upload_id(), other.upload_id());
    assert!(moto.keys().await.is_empty());
}
