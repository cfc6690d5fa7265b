"""KIP-467 with librdkafka: a batch to a compacted topic with some keyless records fails
exactly those records with INVALID_RECORD and the rest of the batch with librdkafka's
"different record" error, nothing of the batch is written, and a later valid batch lands.

Usage: record_errors.py BOOTSTRAP. Bounded: every wait fails after 30 s.
"""
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BS = sys.argv[1]
TOPIC = f"kip467-{uuid.uuid4().hex[:8]}"
KEYS = [b"k0", None, b"k2", None, b"k4"]


def main():
    admin = AdminClient({"bootstrap.servers": BS})
    new = NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact"})
    for f in admin.create_topics([new]).values():
        f.result(30)
    # One batch: a long linger and every record produced before the first poll.
    p = Producer({"bootstrap.servers": BS, "linger.ms": 500, "enable.idempotence": False,
                  "message.send.max.retries": 0})
    reports = {}

    def report(i):
        return lambda err, msg: reports.__setitem__(i, err)

    for i, key in enumerate(KEYS):
        p.produce(TOPIC, key=key, value=f"v{i}".encode(), partition=0, on_delivery=report(i))
    assert p.flush(30) == 0, "produce did not finish"
    for i, key in enumerate(KEYS):
        err = reports.get(i)
        want = KafkaError.INVALID_RECORD if key is None else KafkaError._INVALID_DIFFERENT_RECORD
        if err is None or err.code() != want:
            raise SystemExit(f"FAIL: record {i} (key {key}): got {err}, want {KafkaError(want)}")
        print(f"ok: record {i} (key {key}) failed with {err.name()}: {err.str()}")
    # Nothing of the refused batch was written; a valid batch after it is.
    p.produce(TOPIC, key=b"k9", value=b"v9", partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": BS, "group.id": "kip467-unused", "enable.auto.commit": False})
    low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
    c.close()
    if (low, high) != (0, 1):
        raise SystemExit(f"FAIL: watermarks {(low, high)}, want (0, 1): the refused batch was written")
    print("ok: the refused batch wrote nothing, the next valid batch is offset 0")


if __name__ == "__main__":
    main()
