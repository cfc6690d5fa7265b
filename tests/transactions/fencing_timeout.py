"""Zombie fencing and the transaction timeout with confluent-kafka (issue 17).

Fencing: two producers share a transactional.id; the second's init_transactions aborts the
first's open transaction and fences it: the first's commit fails with a fatal error
(PRODUCER_FENCED, librdkafka's _FENCED), a read_committed consumer never sees its records.
Timeout: a producer with transaction.timeout.ms=2000 begins, writes and hangs; the broker
(started with transaction.abort.timed.out.transaction.cleanup.interval.ms=500) aborts the
transaction, so the last stable offset moves on and a record written after it becomes
visible to read_committed; the hung producer's commit then fails.
Usage: fencing_timeout.py BOOTSTRAP"""
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bs = sys.argv[1]
topic = f"txn-fence-{uuid.uuid4().hex[:6]}"
admin = AdminClient({"bootstrap.servers": bs})
for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
    f.result(30)


def committed_values(limit_s=15, want=None):
    c = Consumer({"bootstrap.servers": bs, "group.id": f"chk-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.time() + limit_s
    while time.time() < deadline and (want is None or want not in got):
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


# Fencing.
tid = f"fence-{topic}"
old = Producer({"bootstrap.servers": bs, "transactional.id": tid})
old.init_transactions(30)
old.begin_transaction()
old.produce(topic, value=b"zombie")
old.flush(10)
new = Producer({"bootstrap.servers": bs, "transactional.id": tid})
t0 = time.time()
new.init_transactions(30)
print(f"fencing: the new instance's init_transactions took {time.time() - t0:.2f} s")
try:
    old.commit_transaction(10)
    raise SystemExit("FAIL: the fenced producer committed")
except KafkaException as e:
    err = e.args[0]
    print(f"fencing: the old producer's commit failed: {err.name()} fatal={err.fatal()}")
    assert err.fatal() or err.code() == -144, err  # -144: _FENCED
new.begin_transaction()
new.produce(topic, value=b"live")
new.commit_transaction(30)
got = committed_values(want="live")
assert got == ["live"], f"read_committed saw {got}"

# Timeout.
hung = Producer({"bootstrap.servers": bs, "transactional.id": f"hung-{topic}",
                 "transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
hung.init_transactions(30)
hung.begin_transaction()
hung.produce(topic, value=b"hung")
hung.flush(10)
t0 = time.time()
plain = Producer({"bootstrap.servers": bs})
plain.produce(topic, value=b"after")
plain.flush(10)
got = committed_values(limit_s=30, want="after")
print(f"timeout: the record after the hung transaction became visible after {time.time() - t0:.1f} s "
      f"(timeout 2 s, abort check every 0.5 s)")
assert "after" in got and "hung" not in got, got
try:
    hung.commit_transaction(10)
    raise SystemExit("FAIL: the timed-out transaction committed")
except KafkaException as e:
    print(f"timeout: the hung producer's commit failed: {e.args[0].name()}")
print("fencing and timeout: ok")
