#!/usr/bin/env python3
"""Soak test: Postgres -> sluice -> warehouse and S3 at a steady rate for a long time, with
faults, checking that nothing is lost and that nothing grows without bound.

One worker (`sluice standalone`, embedded log), one throwaway Postgres 15
(tests/services/postgres.sh), one moto (tests/services/s3.sh):

    writer ──▶ Postgres db postgres: items, hot ──WAL──▶ Postgres source (slot soak_slot)
                                                            │
                              embedded log: soak.public.items (cleanup.policy=delete,
                              retention.ms), soak.public.hot (cleanup.policy=compact)
                                   │                              │
          JDBC sink (upsert by key, deletes) ◀── both topics      └──▶ S3 sink (JSON lines)
          into db wh of the same Postgres                              items only, through a
                                                                       TCP gate to moto

1. Tables `items` (inserts, updates, deletes) and `hot` (updates of a fixed set of keys)
   with `id bigint` primary keys, REPLICA IDENTITY FULL, and per row `seq`, the number of
   the change that wrote it last (one counter over both tables), `n` (updates) and `pad`
   (--row-bytes of text). Seeded before the source starts, so the snapshot carries them.
2. The source creates its topics (KIP-158 `topic.creation.*`): items with
   `retention.ms` (--retention-s), hot compacted. The embedded log's segments are fixed
   (128 MiB, 16 MiB for compacted topics) and maintenance runs every 30 s, so the rate
   and row size decide when retention and compaction get sealed segments to work on:
   the defaults roll the items topic about every minute.
3. A writer thread commits --rate changes/s (one transaction per 20 ms tick): of them
   20% update `hot`, the rest insert (35%), update (50%) or delete (15%) `items`.
4. Every --fault-every seconds the next fault of the cycle: the source's replication
   connection terminated server-side (pg_terminate_backend of the slot's active_pid); the
   warehouse sink's connections terminated (application_name sluice-jdbc-sink); the S3
   endpoint unreachable for --s3-outage seconds (new connections refused, open ones
   reset). moto itself is not restarted: it keeps everything in memory, so a restart
   would forget the bucket and every object (a missing bucket is fatal for the sink, by
   design), which no real S3 does. A fault is recovered once every change committed when
   it cleared is in both destinations and the slot's confirmed_flush_lsn has passed the
   WAL position of that moment; it must be within --recovery-timeout seconds. The next
   fault waits for the previous one's recovery.
5. Every --sample-every seconds: the worker's RSS (VmRSS) and open descriptors, the bytes
   of its log directory (du), the warehouse's and S3's lag (changes committed minus the
   newest `seq` applied / read back) and the slot's lag (pg_current_wal_lsn() -
   confirmed_flush_lsn). The S3 objects are read as they appear, straight from moto, and
   deleted once counted (moto would hold them all in memory).
6. At the end the writer stops; once both destinations have everything: each warehouse
   table equals its source table (count, md5 of every row in key order); S3 holds every
   change of `items` (inserts, snapshot reads and updates by their `seq`, deletes by key),
   none lost, duplicates counted (allowed: delivery is at least once).

Fails (exit 1, every failed check named) when: a change is lost or a table differs; RSS or
descriptors in the last third of the run exceed 1.5x the first third's maximum plus 20 MB /
20; a fault does not recover in time; retention deleted no segment of the items topic or
compaction never rewrote the hot one; the items topic's bytes on disk in the last third
exceed what retention keeps (the active segment, the sealed segments of the last
retention.ms plus one maintenance interval at the measured rate, one segment of slack), or
the hot topic's exceed three compacted segments.

Prints the summary tables; --json writes every sample and figure, --plot a PNG of RSS, lag
and disk over time (matplotlib, from bench/venv.sh). `--plot-only SUMMARY.json --plot PNG`
draws a saved summary again. The worker's output (warnings and errors) and moto's log stay
in a temporary directory whose path is printed. A run takes --minutes plus about 15 s; at 3
minutes, --fault-every 50 brings each of the three faults once.

usage: bench/soak.py [--minutes 30] [--rate 500] [--fault-every 60] [--sample-every 5] [--binary PATH]
                     [--plot PNG] [--json PATH] [--row-bytes 1500] [--retention-s 60] [--s3-outage 10]
"""
import argparse
import collections
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from harness import ROOT, TARGET, StandaloneWorker, free_port, http, proc_usage  # noqa: E402
from s3 import S3SH, ensure_boto3  # noqa: E402

PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
PGSH = os.path.join(ROOT, "tests", "services", "postgres.sh")
BUCKET = "soak"
SLOT = "soak_slot"
ITEMS, HOT = "soak.public.items", "soak.public.hot"
# The embedded log's fixed sizes (crates/runtime/src/log/embedded.rs): segments of delete
# topics, of compacted topics, and the time between two retention/compaction passes.
SEGMENT_BYTES = 128 << 20
COMPACTED_SEGMENT_BYTES = 16 << 20
MAINTENANCE_S = 30
SEED_ITEMS, HOT_KEYS = 2000, 200
HOT_SHARE, INSERT_SHARE, UPDATE_SHARE = 0.2, 0.35, 0.5  # of items changes: the rest deletes
TICK = 0.02
FAULTS = ["source", "warehouse", "s3"]
FAULT_NAMES = {"source": "source replication connection terminated", "warehouse": "warehouse sink connections terminated",
               "s3": "S3 endpoint unreachable"}
# Kinds of change by seq, as the writer records them.
ITEM_ROW, HOT_ROW, ITEM_DELETE = 1, 2, 3
MB = 1 << 20


class Session:
    """One psql kept open (its own connection, `application_name` app): SQL in, rows out."""

    def __init__(self, port, db, app):
        self.args = [os.path.join(PGBIN, "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", db,
                     "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]
        self.env = dict(os.environ, PGAPPNAME=app)
        self.open()

    def open(self):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=self.env)
        self.run("SET client_min_messages = warning;")

    def run(self, sql):
        """Runs `sql`; returns its output lines. Raises when psql ended (an error stops it)."""
        try:
            self.proc.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo __end__\n")
            self.proc.stdin.flush()
        except OSError:
            pass
        out = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                raise RuntimeError(f"psql {' '.join(self.args[-7:-5])} ended: {self.proc.stderr.read().strip()}")
            line = line.rstrip("\n")
            if line == "__end__":
                return out
            out.append(line)

    def query(self, sql):
        """`run`, once more on a new connection when the first one was lost."""
        try:
            return self.run(sql)
        except RuntimeError:
            self.open()
            return self.run(sql)

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=10)


class Postgres:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-soak-pg-")
        self.port = free_port()
        subprocess.run(["bash", PGSH, "start", self.dir, str(self.port)], check=True, capture_output=True)

    def psql(self, sql, db="postgres"):
        out = subprocess.run([os.path.join(PGBIN, "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db,
                              "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"], input=sql, capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def stop(self):
        subprocess.run(["bash", PGSH, "stop", self.dir, "immediate"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def table_sql(with_source_settings):
    sql = ""
    for t in ("items", "hot"):
        sql += f"CREATE TABLE {t} (id bigint PRIMARY KEY, seq bigint NOT NULL, n int NOT NULL, pad text NOT NULL); CREATE INDEX ON {t} (seq);\n"
        if with_source_settings:
            sql += f"ALTER TABLE {t} REPLICA IDENTITY FULL;\n"
    return sql


class Writer(threading.Thread):
    """Commits `rate` changes/s, one transaction per tick, and records every change's kind
    by its seq (the number every written row carries)."""

    def __init__(self, pg, rate, pad_repeat):
        super().__init__(daemon=True)
        self.session = Session(pg.port, "postgres", "soak-writer")
        self.rate, self.pad_repeat = rate, pad_repeat
        self.rng = random.Random(1)
        self.kinds = bytearray(1 + SEED_ITEMS + HOT_KEYS)
        self.kinds[1:1 + SEED_ITEMS] = bytes([ITEM_ROW]) * SEED_ITEMS
        self.kinds[1 + SEED_ITEMS:] = bytes([HOT_ROW]) * HOT_KEYS
        self.next_seq = 1 + SEED_ITEMS + HOT_KEYS
        self.live = list(range(1, SEED_ITEMS + 1))
        self.next_id = SEED_ITEMS + 1
        self.deleted = {}  # id -> the seq of its delete
        self.item_last, self.hot_last = SEED_ITEMS, SEED_ITEMS + HOT_KEYS  # newest committed seq of a row of each table
        self.counts = collections.Counter()
        self.stop_event = threading.Event()
        self.error = None
        self.started = self.stopped = None

    def pad(self, seq):
        return f"repeat(md5('{seq}'), {self.pad_repeat})"

    def change(self, kind):
        """One statement; returns (sql, kind, seq, id)."""
        seq = self.next_seq
        self.next_seq += 1
        if kind == "hot":
            key = self.rng.randint(1, HOT_KEYS)
            return f"UPDATE hot SET seq = {seq}, n = n + 1, pad = {self.pad(seq)} WHERE id = {key};", HOT_ROW, seq, key
        if kind == "insert":
            key = self.next_id
            self.next_id += 1
            self.live.append(key)
            return f"INSERT INTO items VALUES ({key}, {seq}, 0, {self.pad(seq)});", ITEM_ROW, seq, key
        i = self.rng.randrange(len(self.live))
        key = self.live[i]
        if kind == "update":
            return f"UPDATE items SET seq = {seq}, n = n + 1, pad = {self.pad(seq)} WHERE id = {key};", ITEM_ROW, seq, key
        self.live[i] = self.live[-1]
        self.live.pop()
        return f"DELETE FROM items WHERE id = {key};", ITEM_DELETE, seq, key

    def pick(self):
        if self.rng.random() < HOT_SHARE:
            return "hot"
        r = self.rng.random()
        if len(self.live) < 100 or r < INSERT_SHARE:
            return "insert"
        return "update" if r < INSERT_SHARE + UPDATE_SHARE else "delete"

    def commit(self, kinds):
        changes = [self.change(k) for k in kinds]
        self.session.run("BEGIN;\n" + "\n".join(c[0] for c in changes) + "\nCOMMIT;")
        self.kinds.extend(bytes(self.next_seq - len(self.kinds)))
        for (_, kind, seq, key), name in zip(changes, kinds):
            self.kinds[seq] = kind
            self.counts[name] += 1
            if kind == ITEM_DELETE:
                self.deleted[key] = seq
            elif kind == ITEM_ROW:
                self.item_last = seq
            else:
                self.hot_last = seq

    def run(self):
        try:
            self.started = time.monotonic()
            done = 0
            while not self.stop_event.is_set():
                due = int(self.rate * (time.monotonic() - self.started)) - done
                if due <= 0:
                    time.sleep(TICK)
                    continue
                n = min(due, max(1, int(self.rate * TICK * 5)))
                self.commit([self.pick() for _ in range(n)])
                done += n
            self.stopped = time.monotonic()
            # The last changes are rows of both tables (not deletes), so that the newest seq
            # of each table marks the end in both destinations.
            self.commit(["update", "hot"])
        except Exception as e:  # noqa: BLE001 (reported by the main loop)
            self.error = e
        finally:
            self.session.close()

    def total(self):
        return sum(self.counts.values())


class S3Reader(threading.Thread):
    """Reads the S3 sink's objects as they appear (from moto directly, not through the gate),
    counts the change events in them by seq (deletes by key) and deletes each object read."""

    def __init__(self, endpoint):
        super().__init__(daemon=True)
        import boto3
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
        self.seen = bytearray()  # seq -> times read (saturating at 255)
        self.deletes = collections.Counter()  # id -> delete events read
        self.max_seq = 0
        self.objects = self.events = self.bytes = 0
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.error = None

    def poll(self):
        """Reads every object there now; returns how many."""
        with self.lock:
            keys = []
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="soak/"):
                keys.extend(o["Key"] for o in page.get("Contents", []))
            for key in sorted(keys):
                body = self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
                for line in body.splitlines():
                    if line.strip():
                        self.count(json.loads(line))
                self.s3.delete_object(Bucket=BUCKET, Key=key)
                self.objects += 1
                self.bytes += len(body)
            return len(keys)

    def count(self, value):
        if isinstance(value, dict) and "payload" in value and "schema" in value:
            value = value["payload"]
        self.events += 1
        if value["op"] == "d":
            self.deletes[value["before"]["id"]] += 1
            return
        seq = value["after"]["seq"]
        if seq >= len(self.seen):
            self.seen.extend(bytes(seq + 1 - len(self.seen) + 4096))
        self.seen[seq] = min(255, self.seen[seq] + 1)
        self.max_seq = max(self.max_seq, seq)

    def run(self):
        while not self.stop_event.wait(1.0):
            try:
                self.poll()
            except Exception as e:  # noqa: BLE001 (reported by the main loop)
                self.error = e
                return


class Gate:
    """The S3 sink's endpoint: a TCP relay to moto that can go down (new connections
    refused, open ones reset) and come back on the same port."""

    def __init__(self, upstream):
        self.upstream, self.port = upstream, free_port()
        self.lock = threading.Lock()
        self.conns = set()
        self.listener = None
        self.up()

    def up(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(128)
        self.listener = s
        threading.Thread(target=self.accept, args=(s,), daemon=True).start()

    def accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, a, b):
        try:
            while True:
                data = a.recv(1 << 16)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.lock:
            for s in (a, b):
                if s in self.conns:
                    self.conns.discard(s)
                    s.close()

    def down(self):
        listener, self.listener = self.listener, None
        listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        listener.close()
        with self.lock:
            conns = list(self.conns)
        for s in conns:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class LogDir:
    """What the worker's embedded log holds on disk, sampled: bytes (as du counts them), and
    per topic its segment files, so that deleted segments (retention) and shrunk or merged
    ones (compaction) show; each file's largest size seen adds up to the bytes written."""

    def __init__(self, data):
        self.data = data
        self.last = {ITEMS: {}, HOT: {}}  # file -> size at the last sample
        self.largest = {ITEMS: {}, HOT: {}}  # file -> largest size seen
        self.retention_deleted = 0
        self.compactions = 0

    def topic_files(self, topic):
        files = {}
        for root, _, names in os.walk(os.path.join(self.data, "topics", topic)):
            for n in names:
                if n.endswith(".log"):
                    try:
                        files[os.path.join(root, n)] = os.stat(os.path.join(root, n)).st_size
                    except FileNotFoundError:
                        pass
        return files

    def sample(self):
        total = 0
        for root, _, names in os.walk(self.data):
            for n in names:
                try:
                    total += os.lstat(os.path.join(root, n)).st_blocks * 512
                except FileNotFoundError:
                    pass
        sizes = {}
        for topic, last in self.last.items():
            files = self.topic_files(topic)
            gone = [f for f in last if f not in files]
            shrunk = [f for f, size in files.items() if size < last.get(f, 0)]
            if topic == ITEMS:
                self.retention_deleted += len(gone)
            elif gone or shrunk:
                self.compactions += 1
            largest = self.largest[topic]
            for f, size in files.items():
                largest[f] = max(size, largest.get(f, 0))
            self.last[topic] = files
            sizes[topic] = sum(files.values())
        return total, sizes

    def written(self, topic):
        """Bytes ever written to the topic's segments (about: compaction rewrites some)."""
        return sum(self.largest[topic].values())


def proc_status(pid):
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd")), threads


class Soak:
    def __init__(self, args, binary):
        self.args, self.binary = args, binary
        self.samples, self.faults, self.task_states = [], [], collections.Counter()
        self.traces = {}

    # -- positions ------------------------------------------------------------------------
    def positions(self):
        """The newest seq in each warehouse table, the newest read from S3, the slot's
        confirmed LSN and the current WAL LSN (bytes)."""
        wh_items, wh_hot = (int(x) for x in self.wh.query(
            "SELECT coalesce((SELECT max(seq) FROM items), 0), coalesce((SELECT max(seq) FROM hot), 0)")[0].split("|"))
        row = self.mon.query(f"SELECT (pg_current_wal_lsn() - '0/0')::bigint, coalesce((confirmed_flush_lsn - '0/0')::bigint, 0) "
                             f"FROM pg_replication_slots WHERE slot_name = '{SLOT}'")
        wal, confirmed = (int(x) for x in row[0].split("|")) if row else (0, 0)
        return {"wh_items": wh_items, "wh_hot": wh_hot, "s3": self.reader.max_seq, "confirmed": confirmed, "wal": wal}

    def marks(self):
        wal = int(self.mon.query("SELECT (pg_current_wal_lsn() - '0/0')::bigint")[0])
        return {"item": self.writer.item_last, "hot": self.writer.hot_last, "wal": wal}

    @staticmethod
    def reached(pos, marks):
        return (pos["wh_items"] >= marks["item"] and pos["wh_hot"] >= marks["hot"] and pos["s3"] >= marks["item"]
                and pos["confirmed"] >= marks["wal"])

    # -- faults ---------------------------------------------------------------------------
    def inject(self, kind):
        if kind == "source":
            hit = self.mon.query(f"SELECT count(pg_terminate_backend(active_pid)) FROM pg_replication_slots "
                                 f"WHERE slot_name = '{SLOT}' AND active_pid IS NOT NULL")[0]
        elif kind == "warehouse":
            hit = self.mon.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                 "WHERE application_name = 'sluice-jdbc-sink'")[0]
        else:
            hit = len(self.gate.conns) // 2
            self.gate.down()
        return int(hit)

    # -- samples --------------------------------------------------------------------------
    def sample(self, t, pos):
        rss, fds, threads = proc_status(self.worker.proc.pid)
        cpu, peak = proc_usage(self.worker.proc.pid)
        prev = self.samples[-1] if self.samples else {"t": 0.0, "cpu_s": cpu}
        disk, topics = self.logdir.sample()
        committed = self.writer.item_last
        s = {"t": round(t, 1), "rss_mb": round(rss, 1), "peak_rss_mb": round(peak, 1), "fds": fds, "threads": threads,
             "cpu_s": round(cpu, 2), "cpu_pct": round(100 * (cpu - prev["cpu_s"]) / max(0.1, t - prev["t"]), 1), "disk_mb": round(disk / MB, 1),
             "items_topic_mb": round(topics[ITEMS] / MB, 1), "hot_topic_mb": round(topics[HOT] / MB, 1),
             "wh_lag": max(0, max(committed - pos["wh_items"], self.writer.hot_last - pos["wh_hot"])),
             "s3_lag": max(0, committed - pos["s3"]), "slot_lag_mb": round(max(0, pos["wal"] - pos["confirmed"]) / MB, 2),
             "changes": self.writer.total()}
        for name in ("src", "wh", "s3"):
            _, body = http("GET", f"{self.worker.url}/connectors/{name}/status")
            for task in (body or {}).get("tasks", []) or [{"state": "NO TASK"}]:
                state = task.get("state")
                if state != "RUNNING":
                    self.task_states[(name, state)] += 1
                    if task.get("trace"):
                        self.traces.setdefault(name, task["trace"].splitlines()[0][:300])
        self.samples.append(s)
        return s

    def check_running(self):
        if self.worker.proc.poll() is not None:
            raise RuntimeError(f"sluice exited with {self.worker.proc.returncode}; its output: {self.stderr_path}")
        for thread in (self.writer, self.reader):
            if thread.error:
                raise RuntimeError(f"{type(thread).__name__} failed: {thread.error}")

    # -- the run --------------------------------------------------------------------------
    def run(self):
        self.out_dir = tempfile.mkdtemp(prefix="sluice-soak-")
        self.pg = Postgres()
        moto_port = free_port()
        self.moto_pid = subprocess.run(["bash", S3SH, "start", str(moto_port), os.path.join(self.out_dir, "moto.log")],
                                       check=True, capture_output=True, text=True).stdout.strip()
        try:
            self.reader = S3Reader(f"http://127.0.0.1:{moto_port}")
            self.reader.s3.create_bucket(Bucket=BUCKET)
            self.gate = Gate(moto_port)
            return self.run_with_services()
        finally:
            subprocess.run(["bash", S3SH, "stop", self.moto_pid], check=False)
            self.pg.stop()

    def run_with_services(self):
        a, pg = self.args, self.pg
        pad_repeat = max(1, a.row_bytes // 32)
        pg.psql(table_sql(True) +
                f"INSERT INTO items SELECT g, g, 0, repeat(md5(g::text), {pad_repeat}) FROM generate_series(1, {SEED_ITEMS}) g;\n"
                f"INSERT INTO hot SELECT g, {SEED_ITEMS} + g, 0, repeat(md5(({SEED_ITEMS} + g)::text), {pad_repeat}) "
                f"FROM generate_series(1, {HOT_KEYS}) g;\nCREATE DATABASE wh;")
        pg.psql(table_sql(False), "wh")
        self.mon = Session(pg.port, "postgres", "soak-monitor")
        self.wh = Session(pg.port, "wh", "soak-monitor")
        with StandaloneWorker(self.binary, {}, prefix="sluice-soak-worker-") as w:
            self.worker = w
            self.stderr_path = os.path.join(self.out_dir, "worker.log")
            self.warnings = 0
            threading.Thread(target=self.drain, args=(w.proc.stderr,), daemon=True).start()
            self.logdir = LogDir(os.path.join(w.work, "data"))
            try:
                return self.run_with_worker()
            finally:
                self.wh.close()
                self.mon.close()
                if hasattr(self, "writer") and self.writer.is_alive():
                    self.writer.stop_event.set()
                self.reader.stop_event.set()

    def drain(self, stderr):
        """Copies the worker's output (warnings and errors) to a file as it comes, counting
        the lines: a full pipe would stop the worker."""
        with open(self.stderr_path, "wb") as f:
            for line in stderr:
                f.write(line)
                f.flush()
                self.warnings += 1

    def run_with_worker(self):
        a, pg, w = self.args, self.pg, self.worker
        w.create("src", {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.hostname": "127.0.0.1",
            "database.port": str(pg.port), "database.user": "postgres", "database.password": "", "database.dbname": "postgres",
            "topic.prefix": "soak", "slot.name": SLOT, "plugin.name": "pgoutput", "table.include.list": "public.items,public.hot",
            "poll.interval.ms": "100", "status.update.interval.ms": "1000",
            "topic.creation.default.replication.factor": "-1", "topic.creation.default.partitions": "1",
            "topic.creation.default.cleanup.policy": "delete", "topic.creation.default.retention.ms": str(a.retention_s * 1000),
            "topic.creation.groups": "hot", "topic.creation.hot.include": HOT.replace(".", r"\."),
            "topic.creation.hot.cleanup.policy": "compact",
        })
        # The sinks start once the source created both topics (with their settings).
        deadline = time.monotonic() + 120
        while not all(os.path.isdir(os.path.join(self.logdir.data, "topics", t)) for t in (ITEMS, HOT)):
            self.check_running_worker("src")
            if time.monotonic() > deadline:
                raise RuntimeError("the source did not create its topics in 120 s")
            time.sleep(0.2)
        w.create("wh", {
            "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", "topics": f"{ITEMS},{HOT}",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/wh", "connection.username": "postgres", "connection.password": "",
            "insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": "true",
            "collection.name.format": "${source.table}", "batch.size": "500",
        })
        w.create("s3", {
            "connector.class": "io.confluent.connect.s3.S3SinkConnector", "topics": ITEMS, "s3.bucket.name": BUCKET,
            "s3.region": "us-east-1", "store.url": f"http://127.0.0.1:{self.gate.port}", "aws.access.key.id": "t",
            "aws.secret.access.key": "t", "format.class": "io.confluent.connect.s3.format.json.JsonFormat", "topics.dir": "soak",
            "flush.size": "5000", "rotate.schedule.interval.ms": "2000", "timezone": "UTC", "behavior.on.null.values": "ignore",
        })
        self.writer = Writer(pg, a.rate, max(1, a.row_bytes // 32))
        self.reader.start()
        self.writer.start()
        start = time.monotonic()
        duration = a.minutes * 60
        next_sample, next_fault, cycle = 0.0, float(a.fault_every), 0
        open_fault = None  # the fault not yet recovered
        while True:
            now = time.monotonic() - start
            if now >= duration:
                break
            self.check_running()
            pos = self.positions()
            if open_fault:
                f = open_fault
                if f["cleared"] is None and now >= f["at"] + a.s3_outage:
                    self.gate.up()
                    f["cleared"], f["marks"] = round(now, 1), self.marks()
                elif f["cleared"] is not None and self.reached(pos, f["marks"]):
                    f["recovered_s"] = round(now - f["cleared"], 1)
                    f["warnings"] = self.warnings - f["warnings_before"]
                    open_fault = None
                elif f["cleared"] is not None and now - f["cleared"] > a.recovery_timeout:
                    f["recovered_s"] = None
                    f["position"] = pos
                    f["warnings"] = self.warnings - f["warnings_before"]
                    open_fault = None
            elif now >= next_fault:
                kind = FAULTS[cycle % len(FAULTS)]
                cycle += 1
                marks_before = self.marks()
                hit = self.inject(kind)
                f = {"n": cycle, "kind": kind, "at": round(now, 1), "hit": hit, "cleared": None, "recovered_s": None,
                     "marks_before": marks_before, "warnings_before": self.warnings}
                if kind != "s3":
                    f["cleared"], f["marks"] = f["at"], self.marks()
                self.faults.append(f)
                open_fault = f
                next_fault = max(next_fault + a.fault_every, now + 1)
            if now >= next_sample:
                self.sample(now, pos)
                next_sample += a.sample_every
            time.sleep(max(0.0, min(1.0, start + next_sample - time.monotonic(), start + duration - time.monotonic())))

        # The end: the writer stops; wait for both destinations to hold everything.
        self.writer.stop_event.set()
        self.writer.join(timeout=60)
        self.check_running()
        run_s = time.monotonic() - start
        final = self.marks()
        drain_start = time.monotonic()
        drained = None
        while time.monotonic() - drain_start < a.drain_timeout:
            self.check_running()
            now = time.monotonic() - start
            pos = self.positions()
            if open_fault and open_fault["cleared"] is None:  # the writer stopped during an S3 outage
                self.gate.up()
                open_fault["cleared"], open_fault["marks"] = round(now, 1), self.marks()
                pos = self.positions()
            if open_fault and self.reached(pos, open_fault["marks"]):
                open_fault["recovered_s"] = round(now - open_fault["cleared"], 1)
                open_fault["warnings"] = self.warnings - open_fault["warnings_before"]
                open_fault = None
            if self.reached(pos, final):
                drained = time.monotonic() - drain_start
                break
            if now >= next_sample:
                self.sample(now, pos)
                next_sample += a.sample_every
            time.sleep(0.5)
        self.reader.stop_event.set()
        self.reader.join(timeout=30)
        time.sleep(2.5)  # one more rotation (rotate.schedule.interval.ms) for the last objects
        self.reader.poll()
        self.sample(time.monotonic() - start, self.positions())
        return self.verify(run_s, drained, final)

    def check_running_worker(self, name):
        if self.worker.proc.poll() is not None:
            raise RuntimeError(f"sluice exited; its output: {self.stderr_path}")
        _, body = http("GET", f"{self.worker.url}/connectors/{name}/status")
        failed = [t for t in (body or {}).get("tasks", []) if t.get("state") == "FAILED"]
        if failed:
            raise RuntimeError(f"the {name} task failed: {failed[0].get('trace')}")

    # -- the checks -----------------------------------------------------------------------
    def compare_tables(self):
        out = {}
        digest = "SELECT count(*), md5(coalesce(string_agg(id || ':' || seq || ':' || n || ':' || md5(pad), ',' ORDER BY id), '')) FROM {t}"
        for t in ("items", "hot"):
            src = self.pg.psql(digest.format(t=t)).split("|")
            dst = self.pg.psql(digest.format(t=t), "wh").split("|")
            row = {"source_rows": int(src[0]), "warehouse_rows": int(dst[0]), "equal": src == dst}
            if src != dst:
                a = dict(line.split("|") for line in self.pg.psql(f"SELECT id, seq FROM {t}").splitlines())
                b = dict(line.split("|") for line in self.pg.psql(f"SELECT id, seq FROM {t}", "wh").splitlines())
                row["missing"] = sum(1 for k in a if k not in b)
                row["extra"] = sum(1 for k in b if k not in a)
                row["stale"] = sum(1 for k in a if k in b and a[k] != b[k])
                row["examples"] = [k for k in a if b.get(k) != a[k]][:10] + [k for k in b if k not in a][:10]
            out[t] = row
        return out

    def s3_counts(self):
        kinds, seen, deletes = self.writer.kinds, self.reader.seen, self.reader.deletes
        expected = lost = dup = 0
        lost_examples = []
        for seq, kind in enumerate(kinds):
            if kind != ITEM_ROW:
                continue
            expected += 1
            n = seen[seq] if seq < len(seen) else 0
            if n == 0:
                lost += 1
                if len(lost_examples) < 10:
                    lost_examples.append(seq)
            else:
                dup += n - 1
        for key, seq in self.writer.deleted.items():
            expected += 1
            n = deletes.get(key, 0)
            if n == 0:
                lost += 1
                if len(lost_examples) < 10:
                    lost_examples.append(f"delete of id {key} (seq {seq})")
            else:
                dup += n - 1
        unexpected = sum(1 for seq in range(len(seen)) if seen[seq] and (seq >= len(kinds) or kinds[seq] != ITEM_ROW))
        unexpected += sum(1 for key in deletes if key not in self.writer.deleted)
        return {"expected": expected, "read": self.reader.events, "lost": lost, "duplicated": dup, "unexpected": unexpected,
                "objects": self.reader.objects, "mb": round(self.reader.bytes / MB, 1), "lost_examples": lost_examples}

    def verify(self, run_s, drained, final):
        a = self.args
        run_s = round(run_s, 1)
        checks = []

        def check(name, ok, detail):
            checks.append({"name": name, "ok": bool(ok), "detail": detail})

        tables = self.compare_tables()
        s3 = self.s3_counts()
        changes = self.writer.total()
        item_changes = changes - self.writer.counts["hot"]
        check("drained", drained is not None,
              f"both destinations had every change {drained:.1f} s after the writer stopped" if drained is not None else
              f"not every change reached the destinations {a.drain_timeout} s after the writer stopped (final positions: {self.positions()}, marks {final})")
        for t, row in tables.items():
            check(f"warehouse {t} equals source", row["equal"],
                  f"{row['source_rows']} rows, count and md5 equal" if row["equal"] else
                  f"source {row['source_rows']} rows, warehouse {row['warehouse_rows']}: {row.get('missing')} missing, "
                  f"{row.get('extra')} extra, {row.get('stale')} stale (ids {row.get('examples')})")
        check("S3 holds every items change", s3["lost"] == 0 and s3["unexpected"] == 0,
              f"{s3['expected']} expected, {s3['read']} read, {s3['lost']} lost, {s3['duplicated']} duplicated, "
              f"{s3['unexpected']} unexpected" + (f"; lost e.g. seq {s3['lost_examples']}" if s3["lost"] else ""))

        run = [s for s in self.samples if s["t"] <= run_s]
        third = run_s / 3
        first = [s for s in run if s["t"] < third] or run[:1]
        middle = [s for s in run if third <= s["t"] < 2 * third] or run[:1]
        last = [s for s in run if s["t"] >= 2 * third] or run[-1:]
        for key, unit, slack in (("rss_mb", "MB", 20), ("fds", "", 20)):
            limit = 1.5 * max(s[key] for s in first) + slack
            top = max(s[key] for s in last)
            check(f"{key} bounded", top <= limit, f"last third max {top}{unit}, limit {limit:.0f}{unit} (1.5 x first third max + {slack})")
        for f in self.faults:
            ok = f["recovered_s"] is not None and f["recovered_s"] <= a.recovery_timeout
            check(f"fault {f['n']} recovered", ok,
                  f"{FAULT_NAMES[f['kind']]} at {f['at']} s: " +
                  (f"recovered {f['recovered_s']} s after it cleared" if ok else
                   f"not recovered {a.recovery_timeout} s after it cleared at {f['cleared']} s (positions {f.get('position')}, marks {f.get('marks')})"))
        if run_s >= 2 * a.fault_every:
            check("faults injected", len(self.faults) >= 2, f"{len(self.faults)} faults in {run_s:.0f} s")

        written = self.logdir.written(ITEMS)
        rate = written / max(1.0, run_s)
        keep = SEGMENT_BYTES + rate * (a.retention_s + MAINTENANCE_S) + SEGMENT_BYTES
        top = max(s["items_topic_mb"] for s in last)
        check("retention deleted segments", self.logdir.retention_deleted > 0,
              f"{self.logdir.retention_deleted} segments of {ITEMS} deleted; {written / MB:.0f} MB written to it "
              f"({rate / MB:.2f} MB/s), segments of {SEGMENT_BYTES // MB} MB" +
              ("" if self.logdir.retention_deleted else ": run longer, or raise --rate or --row-bytes"))
        check(f"{ITEMS} on disk bounded", top * MB <= keep,
              f"last third max {top:.0f} MB, retention keeps at most {keep / MB:.0f} MB "
              f"(active segment + {a.retention_s + MAINTENANCE_S} s of writes + a segment)")
        hot_top = max(s["hot_topic_mb"] for s in last)
        hot_keep = 3 * COMPACTED_SEGMENT_BYTES
        check("compaction rewrote the hot topic", self.logdir.compactions > 0,
              f"{self.logdir.compactions} samples saw compaction; {self.logdir.written(HOT) / MB:.0f} MB written to {HOT}")
        check(f"{HOT} on disk bounded", hot_top * MB <= hot_keep,
              f"last third max {hot_top:.1f} MB, compaction keeps at most {hot_keep / MB:.0f} MB")

        return {"config": {"minutes": a.minutes, "rate": a.rate, "fault_every": a.fault_every, "sample_every": a.sample_every,
                           "row_bytes": a.row_bytes, "retention_s": a.retention_s, "s3_outage": a.s3_outage,
                           "recovery_timeout": a.recovery_timeout, "binary": self.binary, "cores": os.cpu_count()},
                "run_s": round(run_s, 1), "drain_s": None if drained is None else round(drained, 1),
                "changes": {"total": changes, "items": item_changes, **self.writer.counts,
                            "achieved_rate": round(changes / max(1.0, run_s), 1)},
                "tables": tables, "s3": s3, "faults": self.faults, "samples": self.samples,
                "log": {"items_written_mb": round(written / MB, 1), "hot_written_mb": round(self.logdir.written(HOT) / MB, 1),
                        "retention_deleted_segments": self.logdir.retention_deleted, "compactions_seen": self.logdir.compactions},
                "task_states": {f"{c} {s}": n for (c, s), n in self.task_states.items()}, "task_traces": self.traces,
                "worker_log": self.stderr_path, "checks": checks, "ok": all(c["ok"] for c in checks)}


def thirds(samples, run_s, key):
    out = []
    for lo, hi in ((0, run_s / 3), (run_s / 3, 2 * run_s / 3), (2 * run_s / 3, run_s + 1e-9)):
        vals = [s[key] for s in samples if lo <= s["t"] < hi] or [float("nan")]
        out.append((min(vals), max(vals)))
    return out


def report(summary):
    c, ch = summary["config"], summary["changes"]
    run_s, samples = summary["run_s"], summary["samples"]
    run = [s for s in samples if s["t"] <= run_s]
    print(f"\nsoak: Postgres 15 -> sluice ({os.path.basename(os.path.dirname(c['binary']))} binary) -> warehouse (Postgres) + S3 (moto), "
          f"{run_s / 60:.1f} min, {c['rate']} changes/s asked, {ch['achieved_rate']} achieved, rows of {c['row_bytes']} B, "
          f"a fault every {c['fault_every']} s, retention.ms {c['retention_s'] * 1000}, {c['cores']} cores")
    print(f"changes: {ch['total']:,} ({ch.get('insert', 0):,} inserts, {ch.get('update', 0):,} updates, {ch.get('delete', 0):,} deletes "
          f"of items; {ch.get('hot', 0):,} updates of hot); drained {summary['drain_s']} s after the writer stopped\n")
    print(f"| {'sampled every ' + str(c['sample_every']) + ' s':<26} | {'first third':>15} | {'middle third':>15} | {'last third':>15} |")
    print(f"|{'-' * 28}|{'-' * 17}|{'-' * 17}|{'-' * 17}|")
    for key, label, fmt in (("rss_mb", "worker RSS MB", "{:.0f}"), ("cpu_pct", "worker CPU % of a core", "{:.0f}"), ("fds", "open descriptors", "{:.0f}"), ("threads", "threads", "{:.0f}"),
                            ("disk_mb", "log dir MB", "{:.0f}"), ("items_topic_mb", f"{ITEMS} MB", "{:.0f}"),
                            ("hot_topic_mb", f"{HOT} MB", "{:.1f}"), ("wh_lag", "warehouse lag, changes", "{:.0f}"),
                            ("s3_lag", "S3 lag, changes", "{:.0f}"), ("slot_lag_mb", "slot lag MB", "{:.2f}")):
        cells = [f"{fmt.format(lo)} - {fmt.format(hi)}" for lo, hi in thirds(run, run_s, key)]
        print(f"| {label:<26} | {cells[0]:>15} | {cells[1]:>15} | {cells[2]:>15} |")
    print(f"\n'hit': replication connections / sink connections terminated, S3 connections reset; 'recovered in': from the fault's "
          f"end until every change committed then is in both destinations and confirmed to the slot (polled every second); 'worker log lines': "
          f"warnings and errors the worker logged meanwhile\n")
    print(f"| {'#':>2} | {'fault':<42} | {'at s':>6} | {'hit':>3} | {'cleared s':>9} | {'recovered in s':>14} | {'worker log lines':>16} |")
    print(f"|{'-' * 4}|{'-' * 44}|{'-' * 8}|{'-' * 5}|{'-' * 11}|{'-' * 16}|{'-' * 18}|")
    for f in summary["faults"]:
        rec = "NOT" if f["recovered_s"] is None else f"{f['recovered_s']:.1f}"
        print(f"| {f['n']:>2} | {FAULT_NAMES[f['kind']]:<42} | {f['at']:6.1f} | {f['hit']:>3} | {f['cleared'] if f['cleared'] is not None else '-':>9} | {rec:>14} | {f.get('warnings', '-'):>16} |")
    s3, tables = summary["s3"], summary["tables"]
    print(f"\n| {'destination':<28} | {'changes written':>15} | {'rows/events':>11} | {'lost':>6} | {'duplicated':>10} | {'equal':>5} |")
    print(f"|{'-' * 30}|{'-' * 17}|{'-' * 13}|{'-' * 8}|{'-' * 12}|{'-' * 7}|")
    for t, row in tables.items():
        lost = row.get("missing", 0) + row.get("stale", 0)
        written = ch["items"] + SEED_ITEMS if t == "items" else ch.get("hot", 0) + HOT_KEYS
        print(f"| {'warehouse ' + t + ' (rows)':<28} | {written:>15,} | {row['warehouse_rows']:>11,} | {lost:>6} | {'-':>10} | {'yes' if row['equal'] else 'NO':>5} |")
    print(f"| {'S3 items (events)':<28} | {s3['expected']:>15,} | {s3['read']:>11,} | {s3['lost']:>6} | {s3['duplicated']:>10} | {'-':>5} |")
    log = summary["log"]
    print(f"\nlog: {log['items_written_mb']} MB written to {ITEMS}, {log['retention_deleted_segments']} segments deleted by retention; "
          f"{log['hot_written_mb']} MB written to {HOT}, compaction seen in {log['compactions_seen']} samples; "
          f"S3: {s3['objects']} objects, {s3['mb']} MB")
    if summary["task_states"]:
        print(f"task states other than RUNNING (samples): {summary['task_states']}; first traces: {summary['task_traces']}")
    print()
    for chk in summary["checks"]:
        print(f"{'ok  ' if chk['ok'] else 'FAIL'} {chk['name']}: {chk['detail']}")


def plot(summary, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    s = summary["samples"]
    t = [x["t"] for x in s]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, sharex=True, figsize=(11, 9))
    ax1.plot(t, [x["rss_mb"] for x in s], color="tab:blue", label="worker RSS MB")
    ax1.set_ylabel("RSS MB")
    ax1b = ax1.twinx()
    ax1b.plot(t, [x["fds"] for x in s], color="tab:gray", linestyle=":", label="open descriptors")
    ax1b.set_ylabel("descriptors")
    ax1.legend(loc="upper left")
    ax1b.legend(loc="upper right")
    ax2.plot(t, [x["wh_lag"] for x in s], label="warehouse lag (changes)")
    ax2.plot(t, [x["s3_lag"] for x in s], label="S3 lag (changes)")
    ax2.set_ylabel("changes behind")
    ax2b = ax2.twinx()
    ax2b.plot(t, [x["slot_lag_mb"] for x in s], color="tab:red", linestyle=":", label="slot lag MB")
    ax2b.set_ylabel("slot lag MB")
    ax2.legend(loc="upper left")
    ax2b.legend(loc="upper right")
    ax3.plot(t, [x["disk_mb"] for x in s], label="log dir MB")
    ax3.plot(t, [x["items_topic_mb"] for x in s], label=f"{ITEMS} MB")
    ax3.plot(t, [x["hot_topic_mb"] for x in s], label=f"{HOT} MB")
    ax3.set_ylabel("MB on disk")
    ax3.set_xlabel("seconds")
    ax3.legend(loc="upper left")
    for f in summary["faults"]:
        for ax in (ax1, ax2, ax3):
            ax.axvline(f["at"], color="black", alpha=0.3)
            if f["cleared"] is not None and f["cleared"] > f["at"]:
                ax.axvspan(f["at"], f["cleared"], color="orange", alpha=0.2)
        ax1.annotate(f["kind"], (f["at"], ax1.get_ylim()[1]), fontsize=8, va="top")
    ax3.axvline(summary["run_s"], color="green", alpha=0.5, linestyle="--")
    c = summary["config"]
    fig.suptitle(f"sluice soak: {c['rate']} changes/s, a fault every {c['fault_every']} s (orange: S3 unreachable), "
                 f"writer stops at the dashed line")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_with_venv(summary_path, png):
    python = subprocess.run(["bash", os.path.join(ROOT, "bench", "venv.sh"), "python"], check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([python, os.path.abspath(__file__), "--plot-only", summary_path, "--plot", png], check=True)


def main():
    ap = argparse.ArgumentParser(description="Soak test: Postgres -> sluice -> warehouse + S3, with faults")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--rate", type=int, default=500, help="changes/s the writer commits (20%% to the hot table)")
    ap.add_argument("--fault-every", type=float, default=60, help="seconds between faults (source, warehouse, S3, in turn)")
    ap.add_argument("--sample-every", type=float, default=5)
    ap.add_argument("--binary", help="a built sluice binary (default: $CARGO_TARGET_DIR/release/sluice)")
    ap.add_argument("--plot", help="write a PNG of RSS, lag and disk over time here")
    ap.add_argument("--json", help="write the summary (every sample, fault and figure) here")
    ap.add_argument("--row-bytes", type=int, default=1500, help="bytes of text per row (before and after images make events about twice that)")
    ap.add_argument("--retention-s", type=int, default=60, help="retention.ms of the items topic, in seconds")
    ap.add_argument("--s3-outage", type=float, default=10, help="seconds the S3 endpoint stays unreachable")
    ap.add_argument("--recovery-timeout", type=float, default=60, help="seconds a fault may take to recover once cleared")
    ap.add_argument("--drain-timeout", type=float, default=120, help="seconds the destinations may take after the writer stops")
    ap.add_argument("--plot-only", metavar="SUMMARY", help="only draw --plot from a summary written by --json")
    args = ap.parse_args()
    if args.plot_only:
        with open(args.plot_only) as f:
            plot(json.load(f), args.plot)
        return 0
    ensure_boto3()
    if args.plot:  # installed now rather than after a long run
        subprocess.run(["bash", os.path.join(ROOT, "bench", "venv.sh"), "install"], check=True)
    binary = os.path.abspath(args.binary or os.path.join(TARGET, "release", "sluice"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"no sluice binary at {binary}: build it (cargo build --release -p sluice) or pass --binary")
    t0 = time.monotonic()
    summary = Soak(args, binary).run()
    summary["wall_s"] = round(time.monotonic() - t0, 1)
    report(summary)
    print(f"\nend to end {summary['wall_s']:.0f} s; worker output: {summary['worker_log']}")
    if args.json or args.plot:
        path = args.json or os.path.join(os.path.dirname(summary["worker_log"]), "summary.json")
        with open(path, "w") as f:
            json.dump(summary, f, indent=1)
        if args.plot:
            plot_with_venv(path, args.plot)
    failed = [c["name"] for c in summary["checks"] if not c["ok"]]
    if failed:
        print(f"\nsoak FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("\nsoak passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
