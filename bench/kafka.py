#!/usr/bin/env python3
"""Pipeline benchmark on Kafka: datagen -> Kafka topic -> discard sink through
`sluice standalone` with bootstrap.servers, beside librdkafka's own rate against the same
broker in the same run (python confluent-kafka producing and consuming values of the same
size with the same producer settings: idempotent, acks=all).

Prints records/s, CPU-seconds and peak RSS of each client process (and the broker's CPU
seconds). The broker is noida-db (an emulator) started by tests/services/kafka.sh; its own
speed bounds both rows, so read the ratio, not the absolute numbers. Not a test: it
asserts nothing; it measures.

usage: bench/kafka.py [--records N] [--payload BYTES] [--broker noida|tansu]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datagen  # noqa: E402  (shares the worker driver and /proc readers)

ROOT = datagen.ROOT
VENV = os.environ.get("KAFKA_VENV", os.path.expanduser("~/.cache/sluice-test/kafka-venv"))

BASELINE = r'''
import resource, sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
bootstrap, topic, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
value = b"x" * size
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
              "max.in.flight.requests.per.connection": 5, "linger.ms": 5, "queue.buffering.max.messages": 1000000})
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0, t0 = cpu(), time.monotonic()
for i in range(n):
    while True:
        try:
            p.produce(topic, value, partition=0)
            break
        except BufferError:
            p.poll(0.01)
    if i % 10000 == 0:
        p.poll(0)
p.flush(120)
t1, c1 = time.monotonic(), cpu()
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-baseline", "enable.auto.commit": False,
              "receive.message.max.bytes": 200000000})
c.assign([TopicPartition(topic, 0, 0)])
got = 0
while got < n:
    for m in c.consume(10000, 1.0):
        if m.error() is None:
            got += 1
t2, c2 = time.monotonic(), cpu()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{t1-t0} {c1-c0} {t2-t1} {c2-c1} {rss}")
'''


def broker_cpu(pid):
    return datagen.proc_usage(pid)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--payload", type=int, default=64, help="payload bytes per row (64 gives ~100-byte JSON values)")
    ap.add_argument("--broker", default="noida")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "sluice"], cwd=ROOT, check=True, env=dict(os.environ, CARGO_TARGET_DIR=datagen.TARGET))
    binary = os.path.join(datagen.TARGET, "release", "sluice")
    script = os.path.join(ROOT, "tests", "services", "kafka.sh")
    subprocess.run([script, "install", "noida"], check=True)
    subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "-q", "confluent-kafka"], check=True)
    state = tempfile.mkdtemp(prefix="sluice-bench-kafka-")
    port = datagen.free_port()
    bootstrap = f"127.0.0.1:{port}"
    subprocess.run([script, "start", state, str(port), args.broker], check=True, stdout=subprocess.DEVNULL)
    broker_pid = int(open(os.path.join(state, "broker.pid")).read())
    try:
        b0 = broker_cpu(broker_pid)
        props = {"bootstrap.servers": bootstrap, **datagen.SCHEMALESS}
        r = datagen.run_pipeline(binary, "sluice: datagen -> kafka -> discard", props, {}, args.records, args.payload)
        sluice_broker_cpu = broker_cpu(broker_pid) - b0
        # Schemaless JSON values of datagen's bench quickstart: the payload plus ~36 B of fields.
        size = args.payload + 36
        b0 = broker_cpu(broker_pid)
        out = subprocess.run([os.path.join(VENV, "bin", "python"), "-c", BASELINE, bootstrap, "baseline", str(args.records), str(size)],
                             check=True, capture_output=True, text=True).stdout.split()
        base_broker_cpu = broker_cpu(broker_pid) - b0
        pw, pc, cw, cc, rss = map(float, out)
    finally:
        subprocess.run([script, "stop", state], check=False)
        shutil.rmtree(state, ignore_errors=True)
    print(f"\n{args.records:,} records, ~{size} B values, broker {args.broker} (an emulator), {os.cpu_count()} cores, same run\n")
    print(f"| {'client':<46} | {'wall s':>7} | {'records/s':>10} | {'client CPU s':>12} | {'peak RSS MB':>11} | {'broker CPU s':>12} |")
    print(f"|{'-'*48}|{'-'*9}|{'-'*12}|{'-'*14}|{'-'*13}|{'-'*14}|")
    print(f"| {'sluice: datagen -> log -> discard (end to end)':<46} | {r['wall']:7.2f} | {r['rate']:10,.0f} | {r['cpu']:12.2f} | {r['rss']:11.1f} | {sluice_broker_cpu:12.2f} |")
    print(f"| {'librdkafka (python): produce only':<46} | {pw:7.2f} | {args.records/pw:10,.0f} | {pc:12.2f} | {'':>11} | {'':>12} |")
    print(f"| {'librdkafka (python): consume only':<46} | {cw:7.2f} | {args.records/cw:10,.0f} | {cc:12.2f} | {'':>11} | {'':>12} |")
    print(f"| {'librdkafka (python): produce, then consume':<46} | {pw+cw:7.2f} | {args.records/(pw+cw):10,.0f} | {pc+cc:12.2f} | {rss:11.1f} | {base_broker_cpu:12.2f} |")


if __name__ == "__main__":
    sys.exit(main())
