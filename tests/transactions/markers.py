"""Client side of `cargo test --test processes transactions_markers` (issue 17: the cleaner removes
transaction markers after the delete horizon), with confluent-kafka.
Usage: python3 markers.py BOOTSTRAP TOPIC write|fill SECONDS|check
  write: one transactional producer on partition 0: T1 aborted (keys a0..a9), T2 committed
         (c0..c9 = v1), T3 committed (c0..c9 = v2, superseding all of T2), T4 committed
         (d0..d9, the producer's last data). Prints a JSON line with each transaction's first
         and last data offsets.
  fill:  an idempotent (non-transactional) producer writes 300-byte values under keys
         f0..f4 for SECONDS, so the log stays dirty and the cleaner keeps running.
  check: a new session of the same transactional id commits T5 (z0..z9); then a
         read_committed and a read_uncommitted consumer read the partition from offset 0, and
         the last stable offset is compared with the high watermark. Asserts what each must
         see and prints a JSON line of counts."""
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

bs, topic, mode = sys.argv[1], sys.argv[2], sys.argv[3]
TXN_ID = f"markers-{topic}"


def txn(p, keys, value):
    offsets = []

    def done(err, msg):
        assert err is None, err
        offsets.append(msg.offset())

    p.begin_transaction()
    for k in keys:
        p.produce(topic, key=k.encode(), value=value.encode(), partition=0, on_delivery=done)
    p.flush(30)
    return offsets


def run_write():
    p = Producer({"bootstrap.servers": bs, "transactional.id": TXN_ID, "linger.ms": 0})
    p.init_transactions(30)
    out = {}
    out["t1"] = txn(p, [f"a{i}" for i in range(10)], "aborted")
    p.abort_transaction(30)
    out["t2"] = txn(p, [f"c{i}" for i in range(10)], "v1")
    p.commit_transaction(30)
    out["t3"] = txn(p, [f"c{i}" for i in range(10)], "v2")
    p.commit_transaction(30)
    out["t4"] = txn(p, [f"d{i}" for i in range(10)], "last")
    p.commit_transaction(30)
    print(json.dumps({k: [min(v), max(v)] for k, v in out.items()}), flush=True)


def run_fill(seconds):
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    deadline = time.time() + seconds
    n = 0
    while time.time() < deadline:
        p.produce(topic, key=f"f{n % 5}".encode(), value=b"x" * 300, partition=0)
        n += 1
        if n % 20 == 0:
            p.flush(30)
            time.sleep(0.05)
    p.flush(30)
    print(json.dumps({"filled": n}), flush=True)


def consume(isolation, upto):
    """Reads the partition from 0 once its latest offset at `isolation` is past `upto` (the
    coordinator answers EndTxn before the markers are written, as Kafka's does: the last
    stable offset may trail the commit briefly)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.time() + 30
    while True:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        if hi > upto or time.time() > deadline:
            break
        time.sleep(0.1)
    latest = {}
    seen = []
    deadline = time.time() + 30
    position = 0
    while time.time() < deadline and position < hi:
        m = c.poll(0.5)
        if m is None:
            position = c.position([TopicPartition(topic, 0)])[0].offset
            continue
        if m.error():
            continue
        key, value = m.key().decode(), m.value().decode()
        seen.append((key, value))
        latest[key] = value
        position = m.offset() + 1
    c.close()
    return hi, seen, latest


def run_check():
    p = Producer({"bootstrap.servers": bs, "transactional.id": TXN_ID, "linger.ms": 0})
    p.init_transactions(30)
    t5 = txn(p, [f"z{i}" for i in range(10)], "after")
    p.commit_transaction(30)
    lso, rc_seen, rc = consume("read_committed", max(t5))
    hw, ru_seen, ru = consume("read_uncommitted", max(t5))
    want = {**{f"c{i}": "v2" for i in range(10)}, **{f"d{i}": "last" for i in range(10)},
            **{f"z{i}": "after" for i in range(10)}}
    for name, latest, seen in (("read_committed", rc, rc_seen), ("read_uncommitted", ru, ru_seen)):
        got = {k: v for k, v in latest.items() if not k.startswith("f")}
        assert got == want, f"{name}: {got}"
        assert not any(v == "aborted" for _, v in seen), f"{name} saw aborted data"
    assert lso == hw, f"last stable offset {lso} != high watermark {hw}"
    print(json.dumps({"t5": [min(t5), max(t5)], "lso": lso, "hw": hw,
                      "read_committed": len(rc_seen), "read_uncommitted": len(ru_seen)}),
          flush=True)


if mode == "write":
    run_write()
elif mode == "fill":
    run_fill(float(sys.argv[4]))
elif mode == "check":
    run_check()
else:
    sys.exit(f"unknown mode {mode}")
