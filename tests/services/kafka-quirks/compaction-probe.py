# Does the broker compact a cleanup.policy=compact topic? Writes 5 keys x 2000 values,
# waits, counts what a consumer reads back.
import sys, time
from confluent_kafka import Producer, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
b, wait = sys.argv[1], float(sys.argv[2])
a = AdminClient({"bootstrap.servers": b})
fs = a.create_topics([NewTopic("table", 1, 1, config={"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": "1024"})]); fs["table"].result()
p = Producer({"bootstrap.servers": b})
for i in range(10000):
    p.produce("table", key=f"k{i%5}".encode(), value=f"v{i}".encode(), partition=0)
p.flush(30)
time.sleep(wait)
c = Consumer({"bootstrap.servers": b, "group.id": "probe", "enable.auto.commit": False})
lo, hi = c.get_watermark_offsets(TopicPartition("table", 0), timeout=5, cached=False)
c.assign([TopicPartition("table", 0, 0)])
n = 0
while True:
    ms = c.consume(10000, 2.0)
    if not ms: break
    n += sum(1 for m in ms if m.error() is None)
print(f"watermarks {lo}..{hi}, records read back: {n} (10000 written, 5 keys)")
c.assign([TopicPartition("table", 0, 0)])
offs = []
deadline = time.time() + 15
while time.time() < deadline and (not offs or offs[-1] < hi - 1):
    for m in c.consume(10000, 1.0):
        if m.error() is None: offs.append(m.offset())
        else: print("error", m.error())
print("second pass:", len(offs), "first", offs[:3], "last", offs[-3:], "gaps", sum(1 for a, b in zip(offs, offs[1:]) if b != a + 1))
