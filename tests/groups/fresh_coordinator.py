"""Issue 12: consumer groups on a freshly started broker never see NOT_COORDINATOR.

Starts the broker binary itself on an empty data directory and, as soon as its port
accepts, starts confluent-kafka consumers of several groups (librdkafka's cgrp debug log
captured) and a kafka-python consumer (its DEBUG log captured) at once, while
`__consumer_offsets` does not exist yet. Every consumer must get its assignment, and no
log line may mention NOT_COORDINATOR: the broker answers COORDINATOR_NOT_AVAILABLE /
COORDINATOR_LOAD_IN_PROGRESS (retriable, no coordinator re-discovery), or nothing at all.
Usage: fresh_coordinator.py SHARDLOG_BINARY PORT. Bounded: every wait fails after 60 s.
"""
import logging
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer
from kafka import KafkaConsumer

BIN = sys.argv[1]
PORT = int(sys.argv[2])
BS = f"127.0.0.1:{PORT}"
TOPIC = "fresh-coordinator"
GROUPS = [f"fresh-g{i}" for i in range(4)]
NOT_COORDINATOR = re.compile(r"NOT_COORDINATOR|Not coordinator|NotCoordinator", re.I)


class Collect(logging.Handler):
    """Keeps every formatted record (Handler.handle already holds the handler's lock)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(self.format(record))


def start(data_dir):
    proc = subprocess.Popen([BIN, "serve", "--listen", BS, "--data-dir", data_dir, "--shards",
                             "2", "--log-level", "warn", "--admin-listen", "127.0.0.1:0"])
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", PORT), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise SystemExit("FAIL: broker did not start")


def confluent(group, handler, assigned):
    log = logging.getLogger(f"rdkafka.{group}")
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    c = Consumer({"bootstrap.servers": BS, "group.id": group, "debug": "cgrp",
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000},
                 logger=log)
    c.subscribe([TOPIC], on_assign=lambda _c, parts: assigned.__setitem__(group, len(parts)))
    deadline = time.time() + 60
    while group not in assigned and time.time() < deadline:
        c.poll(0.2)
    c.close()


def kafka_python(handler, assigned):
    logging.getLogger("kafka").setLevel(logging.DEBUG)
    logging.getLogger("kafka").addHandler(handler)
    c = KafkaConsumer(TOPIC, bootstrap_servers=BS, group_id="fresh-kp",
                      auto_offset_reset="earliest", session_timeout_ms=6000)
    deadline = time.time() + 60
    while not c.assignment() and time.time() < deadline:
        c.poll(200)
    if c.assignment():
        assigned["fresh-kp"] = len(c.assignment())
    c.close()


def main():
    handler = Collect()
    assigned = {}
    with tempfile.TemporaryDirectory() as data_dir:
        proc = start(data_dir)
        try:
            threads = [threading.Thread(target=confluent, args=(g, handler, assigned))
                       for g in GROUPS]
            threads.append(threading.Thread(target=kafka_python, args=(handler, assigned)))
            for t in threads:
                t.start()
            for t in threads:
                t.join(90)
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    bad = [line for line in handler.lines if NOT_COORDINATOR.search(line)]
    for line in bad[:10]:
        print(f"  {line}")
    want = set(GROUPS) | {"fresh-kp"}
    if set(assigned) != want:
        raise SystemExit(f"FAIL: groups without an assignment: {sorted(want - set(assigned))}")
    print(f"ok   {len(want)} groups assigned on a fresh broker ({len(handler.lines)} log lines)")
    if bad:
        raise SystemExit(f"FAIL: {len(bad)} client log lines mention NOT_COORDINATOR")
    print("ok   no NOT_COORDINATOR in the clients' logs")
    print("PASS")


if __name__ == "__main__":
    main()
