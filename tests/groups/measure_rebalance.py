"""Measures rebalance time of a 3-member confluent-kafka group on a 12-partition topic.

Figures (seconds, wall clock, client side):
- form: three consumers subscribe at once -> all 12 partitions assigned (includes
  group.initial.rebalance.delay.ms = 3 s and the MEMBER_ID_REQUIRED round);
- join: a 4th member subscribes -> all four hold a share of the 12 partitions;
- leave: one member closes (LeaveGroup) -> the other three own all 12 partitions.
Usage: measure_rebalance.py BOOTSTRAP [ROUNDS]. Bounded: 60 s per wait.
"""
import statistics
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

BS = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:39092"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3


class Member(threading.Thread):
    def __init__(self, group, topic):
        super().__init__(daemon=True)
        self.parts, self.stop, self.lock = set(), threading.Event(), threading.Lock()
        self.c = Consumer({"bootstrap.servers": BS, "group.id": group, "session.timeout.ms": 6000,
                           "heartbeat.interval.ms": 300, "enable.auto.commit": False})
        self.topic = topic

    def run(self):
        def assign(c, ps):
            with self.lock:
                self.parts = {p.partition for p in ps}

        def revoke(c, ps):
            with self.lock:
                self.parts = set()

        self.c.subscribe([self.topic], on_assign=assign, on_revoke=revoke)
        while not self.stop.is_set():
            self.c.poll(0.05)
        self.c.close()

    def owned(self):
        with self.lock:
            return set(self.parts)


def covered(members, n):
    sets = [m.owned() for m in members]
    return all(sets) and sum(map(len, sets)) == n and set().union(*sets) == set(range(n))


def wait(cond):
    t0 = time.time()
    while not cond():
        if time.time() - t0 > 60:
            raise SystemExit("FAIL: timeout")
        time.sleep(0.01)
    return time.time() - t0


def one_round():
    topic, group = f"rb-{uuid.uuid4().hex[:8]}", f"rb-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": BS})
    for f in admin.create_topics([NewTopic(topic, 12, 1)]).values():
        f.result(10)
    members = [Member(group, topic) for _ in range(3)]
    for m in members:
        m.start()
    form = wait(lambda: covered(members, 12))
    fourth = Member(group, topic)
    fourth.start()
    join = wait(lambda: covered(members + [fourth], 12))
    members[0].stop.set()
    leave = wait(lambda: covered(members[1:] + [fourth], 12))
    for m in members[1:] + [fourth]:
        m.stop.set()
    for m in members + [fourth]:
        m.join(10)
    return form, join, leave


def main():
    rows = [one_round() for _ in range(ROUNDS)]
    for name, i in (("form (3 members)", 0), ("join (4th member)", 1), ("leave (1 of 4)", 2)):
        xs = [r[i] for r in rows]
        print(f"{name:<20} median {statistics.median(xs):.3f}s  min {min(xs):.3f}s  max {max(xs):.3f}s")


if __name__ == "__main__":
    main()
