#!/usr/bin/env python3
"""Metrics cost benchmark: the datagen -> embedded log -> discard pipeline with the task
loops' counters on (`metrics.enabled=true`, the default, with /metrics scraped every second as
Prometheus would) and off (`metrics.enabled=false`), alternated in one run so both see the
same machine. Prints each run and the median ratio on/off of wall time, CPU seconds and
peak RSS. Not a test: it asserts nothing; it measures.

usage: bench/metrics.py [--records N] [--rounds R]
"""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from datagen import ROOT, SCHEMALESS, TARGET
from harness import StandaloneWorker


def run(binary, enabled, records):
    props = {"log.fsync": "never", "metrics.enabled": "true" if enabled else "false", **SCHEMALESS}
    with StandaloneWorker(binary, props) as w:
        stop = threading.Event()
        scrapes = [0]

        def scrape():
            while not stop.wait(1.0):
                with urllib.request.urlopen(w.url + "/metrics", timeout=10) as r:
                    r.read()
                scrapes[0] += 1

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        cpu0, _ = w.usage()
        start = time.monotonic()
        w.create("sink", {"connector.class": "discard", "topics": "bench"})
        w.create("gen", {"connector.class": "datagen", "kafka.topic": "bench", "quickstart": "bench", "iterations": str(records),
                         "records.per.second": "0", "max.interval": "0", "batch.size": "5000", "payload.bytes": "64"})
        while w.sink_committed() < records:
            w.check_alive()
            time.sleep(0.02)
        wall = time.monotonic() - start
        cpu1, rss = w.usage()
        stop.set()
        scraper.join()
    return {"enabled": enabled, "wall": wall, "cpu": cpu1 - cpu0, "rss": rss, "scrapes": scrapes[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "sluice"], cwd=ROOT, check=True, env=dict(os.environ, CARGO_TARGET_DIR=TARGET))
    binary = os.path.join(TARGET, "release", "sluice")
    results = []
    for i in range(args.rounds):
        # Alternate which goes first, so drift in the machine's load favours neither.
        order = [False, True] if i % 2 == 0 else [True, False]
        results += [run(binary, enabled, args.records) for enabled in order]
    print(f"\ndatagen -> embedded log (fsync never) -> discard sink, {args.records:,} records, {os.cpu_count()} cores, {args.rounds} rounds")
    print(f"| {'metrics':<8} | {'wall s':>7} | {'records/s':>11} | {'CPU s':>6} | {'peak RSS MB':>11} | {'scrapes':>7} |")
    print(f"|{'-'*10}|{'-'*9}|{'-'*13}|{'-'*8}|{'-'*13}|{'-'*9}|")
    for r in results:
        name = "on" if r["enabled"] else "off"
        print(f"| {name:<8} | {r['wall']:7.2f} | {args.records / r['wall']:11,.0f} | {r['cpu']:6.2f} | {r['rss']:11.1f} | {r['scrapes']:7} |")
    med = lambda enabled, k: statistics.median(r[k] for r in results if r["enabled"] == enabled)  # noqa: E731
    print(f"\nmedian on/off: wall {med(True, 'wall') / med(False, 'wall'):.3f}, CPU {med(True, 'cpu') / med(False, 'cpu'):.3f}, "
          f"peak RSS {med(True, 'rss') / med(False, 'rss'):.3f}")


if __name__ == "__main__":
    sys.exit(main())
