"""Transactions with confluent-kafka (issue 17): a committed and an aborted transaction, then
a read_committed consumer sees only the committed records and a read_uncommitted one sees
both (the markers are skipped by the client either way).
Usage: python3 smoke.py BOOTSTRAP"""
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bs = sys.argv[1]
topic = f"txn-smoke-{uuid.uuid4().hex[:8]}"
admin = AdminClient({"bootstrap.servers": bs})
admin.create_topics([NewTopic(topic, 2, 1)])["" if False else topic].result(30)

p = Producer({"bootstrap.servers": bs, "transactional.id": f"smoke-{topic}"})
t0 = time.time()
p.init_transactions(30)
print(f"init_transactions {time.time() - t0:.2f}s")
p.begin_transaction()
for i in range(10):
    p.produce(topic, key=b"c", value=f"commit-{i}".encode(), partition=i % 2)
p.commit_transaction(30)
p.begin_transaction()
for i in range(5):
    p.produce(topic, key=b"a", value=f"abort-{i}".encode(), partition=i % 2)
p.flush(30)
p.abort_transaction(30)
p.begin_transaction()
for i in range(10, 15):
    p.produce(topic, key=b"c", value=f"commit-{i}".encode(), partition=i % 2)
p.commit_transaction(30)


def consume(isolation):
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    got = []
    deadline = time.time() + 20
    idle = 0
    while time.time() < deadline and idle < 6:
        m = c.poll(0.5)
        if m is None:
            idle += 1 if len(got) >= 15 else 0
            continue
        if m.error():
            continue
        got.append(m.value().decode())
    c.close()
    return sorted(got)


committed = consume("read_committed")
uncommitted = consume("read_uncommitted")
want = sorted(f"commit-{i}" for i in range(15))
assert committed == want, f"read_committed saw {committed}"
assert sorted(uncommitted) == sorted(want + [f"abort-{i}" for i in range(5)]), uncommitted
print(f"read_committed {len(committed)} records, read_uncommitted {len(uncommitted)}: ok")
