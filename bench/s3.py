#!/usr/bin/env python3
"""S3 sink benchmark: datagen -> embedded log -> S3 sink (Parquet/zstd and JSON) into moto.

Prints records/s, MB/s (of object bytes), CPU-seconds and peak RSS of the worker for each
format, and as a same-run baseline the rate at which boto3 uploads the same number of bytes,
in objects of the same size, to the same server. moto is an in-memory Python server on the
same cores: the numbers compare the sink with a plain client against that server, not with
AWS. Not a test: it asserts nothing; it measures.

usage: bench/s3.py [--records N] [--payload BYTES] [--flush-size N] [--binary PATH] [--only NAME]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from harness import StandaloneWorker, free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/sluice-target"))
S3SH = os.path.join(ROOT, "tests", "services", "s3.sh")
BUCKET = "bench"

FORMATS = [
    ("parquet/zstd", {"format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat", "parquet.codec": "zstd"}),
    ("json", {"format.class": "io.confluent.connect.s3.format.json.JsonFormat"}),
]


def ensure_boto3():
    """Re-runs this script with the python of the s3.sh venv (it has boto3)."""
    try:
        import boto3  # noqa: F401
    except ImportError:
        venv = subprocess.run(["bash", S3SH, "install"], check=True, capture_output=True, text=True).stdout.strip()
        os.execv(os.path.join(venv, "bin", "python"), [os.path.join(venv, "bin", "python")] + sys.argv)


def objects(s3, prefix):
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        out.extend((o["Key"], o["Size"]) for o in page.get("Contents", []))
    return out


def run_sink(binary, s3, endpoint, name, props, args):
    prefix = name.replace("/", "-")
    with StandaloneWorker(binary, {"value.converter.schemas.enable": "true"}, prefix="sluice-bench-s3-") as w:
        cpu0, _ = w.usage()
        start = time.monotonic()
        config = {"connector.class": "s3", "topics": "bench", "s3.bucket.name": BUCKET, "s3.region": "us-east-1", "store.url": endpoint,
                  "aws.access.key.id": "t", "aws.secret.access.key": "t", "flush.size": str(args.flush_size), "topics.dir": prefix}
        config.update(props)
        w.create("sink", config)
        w.create("gen", {"connector.class": "datagen", "kafka.topic": "bench", "quickstart": "bench", "iterations": str(args.records),
                         "records.per.second": "0", "max.interval": "0", "batch.size": "5000", "payload.bytes": str(args.payload)})
        while w.sink_committed() < args.records:
            w.check_alive()
            time.sleep(0.05)
        wall = time.monotonic() - start
        cpu1, rss = w.usage()
        objs = objects(s3, prefix + "/")
    size = sum(s for _, s in objs)
    return {"name": name, "wall": wall, "rate": args.records / wall, "mb": size / 1e6, "mbs": size / 1e6 / wall, "cpu": cpu1 - cpu0, "rss": rss, "objects": len(objs)}


def boto3_baseline(s3, total_bytes, count):
    """Uploads `count` objects totalling `total_bytes` with boto3 (multipart above 25 MiB)."""
    from boto3.s3.transfer import TransferConfig
    import io
    each = max(1, total_bytes // max(1, count))
    blob = os.urandom(each)
    cfg = TransferConfig(multipart_threshold=25 * 1024 * 1024, multipart_chunksize=25 * 1024 * 1024)
    t0 = time.monotonic()
    for i in range(count):
        s3.upload_fileobj(io.BytesIO(blob), BUCKET, f"baseline/{i:06d}", Config=cfg)
    wall = time.monotonic() - t0
    return each * count / 1e6 / wall


def main():
    ensure_boto3()
    import boto3
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--payload", type=int, default=64)
    ap.add_argument("--flush-size", type=int, default=100_000)
    ap.add_argument("--binary", help="a built sluice binary (default: build and use the release one)")
    ap.add_argument("--only", help="run only formats whose name contains this")
    args = ap.parse_args()
    binary = args.binary
    if not binary:
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "sluice"], cwd=ROOT, check=True, env=dict(os.environ, CARGO_TARGET_DIR=TARGET))
        binary = os.path.join(TARGET, "release", "sluice")
    port = free_port()
    pid = subprocess.run(["bash", S3SH, "start", str(port)], check=True, capture_output=True, text=True).stdout.strip()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
        s3.create_bucket(Bucket=BUCKET)
        results = [run_sink(binary, s3, endpoint, n, p, args) for n, p in FORMATS if not args.only or args.only in n]
        print(f"\ndatagen -> embedded log -> S3 sink -> moto, {args.records:,} records, payload {args.payload} B, flush.size {args.flush_size:,}, {os.cpu_count()} cores, {os.path.basename(os.path.dirname(binary))} binary")
        print(f"| {'format':<14} | {'wall s':>7} | {'records/s':>11} | {'object MB':>9} | {'MB/s':>6} | {'boto3 MB/s':>10} | {'CPU s':>6} | {'peak RSS MB':>11} | {'objects':>7} |")
        print(f"|{'-'*16}|{'-'*9}|{'-'*13}|{'-'*11}|{'-'*8}|{'-'*12}|{'-'*8}|{'-'*13}|{'-'*9}|")
        for r in results:
            base = boto3_baseline(s3, int(r["mb"] * 1e6), r["objects"])
            print(f"| {r['name']:<14} | {r['wall']:7.2f} | {r['rate']:11,.0f} | {r['mb']:9.1f} | {r['mbs']:6.1f} | {base:10.1f} | {r['cpu']:6.2f} | {r['rss']:11.1f} | {r['objects']:7} |")
    finally:
        subprocess.run(["bash", S3SH, "stop", pid], check=False)


if __name__ == "__main__":
    sys.exit(main())
