#!/usr/bin/env python3
"""Postgres source benchmark: how close sluice gets to the replication protocol's limit.

One run, one throwaway Postgres 15 (tests/services/postgres.sh), one table
(id bigint pk, name text, qty int, price int, note text, created timestamptz):

1. Logical slots are created first, one per reader, so every reader drains the same WAL.
2. N rows are inserted in 1,000-row transactions.
3. Streaming, each reader from its own slot:
   - pg_recvlogical (pgoutput, proto_version 1, the same publication) to /dev/null, up to
     the end LSN: the physical limit (the walsender decodes; the client only receives);
   - sluice: Postgres -> embedded log, with JsonConverter schemas off and on, until the
     connector's committed offset covers the last row (offsets are committed only after
     the records they cover are durable in the log). This is the source path the goal is
     about (Postgres -> records -> JSON -> log), as pg_recvlogical's row is the protocol.
     A one-row marker transaction after the N rows gives the end: its record is the last,
     so an offset at or past its LSN means every row is in the log.
   --with-sink adds a discard sink reading the topic back (ByteArrayConverter; with
   --sink-json it parses the JSON too) and waits for it to consume the N rows instead:
   end to end, the sink's read path included.
4. Snapshot: sluice with snapshot.mode=initial_only and a new slot, until the committed
   offset is the snapshot's last record (or, with --with-sink, the sink consumed N rows).

Prints wall seconds, rows/s, client CPU-seconds, peak RSS and the ratio to pg_recvlogical
(time of pg_recvlogical / time of the row). Not a test: it asserts nothing; it measures.

With --baseline BINARY, every sluice row is also run with that binary (an older build,
e.g. main's), against the same Postgres and WAL, so a change is compared under the same
conditions.

usage: bench/postgres.py [--rows N] [--only NAME] [--baseline BINARY] [--with-sink [--sink-json]]
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
from harness import StandaloneWorker, free_port, http, proc_system_cpu  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/sluice-target"))
PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
PUBLICATION = "bench_pub"
TOPIC = "pg.public.bench"

STREAMING = [
    # name, slot, worker properties
    ("sluice json", "sluice_json", {"value.converter.schemas.enable": "false", "key.converter.schemas.enable": "false"}),
    ("sluice json+schemas", "sluice_schemas", {"value.converter.schemas.enable": "true", "key.converter.schemas.enable": "true"}),
]








class Postgres:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-bench-pg-")
        self.port = free_port()
        subprocess.run(["bash", os.path.join(ROOT, "tests/services/postgres.sh"), "start", self.dir, str(self.port)], check=True, capture_output=True)

    def psql(self, sql):
        out = subprocess.run([os.path.join(PGBIN, "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                              "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"], input=sql, capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def stop(self):
        subprocess.run(["bash", os.path.join(ROOT, "tests/services/postgres.sh"), "stop", self.dir, "immediate"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def lsn_int(text):
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def pg_recvlogical(pg, slot, end_lsn, rows):
    cmd = [os.path.join(PGBIN, "pg_recvlogical"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", "-d", "postgres",
           "--slot", slot, "--start", "-o", "proto_version=1", "-o", f"publication_names={PUBLICATION}",
           "--endpos", end_lsn, "--no-loop", "-f", "/dev/null"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"pg_recvlogical failed: {proc.stderr.read().decode()}")
    return {"name": "pg_recvlogical (limit)", "wall": wall, "rate": rows / wall, "cpu": usage.ru_utime + usage.ru_stime,
            "sys": usage.ru_stime, "rss": usage.ru_maxrss / 1024}


SINK = None  # None: source only; "bytes" or "json": a discard sink reads the topic back


def source_done(w, marker_lsn):
    """True once the connector's committed offset covers the marker row (streaming: an LSN at
    or past it) or the snapshot's last record (marker_lsn None)."""
    _, body = http("GET", w.url + "/connectors/pg/offsets")
    for o in (body or {}).get("offsets", []):
        off = o["offset"]
        if marker_lsn is None:
            if off.get("last_snapshot_record") is True or off.get("snapshot") is not True:
                return True
        elif max(off.get("lsn") or 0, off.get("lsn_commit") or 0) >= marker_lsn:
            return True
    return False


def run_sluice(binary, pg, name, props, connector, rows, marker_lsn):
    config = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": str(pg.port), "database.user": "postgres", "database.password": "",
        "database.dbname": "postgres", "topic.prefix": "pg", "table.include.list": "public.bench", "plugin.name": "pgoutput",
        "publication.name": PUBLICATION, "publication.autocreate.mode": "disabled",
    }
    config.update(connector)
    with StandaloneWorker(binary, props) as w:
        cpu0, _ = w.usage()
        sys0 = proc_system_cpu(w.proc.pid)
        start = time.monotonic()
        if SINK:
            sink = {"connector.class": "discard", "topics": TOPIC}
            if SINK == "bytes":
                sink.update({"key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
                             "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"})
            w.create("sink", sink)
        w.create("pg", config)
        while not (w.sink_committed() >= rows if SINK else source_done(w, marker_lsn)):
            w.check_alive()
            code, status = http("GET", w.url + "/connectors/pg/status")
            failed = [t for t in (status or {}).get("tasks", []) if t.get("state") == "FAILED"]
            if failed:
                raise RuntimeError(f"the postgres task failed: {failed[0].get('trace')}")
            time.sleep(0.02)
        wall = time.monotonic() - start
        cpu1, rss = w.usage()
        sys1 = proc_system_cpu(w.proc.pid)
    return {"name": name, "wall": wall, "rate": rows / wall, "cpu": cpu1 - cpu0, "sys": sys1 - sys0, "rss": rss}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--only", help="run only the sluice configurations whose name contains this")
    ap.add_argument("--baseline", help="also run every sluice row with this binary, labelled 'baseline'")
    ap.add_argument("--with-sink", action="store_true", help="a discard sink reads the topic back; the rows end when it has consumed them")
    ap.add_argument("--sink-json", action="store_true", help="with --with-sink: the sink parses the JSON back (JsonConverter) instead of taking bytes")
    args = ap.parse_args()
    global SINK
    SINK = ("json" if args.sink_json else "bytes") if args.with_sink else None
    rows = args.rows - args.rows % 1000
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "sluice"], cwd=ROOT, check=True, env=dict(os.environ, CARGO_TARGET_DIR=TARGET))
    binary = os.path.join(TARGET, "release", "sluice")
    pg = Postgres()
    try:
        pg.psql(f"""CREATE TABLE bench (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL, price int, note text, created timestamptz NOT NULL);
                    CREATE PUBLICATION {PUBLICATION} FOR TABLE bench;""")
        binaries = [("", binary)] + ([("baseline ", os.path.abspath(args.baseline))] if args.baseline else [])
        streaming = [(label + name, bin_, ("base_" if label else "") + slot, props) for label, bin_ in binaries for name, slot, props in STREAMING
                     if not args.only or args.only in name]
        slots = ["recv"] + [slot for _, _, slot, _ in streaming]
        pg.psql("".join(f"SELECT pg_create_logical_replication_slot('{s}', 'pgoutput');\n" for s in slots))
        t0 = time.monotonic()
        pg.psql("".join(
            f"INSERT INTO bench SELECT g, 'name ' || g, g % 100, g % 1000, md5(g::text), now() FROM generate_series({a}, {a + 999}) g;\n"
            for a in range(1, rows + 1, 1000)))
        insert = time.monotonic() - t0
        # The marker: one more row in its own transaction, so its record is the stream's last.
        marker_lsn = lsn_int(pg.psql("SELECT pg_current_wal_insert_lsn()"))
        pg.psql(f"INSERT INTO bench VALUES ({rows + 1}, 'marker', 0, 0, '', now())")
        end_lsn = pg.psql("SELECT pg_current_wal_lsn()")
        wal_mb = int(pg.psql(f"SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'recv'")) / 1e6

        results = [pg_recvlogical(pg, "recv", end_lsn, rows)]
        for name, bin_, slot, props in streaming:
            results.append(run_sluice(bin_, pg, name, props, {"slot.name": slot, "snapshot.mode": "no_data"}, rows, marker_lsn))
        snapshot = [run_sluice(bin_, pg, f"{name} snapshot", props, {"slot.name": slot + "_snap", "snapshot.mode": "initial_only"}, rows, None)
                    for name, bin_, slot, props in streaming]
    finally:
        pg.stop()

    limit = results[0]["wall"]
    print(f"\nPostgres 15 -> sluice, {rows:,} rows inserted in 1,000-row transactions ({insert:.1f} s, {wal_mb:.0f} MB of WAL), {os.cpu_count()} cores")
    path = f"embedded log -> discard sink ({'JsonConverter' if SINK == 'json' else 'ByteArrayConverter'})" if SINK else \
        "embedded log (done when the committed source offset covers the last row)"
    print(f"streaming: each reader drains the same WAL from its own slot; sluice: Postgres -> {path}\n")
    print("CPU s/M rows: user + system CPU-seconds per million rows; 'of it kernel' is the system part "
          "(for sluice mostly writing the log into the page cache)\n")
    header = (f"| {'reader':<32} | {'wall s':>7} | {'rows/s':>9} | {'vs limit':>8} | {'CPU s':>6} | {'CPU s/M rows':>12} "
              f"| {'of it kernel':>12} | {'peak RSS MB':>11} |")
    print(header)
    print(f"|{'-'*34}|{'-'*9}|{'-'*11}|{'-'*10}|{'-'*8}|{'-'*14}|{'-'*14}|{'-'*13}|")
    per_m = rows / 1e6
    for r in results + snapshot:
        vs = f"{limit / r['wall']:8.2f}" if r in results else f"{'':>8}"
        print(f"| {r['name']:<32} | {r['wall']:7.2f} | {r['rate']:9,.0f} | {vs} | {r['cpu']:6.2f} | {r['cpu'] / per_m:12.2f} "
              f"| {r['sys'] / per_m:12.2f} | {r['rss']:11.1f} |")


if __name__ == "__main__":
    sys.exit(main())
