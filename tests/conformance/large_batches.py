"""KIP-74 with real clients: a consumer whose per-partition limit is smaller than the batches
always makes progress, from the batch cache (warm) and from disk after a restart (cold).

Starts the broker binary itself. Per shape: produce with librdkafka's defaults (its batches
are about 1 MB) to one partition, consume everything with confluent-kafka
(`fetch.message.max.bytes` = 100,000) and kafka-python (`max_partition_fetch_bytes` =
100,000), restart the broker (SIGTERM), and consume again from disk. Shapes: 300 records of
10 KB (the stall once seen: 99 records, then nothing for ever), and 3 records of 5 MB.
Usage: large_batches.py SHARDLOG_BINARY PORT. Bounded: each consume fails after 60 s.
"""
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka.structs import TopicPartition as KpTopicPartition

BIN, PORT = sys.argv[1], int(sys.argv[2])
BS = f"127.0.0.1:{PORT}"
LIMIT = 100_000
SHAPES = [(300, 10_000), (3, 5 << 20)]


def start(data_dir):
    proc = subprocess.Popen([BIN, "serve", "--listen", BS, "--data-dir", data_dir, "--shards", "2",
                             "--log-level", "warn"])
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", PORT), 0.5).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("FAIL: broker did not start")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=90)


def produce(topic, count, size):
    admin = AdminClient({"bootstrap.servers": BS})
    new = NewTopic(topic, 1, 1, config={"max.message.bytes": str(16 << 20)})
    for f in admin.create_topics([new]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": BS, "message.max.bytes": 16 << 20})
    for i in range(count):
        value = (f"{i:08d}".encode() * (size // 8 + 1))[:size]
        p.produce(topic, value=value, partition=0)
        p.poll(0)
    assert p.flush(60) == 0, "produce did not finish"


def consume_confluent(topic, count):
    c = Consumer({"bootstrap.servers": BS, "group.id": f"kip74-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.message.max.bytes": LIMIT})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, deadline = [], time.time() + 60
    while len(got) < count and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise SystemExit(f"FAIL: confluent-kafka error {m.error()}")
        got.append((m.offset(), m.value()[:8].decode()))
    c.close()
    return got


def consume_kafka_python(topic, count):
    c = KafkaConsumer(bootstrap_servers=BS, enable_auto_commit=False,
                      max_partition_fetch_bytes=LIMIT, fetch_max_bytes=LIMIT)
    tp = KpTopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got, deadline = [], time.time() + 60
    while len(got) < count and time.time() < deadline:
        for recs in c.poll(timeout_ms=500).values():
            got.extend((r.offset, r.value[:8].decode()) for r in recs)
    c.close()
    return got


def check(client, phase, got, count):
    want = [(i, f"{i:08d}") for i in range(count)]
    if got != want:
        raise SystemExit(f"FAIL: {client} {phase}: got {len(got)} of {count} records "
                         f"(last {got[-1:] if got else None})")
    print(f"ok: {client} {phase}: {count} records in order")


def main():
    with tempfile.TemporaryDirectory() as data:
        proc = start(data)
        try:
            topics = []
            for count, size in SHAPES:
                topic = f"kip74-{size}-{uuid.uuid4().hex[:6]}"
                produce(topic, count, size)
                topics.append((topic, count))
                check("confluent-kafka", f"warm {count}x{size} B", consume_confluent(topic, count), count)
                check("kafka-python", f"warm {count}x{size} B", consume_kafka_python(topic, count), count)
            stop(proc)
            proc = start(data)
            for (topic, count), (_, size) in zip(topics, SHAPES):
                check("confluent-kafka", f"cold {count}x{size} B", consume_confluent(topic, count), count)
                check("kafka-python", f"cold {count}x{size} B", consume_kafka_python(topic, count), count)
        finally:
            if proc.poll() is None:
                stop(proc)


if __name__ == "__main__":
    main()
