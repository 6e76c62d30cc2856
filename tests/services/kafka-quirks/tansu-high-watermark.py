# tansu: the high watermark after a 10-record batch
import sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka import Consumer, TopicPartition
b = sys.argv[1]
a = AdminClient({"bootstrap.servers": b})
a.create_topics([NewTopic("hw", 1, 1)])["hw"].result()
p = Producer({"bootstrap.servers": b, "linger.ms": 50, "enable.idempotence": True})
for i in range(10):
    p.produce("hw", f"v{i}".encode(), partition=0)
p.flush(10)
c = Consumer({"bootstrap.servers": b, "group.id": "x"})
print("watermarks (low, high):", c.get_watermark_offsets(TopicPartition("hw", 0), timeout=5, cached=False))
