"""Transactions for the `.txnindex` test (issue 17), with confluent-kafka's transactional API.

Usage: python3 txnindex.py BOOTSTRAP TOPIC produce N START
         transactions START..START+N of 3 records each to partition 0 (transaction i is
         aborted when i % 3 == 1, committed otherwise); prints "aborted A committed C".
       python3 txnindex.py BOOTSTRAP TOPIC check N
         for transactions 0..N, a read_committed consumer must see exactly the committed
         records, in order, and a read_uncommitted one every record; prints
         "read_committed R read_uncommitted U".
"""
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

bs, topic, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
start = int(sys.argv[5]) if len(sys.argv) > 5 else 0
PER_TXN = 3


def aborted(i):
    return i % 3 == 1


def values(i):
    kind = "abort" if aborted(i) else "commit"
    return [f"{kind}-{i}-{j}" for j in range(PER_TXN)]


def produce():
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"txnindex-{topic}",
                  "linger.ms": 0})
    p.init_transactions(30)
    counts = {"aborted": 0, "committed": 0}
    for i in range(start, start + n):
        p.begin_transaction()
        for v in values(i):
            p.produce(topic, key=b"k", value=v.encode(), partition=0)
        p.flush(30)
        if aborted(i):
            p.abort_transaction(30)
            counts["aborted"] += 1
        else:
            p.commit_transaction(30)
            counts["committed"] += 1
    print(f"aborted {counts['aborted']} committed {counts['committed']}", flush=True)


def consume(isolation, want):
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 60
    idle = 0
    while time.time() < deadline and idle < 6:
        m = c.poll(0.5)
        if m is None:
            idle += 1 if len(got) >= want else 0
            continue
        if m.error():
            continue
        got.append(m.value().decode())
    c.close()
    return got


def check():
    committed = [v for i in range(n) if not aborted(i) for v in values(i)]
    everything = [v for i in range(n) for v in values(i)]
    rc = consume("read_committed", len(committed))
    assert rc == committed, f"read_committed saw {len(rc)} records: {rc[:10]}..."
    ru = consume("read_uncommitted", len(everything))
    assert ru == everything, f"read_uncommitted saw {len(ru)} records: {ru[:10]}..."
    print(f"read_committed {len(rc)} read_uncommitted {len(ru)}", flush=True)


produce() if mode == "produce" else check()
