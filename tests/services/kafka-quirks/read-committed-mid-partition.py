"""noida 0.2.3: a read_committed fetch that starts after an aborted transaction of the same
producer id sees nothing of that producer's later committed transactions.

Usage: read-committed-mid-partition.py BOOTSTRAP

Writes, with one transactional id: txn A (3 records, aborted), txn B (3, committed),
txn C (3, committed). Then reads read_committed from offset 0 and from the first
offset of txn C. Apache Kafka returns B+C and C. The broker's Fetch response lists the
aborted transactions overlapping the fetched range; when it lists A (which ended before
the fetch offset), a client drops every later record of that producer until it meets A's
abort marker, which lies behind it.
"""
import sys
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1]
topic = "rc-mid-" + uuid.uuid4().hex[:8]
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()

p = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
p.init_transactions(10)
offsets = {}
for name, commit in [("A", False), ("B", True), ("C", True)]:
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"{name}{i}".encode(), partition=0,
                  on_delivery=lambda err, m, n=name: offsets.setdefault(n, m.offset()))
    p.flush(10)
    (p.commit_transaction if commit else p.abort_transaction)(10)


def read(start):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, start)])
    out = []
    while True:
        m = c.poll(5)
        if m is None or m.error():
            break
        out.append(m.value().decode())
    c.close()
    return out


print("first offsets", offsets)
print("from 0:", read(0))
mid = read(offsets["C"])
print(f"from {offsets['C']} (txn C):", mid)
print("QUIRK: nothing after an aborted transaction" if not mid else "ok")
