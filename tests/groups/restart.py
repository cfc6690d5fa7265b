"""Committed offsets survive broker restarts (SIGTERM and SIGKILL).

Starts the broker binary itself. Per round: produce 300 records over 3 partitions, a
confluent-kafka consumer reads part of them and commits synchronously, the broker is
stopped (SIGTERM, then SIGKILL in the second round) and restarted on the same data
directory, and a new consumer of the group resumes: no committed record is delivered
again and nothing is skipped.
Usage: restart.py SHARDLOG_BINARY [PORT]. Bounded: each wait fails after 60 s.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BIN = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 39160
BS = f"127.0.0.1:{PORT}"
TOPIC = f"restart-{uuid.uuid4().hex[:8]}"
GROUP = f"restart-g-{uuid.uuid4().hex[:8]}"


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


def consumer():
    return Consumer({"bootstrap.servers": BS, "group.id": GROUP, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000})


def consume(c, want, deadline_s=60):
    got = []
    deadline = time.time() + deadline_s
    while len(got) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    return got


def round_trip(data_dir, proc, sig, tag):
    p = Producer({"bootstrap.servers": BS})
    values = [f"{tag}{i}" for i in range(300)]
    for i, v in enumerate(values):
        p.produce(TOPIC, value=v, partition=i % 3)
    p.flush(10)
    c = consumer()
    c.subscribe([TOPIC])
    first = consume(c, 150)
    c.commit(asynchronous=False)
    c.close()
    proc.send_signal(sig)
    proc.wait(30)
    proc = start(data_dir)
    c = consumer()
    c.subscribe([TOPIC])
    expected = set(values) - set(first)
    rest = consume(c, len(expected))
    time.sleep(1.0)  # anything extra (a redelivery) would show up now
    m = c.poll(1.0)
    while m is not None:
        if not m.error():
            rest.append(m.value().decode())
        m = c.poll(0.5)
    c.commit(asynchronous=False)
    c.close()
    again = set(rest) & set(first)
    missing = expected - set(rest)
    dupes = len(rest) - len(set(rest))
    print(f"{signal.Signals(sig).name}: committed {len(first)}, resumed {len(rest)}, redelivered {len(again)}, "
          f"missing {len(missing)}, duplicates {dupes}")
    if again or missing or dupes:
        raise SystemExit(f"FAIL after {signal.Signals(sig).name}")
    return proc


def main():
    with tempfile.TemporaryDirectory() as data_dir:
        proc = start(data_dir)
        try:
            admin = AdminClient({"bootstrap.servers": BS})
            for f in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
                f.result(10)
            proc = round_trip(data_dir, proc, signal.SIGTERM, "a")
            proc = round_trip(data_dir, proc, signal.SIGKILL, "b")
        finally:
            proc.kill()
            proc.wait()
    print("PASS")


if __name__ == "__main__":
    main()
