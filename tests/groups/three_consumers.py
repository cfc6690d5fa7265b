"""Three confluent-kafka consumers in one group on a 6-partition topic.

Checks: every partition assigned to exactly one member; closing one member (LeaveGroup)
moves its partitions to the others at once; a member killed with SIGKILL (no LeaveGroup)
loses its partitions to the others within the session timeout; records produced during
each rebalance are all consumed (at-least-once: duplicates only from uncommitted ranges).
Usage: three_consumers.py BOOTSTRAP. Bounded: fails after 90 s.
"""
import subprocess
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BS = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:39092"
TOPIC = f"grp3-{uuid.uuid4().hex[:8]}"
GROUP = f"g3-{uuid.uuid4().hex[:8]}"
DEADLINE = time.time() + 90


def create_topic():
    admin = AdminClient({"bootstrap.servers": BS})
    for f in admin.create_topics([NewTopic(TOPIC, 6, 1)]).values():
        f.result(10)


class Member(threading.Thread):
    def __init__(self, name):
        super().__init__(daemon=True)
        self.name = name
        self.stop = threading.Event()
        self.seen = []
        self.assignment = set()
        self.lock = threading.Lock()
        self.c = Consumer({
            "bootstrap.servers": BS, "group.id": GROUP, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": True,
            "auto.commit.interval.ms": 200, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        })

    def run(self):
        def on_assign(c, parts):
            with self.lock:
                self.assignment = {p.partition for p in parts}

        def on_revoke(c, parts):
            with self.lock:
                self.assignment = set()

        self.c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
        while not self.stop.is_set():
            m = self.c.poll(0.2)
            if m is None or m.error():
                continue
            with self.lock:
                self.seen.append((m.partition(), m.offset(), m.value().decode()))
        self.c.close()

    def parts(self):
        with self.lock:
            return set(self.assignment)


def wait_for(cond, what):
    while time.time() < DEADLINE:
        if cond():
            return
        time.sleep(0.2)
    raise SystemExit(f"FAIL: timed out waiting for {what}")


def main():
    create_topic()
    p = Producer({"bootstrap.servers": BS, "linger.ms": 5})
    members = [Member(f"m{i}") for i in range(3)]
    for m in members:
        m.start()

    def balanced(ms):
        sets = [m.parts() for m in ms]
        union = set().union(*sets)
        return union == set(range(6)) and sum(len(s) for s in sets) == 6 and all(sets)

    t0 = time.time()
    wait_for(lambda: balanced(members), "initial assignment")
    print(f"assigned in {time.time() - t0:.2f}s:", [sorted(m.parts()) for m in members])
    sent = []
    for i in range(300):
        p.produce(TOPIC, value=f"a{i}", partition=i % 6)
        sent.append(f"a{i}")
    p.flush(10)
    wait_for(lambda: sum(len(m.seen) for m in members) >= 300, "first 300 records")
    time.sleep(0.5)  # let auto-commit run
    victim = members[0]
    victim.stop.set()
    victim.join(10)
    t1 = time.time()
    for i in range(300):  # produced during the rebalance
        p.produce(TOPIC, value=f"b{i}", partition=i % 6)
        sent.append(f"b{i}")
    p.flush(10)
    wait_for(lambda: balanced(members[1:]), "reassignment to the two survivors")
    moved = time.time() - t1
    print(f"rebalanced in {moved:.2f}s:", [sorted(m.parts()) for m in members[1:]])
    got = lambda: {v for m in members for (_, _, v) in m.seen}
    wait_for(lambda: got() >= set(sent), "all 600 records")
    total = sum(len(m.seen) for m in members)
    print(f"consumed {len(got())} distinct of {len(sent)}; {total - len(got())} duplicates")
    assert moved < 6 + 3, f"partitions moved after {moved:.1f}s (> session timeout)"
    killed_member_phase(members[1:], p, sent, got)
    for m in members[1:]:
        m.stop.set()
        m.join(10)
    print("PASS")


KILLED_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": "doomed",
              "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 500})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
"""


def killed_member_phase(survivors, producer, sent, got):
    """A third member in its own process joins, then dies by SIGKILL (no LeaveGroup)."""
    doomed = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, BS, GROUP, TOPIC])
    try:
        def shared_with_doomed():
            sets = [m.parts() for m in survivors]
            return all(sets) and sum(map(len, sets)) == 4 and len(set().union(*sets)) == 4
        wait_for(shared_with_doomed, "the third member's share")
    finally:
        doomed.kill()
        doomed.wait()
    t0 = time.time()
    for i in range(300):
        producer.produce(TOPIC, value=f"c{i}", partition=i % 6)
        sent.append(f"c{i}")
    producer.flush(10)

    def balanced_again():
        sets = [m.parts() for m in survivors]
        return all(sets) and sum(map(len, sets)) == 6 and set().union(*sets) == set(range(6))
    wait_for(balanced_again, "takeover after SIGKILL")
    took = time.time() - t0
    print(f"after SIGKILL of a member: partitions moved in {took:.2f}s (session timeout 6 s)")
    assert took < 6 + 4, f"takeover took {took:.1f}s"
    wait_for(lambda: got() >= set(sent), "all records after the SIGKILL")
    print(f"consumed all {len(set(sent))} records")


if __name__ == "__main__":
    main()
