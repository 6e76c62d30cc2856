#!/usr/bin/env python3
"""Warehouse sink benchmark: embedded log -> JDBC sink -> PostgreSQL, beside a plain COPY.

One run, one throwaway Postgres 15 (tests/services/postgres.sh):

1. A file of N Debezium change events (JsonConverter with schemas: envelope with
   before/after/op/ts_ms; value id bigint, name text, qty int, price double, note text,
   updated io.debezium.time.MicroTimestamp) over K keys: the first K events insert
   (op c), the rest update (op u) key i % K, each with new values.
2. Producing the topic is not measured: a FileStreamSource reads the file with
   value.converter=StringConverter, so each line lands in the log as it is; then that
   worker stops.
3. Per configuration, a fresh worker on the same log runs only the warehouse sink
   (io.debezium.connector.jdbc.JdbcSinkConnector, value.converter=JsonConverter schemas on,
   upsert, primary.key.mode=record_value on id, auto-create: a table of fillfactor 70, the
   sink's default for upserts, or --fillfactor) into an empty database. Measured from the
   sink's creation until sluice_sink_offsets holds the end offset N.
4. The limit, same run: psql's \\copy of the same final K rows (TSV) into an empty table
   of the same columns with the primary key (Postgres' default fillfactor, 100); the
   fastest of three runs.
5. Postgres' own upsert limit, same run, per batch.size: every event's row loaded into a
   table on the server beforehand (not measured), then applied in event order by one DO
   block, batch.size rows per transaction, with the sink's statement (INSERT … SELECT … ON
   CONFLICT DO UPDATE) into a table of the sink's fillfactor: what the server needs for
   these upserts with no client at all.

Prints wall seconds, events/s, client CPU-seconds and peak RSS (sluice: the sink-only worker;
the COPY: psql),
Postgres server CPU-seconds (postmaster, its live children, and the children it reaped)
and two ratios to the COPY: by rate (the COPY's rows/s over the sink's events/s) and by time
(wall of the row over the COPY's wall; the COPY loads 10x fewer rows). Not a test: it asserts
nothing but the final row count; it measures.

The workers keep the default log.cache.bytes (64 MiB), so the sink reads most of the
topic from disk rather than the page cache; BENCH_LOG_CACHE_BYTES=0 leaves it all cached
(measured: 96.5k-97.8k vs 101k events/s at batch.size=3000, 1.98 vs 1.94x of the
server-side upsert).

usage: bench/warehouse.py [--events N] [--keys K] [--batch-sizes 500,3000] [--fillfactor 70]
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
from harness import free_port, http, proc_usage  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/sluice-target"))
PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
CLK_TCK = os.sysconf("SC_CLK_TCK")
TOPIC = "bench"
COLUMNS = "id bigint PRIMARY KEY, name text, qty integer, price double precision, note text, updated timestamp"

ROW_FIELDS = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "int32", "optional": False, "field": "qty"},
    {"type": "double", "optional": True, "field": "price"},
    {"type": "string", "optional": True, "field": "note"},
    {"type": "int64", "optional": False, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "updated"},
]
SCHEMA = {
    "type": "struct", "optional": False, "name": "bench.public.items.Envelope", "version": 1,
    "fields": [
        {"type": "struct", "optional": True, "name": "bench.public.items.Value", "fields": ROW_FIELDS, "field": "before"},
        {"type": "struct", "optional": True, "name": "bench.public.items.Value", "fields": ROW_FIELDS, "field": "after"},
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}
EPOCH_US = 1_700_000_000_000_000


def row(key, version):
    return {"id": key, "name": f"name {key}", "qty": (key * 7 + version) % 1000, "price": round(key * 0.01 + version, 2),
            "note": f"note {key:08d} version {version:04d} " + "x" * (key % 40), "updated": EPOCH_US + version * 1_000_000 + key}


def tsv_row(r):
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["updated"] // 1_000_000)) + f".{r['updated'] % 1_000_000:06d}"
    return f"{r['id']}\t{r['name']}\t{r['qty']}\t{r['price']!r}\t{r['note']}\t{ts}\n"


def generate(path, tsv, events_tsv, events, keys):
    """Writes the events file, the TSV of the final rows and the TSV of every event's row (in
    event order, numbered); returns the events file's size."""
    prefix = '{"schema":' + json.dumps(SCHEMA, separators=(",", ":")) + ',"payload":{"before":null,"after":'
    with open(path, "w") as f:
        for i in range(events):
            key, version = i % keys, i // keys
            op = "c" if version == 0 else "u"
            f.write(f'{prefix}{json.dumps(row(key, version), separators=(",", ":"))},"op":"{op}","ts_ms":{1_700_000_000_000 + i}}}}}\n')
    with open(tsv, "w") as f:
        for key in range(min(keys, events)):
            f.write(tsv_row(row(key, (events - 1 - key) // keys)))
    with open(events_tsv, "w") as f:
        for i in range(events):
            f.write(f"{i}\t" + tsv_row(row(i % keys, i // keys)))
    return os.path.getsize(path)








class Postgres:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-bench-pg-")
        self.port = free_port()
        subprocess.run(["bash", os.path.join(ROOT, "tests/services/postgres.sh"), "start", self.dir, str(self.port)], check=True, capture_output=True)
        with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
            self.pid = int(f.readline())

    def psql(self, sql, db="postgres"):
        out = subprocess.run([os.path.join(PGBIN, "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db,
                              "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"], input=sql, capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def cpu(self):
        """CPU-seconds of the server: postmaster, its live children and those it reaped."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total = sum(int(x) for x in fields[11:15])
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.pid:
                total += int(fields[11]) + int(fields[12])
        return total / CLK_TCK

    def stop(self):
        subprocess.run(["bash", os.path.join(ROOT, "tests/services/postgres.sh"), "stop", self.dir, "immediate"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class Worker:
    def __init__(self, binary, work):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        props = {
            "listeners": self.url,
            "data.dir": os.path.join(work, "data"),
            "offset.flush.interval.ms": "200",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "log.fsync": "never",
            "log.cache.bytes": os.environ.get("BENCH_LOG_CACHE_BYTES", "67108864"),
        }
        path = os.path.join(work, "worker.properties")
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        self.proc = subprocess.Popen([binary, "standalone", path], cwd=work, env=dict(os.environ, RUST_LOG="warn"),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(600):
            try:
                if http("GET", self.url + "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("sluice did not come up")

    def check(self, name):
        if self.proc.poll() is not None:
            raise RuntimeError(f"sluice exited: {self.proc.stderr.read().decode()}")
        _, status = http("GET", f"{self.url}/connectors/{name}/status")
        failed = [t for t in (status or {}).get("tasks", []) if t.get("state") == "FAILED"]
        if failed:
            raise RuntimeError(f"task of {name} failed: {failed[0].get('trace')}")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def produce(binary, work, events_file, size):
    w = Worker(binary, work)
    try:
        t0 = time.monotonic()
        code, body = http("POST", w.url + "/connectors", {"name": "file", "config": {
            "connector.class": "FileStreamSource", "file": events_file, "topic": TOPIC, "batch.size": "5000",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter"}})
        assert code == 201, body
        while True:
            _, body = http("GET", w.url + "/connectors/file/offsets")
            if any(o["offset"].get("position") == size for o in (body or {}).get("offsets", [])):
                break
            w.check("file")
            time.sleep(0.1)
        took = time.monotonic() - t0
        code, body = http("DELETE", w.url + "/connectors/file")
        assert code in (200, 204), body
    finally:
        w.stop()
    return took


def run_sink(binary, work, pg, batch_size, events, keys, fillfactor):
    db = f"wh_{batch_size}"
    pg.psql(f"CREATE DATABASE {db}")
    w = Worker(binary, work)
    try:
        _, existing = http("GET", w.url + "/connectors")
        assert not existing, f"connectors left from an earlier phase: {existing}"
        name = f"sink_{batch_size}"
        config = {
            "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", "topics": TOPIC,
            "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{db}", "connection.username": "postgres", "connection.password": "",
            "insert.mode": "upsert", "primary.key.mode": "record_value", "primary.key.fields": "id", "schema.evolution": "basic",
            "batch.size": str(batch_size), "sluice.table.fillfactor": str(fillfactor), "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true",
        }
        cpu0, _ = proc_usage(w.proc.pid)
        pg0 = pg.cpu()
        start = time.time()
        code, body = http("POST", w.url + "/connectors", {"name": name, "config": config})
        assert code == 201, body
        # Progress is polled through the worker's REST API (the consumer offsets the sink
        # reports once its writes committed): a psql poll would start a server backend each
        # time, whose CPU would count as the sink's load on the server. The end time is when
        # the sink wrote its last offsets into the target, as the target's clock says (the
        # same machine's clock), read once at the end.
        while True:
            _, body = http("GET", f"{w.url}/connectors/{name}/offsets")
            if sum(o["offset"]["kafka_offset"] for o in (body or {}).get("offsets", [])) >= events:
                break
            w.check(name)
            time.sleep(0.1)
        done, finished = pg.psql(
            f"SELECT coalesce(sum(next_offset), 0), extract(epoch FROM max(updated_at)) FROM sluice_sink_offsets WHERE connector = '{name}'",
            db).split("|")
        assert int(done) == events, f"the target's offsets hold {done}, the worker's {events}"
        wall = float(finished) - start
        cpu1, rss = proc_usage(w.proc.pid)
        pg1 = pg.cpu()
        code, body = http("DELETE", f"{w.url}/connectors/{name}")
        assert code in (200, 204), body
    finally:
        w.stop()
    rows = int(pg.psql("SELECT count(*) FROM bench", db))
    assert rows == min(keys, events), f"{rows} rows in the target, expected {min(keys, events)}"
    return {"name": f"sink, batch.size={batch_size}", "wall": wall, "rate": events / wall, "cpu": cpu1 - cpu0, "pg": pg1 - pg0, "rss": rss}


def plain_copy(pg, tsv, events, keys, runs=3):
    """psql's \\copy of the final rows into an empty table, `runs` times (a fresh table each
    time); the fastest run counts (a COPY of 100k rows takes a few tenths of a second, so a
    single run varies with the machine's noise)."""
    best = None
    pg.psql("CREATE DATABASE wh_copy")
    for _ in range(runs):
        pg.psql(f"DROP TABLE IF EXISTS bench; CREATE TABLE bench ({COLUMNS}); CHECKPOINT", "wh_copy")
        pg0 = pg.cpu()
        start = time.monotonic()
        proc = subprocess.Popen([os.path.join(PGBIN, "psql"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", "-d", "wh_copy",
                                 "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", f"\\copy bench FROM '{tsv}'"], stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"COPY failed: {proc.stderr.read().decode()}")
        time.sleep(0.5)  # the server backend ends (and is reaped) just after psql
        pg1 = pg.cpu()
        rows = int(pg.psql("SELECT count(*) FROM bench", "wh_copy"))
        assert rows == min(keys, events), rows
        run = {"name": f"psql \\copy of the final {rows:,} rows", "wall": wall, "rate": rows / wall,
               "cpu": usage.ru_utime + usage.ru_stime, "pg": pg1 - pg0, "rss": usage.ru_maxrss / 1024}
        if best is None or run["wall"] < best["wall"]:
            best = run
    best["name"] += f" (best of {runs})"
    return best


def server_upsert(pg, events_tsv, events, keys, batch, fillfactor):
    """Postgres' own limit for these upserts: every event's row already in a table on the
    server (loaded beforehand, not measured), applied in event order, `batch` rows per
    transaction, with the sink's statement shape (INSERT … SELECT … ON CONFLICT DO UPDATE),
    by one session and no client in between."""
    db = f"wh_server_{batch}"
    pg.psql(f"CREATE DATABASE {db}")
    pg.psql(f"CREATE TABLE bench ({COLUMNS}) WITH (fillfactor = {fillfactor}); "
            f"CREATE TABLE events (seq bigint PRIMARY KEY, {COLUMNS.replace(' PRIMARY KEY', '')})", db)
    pg.psql(f"\\copy events FROM '{events_tsv}'\nVACUUM ANALYZE events;", db)
    sets = ", ".join(f"{c} = excluded.{c}" for c in ("name", "qty", "price", "note", "updated"))
    body = (f"DO $$ DECLARE b bigint; BEGIN FOR b IN 0..{(events - 1) // batch} LOOP "
            f"INSERT INTO bench SELECT id, name, qty, price, note, updated FROM events WHERE seq >= b * {batch} AND seq < (b + 1) * {batch} "
            f"ON CONFLICT (id) DO UPDATE SET {sets}; COMMIT; END LOOP; END $$;")
    pg0 = pg.cpu()
    start = time.monotonic()
    proc = subprocess.Popen([os.path.join(PGBIN, "psql"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", "-d", db,
                             "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", body], stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the server-side upsert failed: {proc.stderr.read().decode()}")
    time.sleep(0.5)
    pg1 = pg.cpu()
    rows = int(pg.psql("SELECT count(*) FROM bench", db))
    assert rows == min(keys, events), rows
    return {"name": f"server-side upsert, {batch}/transaction", "wall": wall, "rate": events / wall, "cpu": usage.ru_utime + usage.ru_stime,
            "pg": pg1 - pg0, "rss": usage.ru_maxrss / 1024}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--batch-sizes", default="500,3000", help="the sink's batch.size values to run (500 is Debezium's default, 3000 Confluent's)")
    ap.add_argument("--fillfactor", type=int, default=70, help="sluice.table.fillfactor of the sink's table (70 is its default for upserts), "
                    "and the server-side upsert's table")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "sluice"], cwd=ROOT, check=True, env=dict(os.environ, CARGO_TARGET_DIR=TARGET))
    binary = os.path.join(TARGET, "release", "sluice")
    work = tempfile.mkdtemp(prefix="sluice-bench-wh-")
    pg = None
    try:
        events_file, tsv, events_tsv = os.path.join(work, "events.json"), os.path.join(work, "final.tsv"), os.path.join(work, "events.tsv")
        os.chmod(work, 0o755)
        size = generate(events_file, tsv, events_tsv, args.events, args.keys)
        produced = produce(binary, work, events_file, size)
        pg = Postgres()
        results = [plain_copy(pg, tsv, args.events, args.keys)]
        for b in args.batch_sizes.split(","):
            results.append(server_upsert(pg, events_tsv, args.events, args.keys, int(b), args.fillfactor))
            results.append(run_sink(binary, work, pg, int(b), args.events, args.keys, args.fillfactor))
    finally:
        if pg:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)

    limit = results[0]
    print(f"\nembedded log -> warehouse sink -> Postgres 15, {args.events:,} change events (JsonConverter with schemas, "
          f"{size / args.events:,.0f} B each) over {args.keys:,} keys, {os.cpu_count()} cores, "
          f"target tables of fillfactor {args.fillfactor}")
    print(f"topic produced beforehand by FileStreamSource in {produced:.1f} s (not measured); the COPY's rate is rows/s, "
          f"the others' events/s; 'rate vs COPY' = COPY rows/s / events/s, 'time vs COPY' = wall / COPY wall; "
          f"'server-side upsert' = Postgres applying the same events from a table it already holds, with the sink's statement "
          f"and transaction size and no client (the upsert limit; 'vs server' = its rate / the sink's)\n")
    print(f"| {'writer':<48} | {'wall s':>7} | {'rows|events/s':>13} | {'rate vs COPY':>12} | {'time vs COPY':>12} | {'vs server':>9} | {'client CPU s':>12} | {'pg CPU s':>8} | {'peak RSS MB':>11} |")
    print(f"|{'-'*50}|{'-'*9}|{'-'*15}|{'-'*14}|{'-'*14}|{'-'*11}|{'-'*14}|{'-'*10}|{'-'*13}|")
    server = None
    for r in results:
        if r["name"].startswith("server-side"):
            server = r
        vs = f"{server['rate'] / r['rate']:9.2f}" if server and r["name"].startswith("sink") else f"{'':9}"
        print(f"| {r['name']:<48} | {r['wall']:7.2f} | {r['rate']:13,.0f} | {limit['rate'] / r['rate']:12.2f} | {r['wall'] / limit['wall']:12.2f} "
              f"| {vs} | {r['cpu']:12.2f} | {r['pg']:8.2f} | {r['rss']:11.1f} |")


if __name__ == "__main__":
    sys.exit(main())
