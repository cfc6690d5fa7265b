"""Transactional vs idempotent producer throughput and latency with confluent-kafka (issue 17).

Modes: idempotent (enable.idempotence, acks=all), txn-100ms (a transaction committed every
100 ms), txn-1000 (committed every 1,000 records). Each sends RECORDS records of SIZE bytes
to a fresh 3-partition topic as fast as the client takes them (closed loop: at most 10,000
unacknowledged). Reports records/s, p50/p99 of the delivery-report latency and, for the
transactional modes, p50/p99 of commit_transaction.
Usage: txn_bench.py BOOTSTRAP [RECORDS] [SIZE]"""
import sys
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

bs = sys.argv[1]
RECORDS = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
SIZE = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
admin = AdminClient({"bootstrap.servers": bs})


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def run(mode):
    topic = f"bench-{mode}-{uuid.uuid4().hex[:6]}"
    for f in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        f.result(30)
    conf = {"bootstrap.servers": bs, "linger.ms": 5, "acks": "all", "enable.idempotence": True,
            "queue.buffering.max.messages": 200_000}
    if mode != "idempotent":
        conf["transactional.id"] = f"bench-{topic}"
    p = Producer(conf)
    lat, commits = [], []
    payload = b"x" * SIZE

    def done(err, _msg, sent=None):
        if err is None:
            lat.append(time.perf_counter() - sent)

    if mode != "idempotent":
        p.init_transactions(30)
        p.begin_transaction()
    t0 = last_commit = time.perf_counter()
    in_txn = 0
    for i in range(RECORDS):
        now = time.perf_counter()
        p.produce(topic, value=payload, on_delivery=lambda e, m, s=now: done(e, m, s))
        in_txn += 1
        p.poll(0)
        if i - len(lat) > 10_000:
            p.poll(0.001)
        due = (mode == "txn-100ms" and now - last_commit >= 0.1) or (mode == "txn-1000" and in_txn >= 1000)
        if due:
            c0 = time.perf_counter()
            p.commit_transaction(30)
            commits.append(time.perf_counter() - c0)
            p.begin_transaction()
            last_commit, in_txn = time.perf_counter(), 0
    if mode != "idempotent":
        c0 = time.perf_counter()
        p.commit_transaction(30)
        commits.append(time.perf_counter() - c0)
    p.flush(60)
    elapsed = time.perf_counter() - t0
    line = (f"{mode:11s} {RECORDS / elapsed:9.0f} rec/s  {RECORDS * SIZE / elapsed / 2**20:6.1f} MiB/s  "
            f"delivery p50 {pct(lat, .5) * 1e3:6.1f} ms p99 {pct(lat, .99) * 1e3:6.1f} ms")
    if commits:
        line += f"  commits {len(commits)} p50 {pct(commits, .5) * 1e3:5.1f} ms p99 {pct(commits, .99) * 1e3:5.1f} ms"
    print(line, flush=True)


for mode in ["idempotent", "txn-100ms", "txn-1000"]:
    run(mode)
