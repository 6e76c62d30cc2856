#!/usr/bin/env python3
"""Pipeline benchmark: datagen -> embedded log -> discard sink, at full speed.

Prints a table of wall seconds, records/s, MB/s (of log bytes), CPU-seconds and peak RSS
for each configuration, and as a same-run baseline the machine's raw sequential write rate
(dd with fdatasync) of the same number of bytes: the ratio column says how close the
pipeline gets to the disk. Not a test: it asserts nothing; it measures.

usage: bench/datagen.py [--records N] [--payload BYTES] [--only NAME]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from harness import StandaloneWorker, free_port, proc_usage  # noqa: E402  (kafka.py uses these through this module)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/sluice-target"))
CLK_TCK = os.sysconf("SC_CLK_TCK")

SCHEMALESS = {"value.converter.schemas.enable": "false", "key.converter.schemas.enable": "false"}
# A 3-transform chain on the source: InsertField (static), ReplaceField (rename), RegexRouter.
CHAIN = {
    "transforms": "insert,rename,route",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.static.field": "origin",
    "transforms.insert.static.value": "bench",
    "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.rename.renames": "payload:body",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "bench-raw",
    "transforms.route.replacement": "bench",
}

CONFIGS = [
    # name, worker properties, extra source connector config
    ("json, fsync=always", {"log.fsync": "always", **SCHEMALESS}, {}),
    ("json + 3 transforms, always", {"log.fsync": "always", **SCHEMALESS}, CHAIN),
    ("json+schemas, fsync=always", {"log.fsync": "always", "value.converter.schemas.enable": "true", "key.converter.schemas.enable": "true"}, {}),
    ("json, fsync=never", {"log.fsync": "never", **SCHEMALESS}, {}),
]








def run_pipeline(binary, name, props, source_extra, records, payload):
    with StandaloneWorker(binary, props) as w:
        cpu0, _ = w.usage()
        start = time.monotonic()
        w.create("sink", {"connector.class": "discard", "topics": "bench"})
        w.create("gen", {"connector.class": "datagen", "kafka.topic": "bench-raw" if source_extra else "bench", "quickstart": "bench",
                         "iterations": str(records), "records.per.second": "0", "max.interval": "0", "batch.size": "5000",
                         "payload.bytes": str(payload), **source_extra})
        while w.sink_committed() < records:
            w.check_alive()
            time.sleep(0.02)
        wall = time.monotonic() - start
        cpu1, rss = w.usage()
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(w.work, "data", "topics", "bench")) for f in fs)
    return {"name": name, "wall": wall, "rate": records / wall, "mb": size / 1e6, "mbs": size / 1e6 / wall, "cpu": cpu1 - cpu0, "rss": rss}


def dd_baseline(size_mb):
    work = tempfile.mkdtemp(prefix="sluice-bench-dd-")
    try:
        path = os.path.join(work, "f")
        count = max(1, int(size_mb))
        t0 = time.monotonic()
        subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={count}", "conv=fdatasync"], check=True, capture_output=True)
        return count / (time.monotonic() - t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--payload", type=int, default=64, help="payload bytes per row (64 gives ~100-byte JSON values)")
    ap.add_argument("--only", help="run only configurations whose name contains this")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "sluice"], cwd=ROOT, check=True, env=dict(os.environ, CARGO_TARGET_DIR=TARGET))
    binary = os.path.join(TARGET, "release", "sluice")
    results = [run_pipeline(binary, n, p, x, args.records, args.payload) for n, p, x in CONFIGS if not args.only or args.only in n]
    disk = dd_baseline(max(r["mb"] for r in results))
    print(f"\ndatagen -> embedded log -> discard sink, {args.records:,} records, payload {args.payload} B, {os.cpu_count()} cores")
    print(f"baseline: dd sequential write with fdatasync, same run: {disk:,.0f} MB/s\n")
    print(f"| {'configuration':<28} | {'wall s':>7} | {'records/s':>11} | {'log MB/s':>8} | {'vs dd':>6} | {'CPU s':>6} | {'CPU s/M rec':>11} | {'peak RSS MB':>11} |")
    print(f"|{'-'*30}|{'-'*9}|{'-'*13}|{'-'*10}|{'-'*8}|{'-'*8}|{'-'*13}|{'-'*13}|")
    for r in results:
        print(f"| {r['name']:<28} | {r['wall']:7.2f} | {r['rate']:11,.0f} | {r['mbs']:8.1f} | {r['mbs']/disk:6.2f} | {r['cpu']:6.2f} | {r['cpu']/(args.records/1e6):11.2f} | {r['rss']:11.1f} |")


if __name__ == "__main__":
    sys.exit(main())
