#!/usr/bin/env python3
"""Record what real Debezium 3.6.3 writes for signals, as golden fixtures (see README.md).

    record_signals.py [--keep-work]

Scenario `blocking` (signals/blocking.sql): an initial snapshot of two tables, then, while
streaming, an execute-snapshot signal of type blocking inside a transaction (between two of its
changes) and a second one for one table with additional-conditions. Everything else is as
record_debezium.py records a mode (same engine, converters, Postgres and output layout), into
signals/blocking/.
"""

import argparse
import os
import shutil
import subprocess

import record_debezium as rd

SCENARIOS = {
    "blocking": {"signal.data.collection": "public.dbz_signal"},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep-work", action="store_true", help=f"keep {rd.WORK} (engine logs)")
    a = ap.parse_args()
    libs = subprocess.run([rd.DBZ_SH, "install"], check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    os.makedirs(rd.CLASSES, exist_ok=True)
    subprocess.run(["javac", "-cp", os.path.join(libs, "*"), "-d", rd.CLASSES,
                    os.path.join(rd.HERE, "RecordDebezium.java")], check=True)
    was_running = subprocess.run([rd.PG_SH, "status", rd.PG_DIR]).returncode == 0
    subprocess.run([rd.PG_SH, "start", rd.PG_DIR, str(rd.PG_PORT)], check=True, stdout=subprocess.DEVNULL)
    out = os.path.join(rd.HERE, "signals")
    try:
        for name, extra in SCENARIOS.items():
            rd.record_mode(name, extra, libs, out, True, fixture=os.path.join(out, name + ".sql"))
    finally:
        if not was_running:
            subprocess.run([rd.PG_SH, "stop", rd.PG_DIR])
        if not a.keep_work:
            shutil.rmtree(rd.WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
