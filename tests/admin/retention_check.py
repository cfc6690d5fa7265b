"""Issue 6 through confluent-kafka (librdkafka), against a running broker started with
`--log-retention-check-interval-ms 500`:

- DeleteRecords from AdminClient.delete_records: the low watermark is returned, ListOffsets
  (get_watermark_offsets) and an `auto.offset.reset=earliest` consumer start there, an offset
  past the high watermark is OFFSET_OUT_OF_RANGE, OFFSET_END deletes everything.
- Time retention (retention.ms=2000) and size retention (retention.bytes=49152) with 16 KiB
  segments and file.delete.delay.ms=1500, end to end: while a producer keeps writing and a
  consumer at the head keeps reading, old segments of the partition directory get the
  `.deleted` suffix, then disappear, and the low watermark advances; the head consumer
  reads every new record, in order, without an offset reset.

Kafka 4 refuses segment.bytes below 1 MiB, so the small segments use Kafka's test-only
`internal.segment.bytes`. Bounded: every call times out, the retention loop has a deadline.

Usage: python3 retention_check.py BOOTSTRAP DATA_DIR      Prints PASS or exits non-zero.
"""
import os
import sys
import time
import uuid

from confluent_kafka import OFFSET_END, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30
# Retention observation: segments expire after 2 s, checks run every 0.5 s and files go
# 1.5 s after their rename, so a healthy broker finishes in ~5 s.
RETENTION_DEADLINE_S = 45
SEGMENT_BYTES = 16384
RETENTION_BYTES = 3 * SEGMENT_BYTES
VALUE = b"v" * 200


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok   {what}", flush=True)


def create(admin, topic, config):
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=config)])
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)


def produce(producer, topic, count, delivered=None):
    def on_delivery(err, msg):
        if delivered is not None:
            delivered.append((err, msg.offset()))

    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=VALUE, on_delivery=on_delivery)
    if producer.flush(TIMEOUT_S) != 0:
        raise SystemExit(f"FAIL: producer could not flush to {topic}")


def watermarks(consumer, topic):
    return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)


def delete_records(admin, topic, offset):
    futures = admin.delete_records([TopicPartition(topic, 0, offset)],
                                   request_timeout=TIMEOUT_S)
    return next(iter(futures.values())).result(timeout=TIMEOUT_S)


def first_offsets_from_earliest(bs, topic, count):
    consumer = Consumer({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    offsets, deadline = [], time.monotonic() + TIMEOUT_S
    while len(offsets) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            offsets.append(msg.offset())
    consumer.close()
    return offsets


def check_delete_records(admin, bs, probe):
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    create(admin, topic, {})
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    produce(producer, topic, 100)
    low = delete_records(admin, topic, 40).low_watermark
    check(low == 40, f"AdminClient.delete_records(offset 40): low watermark {low}")
    check(watermarks(probe, topic) == (40, 100),
          f"get_watermark_offsets after DeleteRecords: {watermarks(probe, topic)}")
    offsets = first_offsets_from_earliest(bs, topic, 60)
    check(offsets[:1] == [40] and offsets == list(range(40, 100)),
          f"earliest consumer starts at 40 and reads 60 records (got {len(offsets)})")
    try:
        delete_records(admin, topic, 500)
        err = None
    except KafkaException as exc:
        err = exc.args[0]
    check(err is not None and err.name() == "OFFSET_OUT_OF_RANGE",
          f"delete_records past the high watermark -> {err and err.name()}")
    low = delete_records(admin, topic, OFFSET_END).low_watermark
    check(low == 100, f"delete_records(OFFSET_END) deletes everything: low watermark {low}")


class Watched:
    """One retention topic: its partition directory, the `.deleted` files seen, the ones seen
    to vanish afterwards, and the low watermarks observed."""

    def __init__(self, topic, data_dir):
        self.topic = topic
        self.dir = os.path.join(data_dir, f"{topic}-0")
        self.deleted_seen = {}  # name -> when first seen (monotonic s)
        self.vanished = {}  # name -> seconds it was seen to live, at most its real life
        self.lows = []

    def observe(self, probe):
        names, now = set(os.listdir(self.dir)), time.monotonic()
        for n, seen in self.deleted_seen.items():
            if n not in names and n not in self.vanished:
                self.vanished[n] = now - seen
        for n in names:
            if n.endswith(".deleted"):
                self.deleted_seen.setdefault(n, now)
        low = watermarks(probe, self.topic)[0]
        if not self.lows or self.lows[-1] != low:
            self.lows.append(low)

    def live_log_bytes(self):
        return sum(os.path.getsize(os.path.join(self.dir, n))
                   for n in os.listdir(self.dir) if n.endswith(".log"))

    def done(self):
        return any(n.endswith(".log.deleted") for n in self.vanished) and len(self.lows) >= 3


def head_consumer(bs, topic, head):
    """A consumer positioned at the log end `head` that fails loudly instead of resetting."""
    consumer = Consumer({"bootstrap.servers": bs, "group.id": f"h-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(topic, 0, head)])
    return consumer


def drain(consumer, read, until_offset=None, deadline_s=0.2):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.05)
        if msg is None:
            if until_offset is None or (read and read[-1] >= until_offset):
                return
            continue
        if msg.error() is not None:
            raise SystemExit(f"FAIL: head consumer error {msg.error()}")
        read.append(msg.offset())


def check_retention(admin, bs, probe, data_dir):
    common = {"internal.segment.bytes": str(SEGMENT_BYTES), "file.delete.delay.ms": "1500"}
    timed = Watched(f"ret-time-{uuid.uuid4().hex[:6]}", data_dir)
    sized = Watched(f"ret-size-{uuid.uuid4().hex[:6]}", data_dir)
    create(admin, timed.topic, {**common, "retention.ms": "2000"})
    create(admin, sized.topic, {**common, "retention.bytes": str(RETENTION_BYTES)})
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    produce(producer, timed.topic, 10)  # so the head consumer starts above offset 0
    head = watermarks(probe, timed.topic)[1]
    check(head == 10, f"time-retention topic: log end {head} before the loop")
    consumer = head_consumer(bs, timed.topic, head)
    delivered, read = [], []
    start = time.monotonic()
    while time.monotonic() - start < RETENTION_DEADLINE_S:
        produce(producer, timed.topic, 40, delivered)
        produce(producer, sized.topic, 40)
        drain(consumer, read)
        for w in (timed, sized):
            w.observe(probe)
        if timed.done() and sized.done():
            break
        time.sleep(0.1)
    took = time.monotonic() - start
    for w, kind in ((timed, "time"), (sized, "size")):
        print(f"     {kind}: .deleted seen {len(w.deleted_seen)}, vanished {len(w.vanished)}, "
              f"low watermarks {w.lows[:6]}{'...' if len(w.lows) > 6 else ''}")
        check(any(n.endswith(".log.deleted") for n in w.deleted_seen),
              f"{kind} retention: segments renamed with the .deleted suffix")
        # Lives are observed between polls (~0.3 s apart), so the longest one seen is at
        # most that much below file.delete.delay.ms (1.5 s); 0 would mean no delay at all.
        life = max((t for n, t in w.vanished.items() if n.endswith(".log.deleted")), default=0)
        check(life >= 0.75,
              f"{kind} retention: .deleted segments removed after file.delete.delay.ms "
              f"(longest observed life {life:.2f} s)")
        check(len(w.lows) >= 3 and w.lows == sorted(w.lows) and w.lows[-1] > 0,
              f"{kind} retention: low watermark advanced {w.lows[0]} -> {w.lows[-1]}")
    print(f"     retention observed in {took:.1f} s")
    # With production stopped, the next checks bring the log under retention.bytes plus
    # the oldest kept segment (Kafka's rule); the active file is padded to a 4 KiB page.
    bound = RETENTION_BYTES + SEGMENT_BYTES + 4096
    deadline = time.monotonic() + TIMEOUT_S
    while sized.live_log_bytes() > bound and time.monotonic() < deadline:
        time.sleep(0.1)
    check(sized.live_log_bytes() <= bound,
          f"size retention: {sized.live_log_bytes()} bytes of .log kept "
          f"(retention.bytes {RETENTION_BYTES} + at most one segment)")
    errors = [e for e, _ in delivered if e is not None]
    check(not errors, f"producer: {len(delivered)} records acknowledged during retention")
    last = max(o for _, o in delivered)
    drain(consumer, read, until_offset=last, deadline_s=TIMEOUT_S)
    consumer.close()
    produced = sorted(o for _, o in delivered)
    check(read == produced,
          f"head consumer read all {len(produced)} new records in order, no reset "
          f"(offsets {read[:1]}..{read[-1:]})")


def main(bs, data_dir):
    admin = AdminClient({"bootstrap.servers": bs})
    probe = Consumer({"bootstrap.servers": bs, "group.id": "probe", "enable.auto.commit": False})
    check_delete_records(admin, bs, probe)
    check_retention(admin, bs, probe, data_dir)
    probe.close()
    print("PASS")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: retention_check.py BOOTSTRAP DATA_DIR")
    main(sys.argv[1], sys.argv[2])
