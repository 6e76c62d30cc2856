//! `sluice topics`: read the embedded log from outside the worker (it may be running).
//!
//! `consume` prints one JSON object per record:
//! `{"topic","partition","offset","timestamp","headers":[{"key","value"}],"key","value"}`.
//! A key, value or header that is UTF-8 JSON is shown as that JSON; other UTF-8 text as a
//! string; anything else as base64 under `key_base64` / `value_base64` / `value_base64`.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use base64::Engine as _;
use serde_json::{json, Map, Value as Json};
use sluice_api::TopicPartition;
use sluice_runtime::log::embedded::EmbeddedLog;
use sluice_runtime::log::{Log, StoredRecord};
use sluice_runtime::worker::config::DEFAULT_DATA_DIR;

struct Options {
    data_dir: PathBuf,
    topic: Option<String>,
    from_beginning: bool,
    partition: Option<i32>,
    offset: Option<i64>,
    max_messages: Option<u64>,
    follow: bool,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut o = Options {
        data_dir: std::env::var("CONNECT_DATA_DIR").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from(DEFAULT_DATA_DIR)),
        topic: None,
        from_beginning: false,
        partition: None,
        offset: None,
        max_messages: None,
        follow: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or_else(|| anyhow!("{name} needs a value"));
        match a.as_str() {
            "--data-dir" => o.data_dir = PathBuf::from(value("--data-dir")?),
            "--from-beginning" => o.from_beginning = true,
            "--follow" => o.follow = true,
            "--partition" => o.partition = Some(value("--partition")?.parse().context("--partition must be a number")?),
            "--offset" => o.offset = Some(value("--offset")?.parse().context("--offset must be a number")?),
            "--max-messages" => o.max_messages = Some(value("--max-messages")?.parse().context("--max-messages must be a number")?),
            flag if flag.starts_with("--") => bail!("unknown option {flag}"),
            topic => {
                if o.topic.replace(topic.to_owned()).is_some() {
                    bail!("only one topic may be given");
                }
            }
        }
    }
    Ok(o)
}

pub fn main(args: &[String]) -> anyhow::Result<()> {
    let (cmd, rest) = args.split_first().ok_or_else(|| anyhow!("usage: sluice topics list|describe|consume ..."))?;
    let opts = parse(rest)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let log = EmbeddedLog::open_read_only(&opts.data_dir)
            .with_context(|| format!("cannot read the embedded log in {}", opts.data_dir.display()))?;
        match cmd.as_str() {
            "list" => {
                for t in log.list_topics().await? {
                    println!("{t}");
                }
                Ok(())
            }
            "describe" => describe(&log, &opts).await,
            "consume" => consume(&log, &opts).await,
            other => bail!("unknown topics command '{other}': use list, describe or consume"),
        }
    })
}

async fn describe(log: &dyn Log, opts: &Options) -> anyhow::Result<()> {
    let topic = opts.topic.as_deref().ok_or_else(|| anyhow!("describe needs a topic"))?;
    let d = log.describe_topic(topic).await?.ok_or_else(|| anyhow!("topic {topic} does not exist"))?;
    let partitions: Vec<Json> = d
        .partitions
        .iter()
        .map(|p| json!({"partition": p.partition, "start_offset": p.start_offset, "end_offset": p.end_offset, "size_bytes": p.size_bytes}))
        .collect();
    let out = json!({
        "topic": d.name,
        "partition_count": d.partitions.len(),
        "cleanup.policy": d.config.cleanup.name(),
        "retention.ms": d.config.retention_ms.unwrap_or(-1),
        "retention.bytes": d.config.retention_bytes.unwrap_or(-1),
        "partitions": partitions,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

async fn consume(log: &dyn Log, opts: &Options) -> anyhow::Result<()> {
    let topic = opts.topic.as_deref().ok_or_else(|| anyhow!("consume needs a topic"))?;
    let count = log.describe_topic(topic).await?.ok_or_else(|| anyhow!("topic {topic} does not exist"))?.partitions.len() as i32;
    let partitions: Vec<i32> = match opts.partition {
        Some(p) if p < 0 || p >= count => bail!("topic {topic} has no partition {p} (it has {count})"),
        Some(p) => vec![p],
        None => (0..count).collect(),
    };
    let mut next = Vec::new();
    for p in &partitions {
        let tp = TopicPartition::new(topic, *p);
        let (start, end) = log.offsets(&tp).await?;
        let from = match opts.offset {
            Some(o) => o.max(start),
            None if opts.from_beginning => start,
            None => end,
        };
        next.push((tp, from));
    }
    let mut printed = 0u64;
    let stdout = std::io::stdout();
    loop {
        let mut any = false;
        for (tp, pos) in next.iter_mut() {
            let batch = log.read(tp, *pos, 1 << 20, Duration::ZERO).await?;
            for r in &batch {
                let mut out = stdout.lock();
                writeln!(out, "{}", render(tp, r))?;
                printed += 1;
                if opts.max_messages.is_some_and(|m| printed >= m) {
                    return Ok(());
                }
            }
            if let Some(last) = batch.last() {
                *pos = last.offset + 1;
                any = true;
            }
        }
        if !any {
            if !opts.follow {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn render(tp: &TopicPartition, r: &StoredRecord) -> String {
    let mut m = Map::new();
    m.insert("topic".into(), json!(tp.topic));
    m.insert("partition".into(), json!(tp.partition));
    m.insert("offset".into(), json!(r.offset));
    m.insert("timestamp".into(), json!(r.record.timestamp));
    let headers: Vec<Json> = r
        .record
        .headers
        .iter()
        .map(|(k, v)| {
            let mut h = Map::new();
            h.insert("key".into(), json!(k));
            put_bytes(&mut h, "value", v.as_deref());
            Json::Object(h)
        })
        .collect();
    m.insert("headers".into(), Json::Array(headers));
    put_bytes(&mut m, "key", r.record.key.as_deref());
    put_bytes(&mut m, "value", r.record.value.as_deref());
    Json::Object(m).to_string()
}

fn put_bytes(m: &mut Map<String, Json>, field: &str, bytes: Option<&[u8]>) {
    match bytes {
        None => {
            m.insert(field.into(), Json::Null);
        }
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => {
                let v = serde_json::from_str::<Json>(s).unwrap_or_else(|_| Json::String(s.to_owned()));
                m.insert(field.into(), v);
            }
            Err(_) => {
                m.insert(format!("{field}_base64"), json!(base64::engine::general_purpose::STANDARD.encode(b)));
            }
        },
    }
}
