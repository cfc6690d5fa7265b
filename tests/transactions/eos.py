"""Exactly-once consume-transform-produce under failures (issue 17).

N input records are written to a 3-partition topic; an app (the Java client's loop with
sendOffsetsToTransaction, or confluent-kafka's with send_offsets_to_transaction) turns each
into "out-<value>" on an output topic, in transactions that commit the consumed offsets too.
Meanwhile this driver SIGKILLs the app at random moments (restarting it) and the broker
(restarting it on the same port and data directory). Then the app runs until the group's
committed offsets reach the input's end. Pass: a read_committed consumer of the output sees
each input exactly once and no record of an aborted transaction; a read_uncommitted consumer
sees at least as many (the aborted copies, counted and printed).

Usage: eos.py BIN PORT APP_KILLS BROKER_KILLS CLASSPATH [python|java ...]  (uses PORT, PORT+1)
BIN "kafka" runs the same against Apache Kafka (perf/kafka/kafka.sh), for comparison."""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "idempotence"))
from kill_loop import Broker  # noqa: E402

N = 5000
STALL_S = 20
PARTITIONS = 3


class KafkaBroker:
    """Apache Kafka (perf/kafka/kafka.sh) in the same role, to compare: BIN = "kafka"."""

    def __init__(self, port, data):
        self.script = os.path.join(HERE, "..", "..", "perf", "kafka", "kafka.sh")
        self.port, self.dir, self.pid = port, data, None

    def start(self):
        out = subprocess.run([self.script, "start", "--port", str(self.port), "--dir", self.dir,
                              "--controller-port", str(self.port + 1)],
                             capture_output=True, text=True, check=True)
        self.pid = int(out.stdout.strip().splitlines()[-1])

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)
        while os.path.exists(f"/proc/{self.pid}"):
            time.sleep(0.05)
        os.remove(os.path.join(self.dir, "kafka.pid"))

    def stop(self):
        subprocess.run([self.script, "stop", "--dir", self.dir], capture_output=True)


class App:
    def __init__(self, kind, bs, src, dst, group, stop, cp, log):
        self.kind, self.log = kind, log
        txn_id = f"{group}-txn"
        if kind == "java":
            self.cmd = ["java", "-cp", cp, os.path.join(HERE, "java", "EosApp.java"),
                        bs, src, dst, group, txn_id, stop]
        else:
            self.cmd = [sys.executable, os.path.join(HERE, "eos_app.py"), bs, src, dst, group, txn_id, stop]
        self.proc = None
        self.restarts = 0
        self.stalls = 0

    def ensure(self):
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.restarts += 1
            self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=self.log)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)


def committed_total(bs, group, src):
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(src, p) for p in range(PARTITIONS)], timeout=10)
        return sum(max(tp.offset, 0) for tp in tps)
    except Exception:
        return -1
    finally:
        c.close()


def read(bs, topic, isolation):
    c = Consumer({"bootstrap.servers": bs, "group.id": f"eos-check-{os.getpid()}-{isolation}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out, idle, deadline = [], 0, time.time() + 120
    while idle < 5 and time.time() < deadline:
        msgs = [m for m in c.consume(1000, 1.0) if not m.error()]
        idle = 0 if msgs else idle + 1
        out.extend(m.value().decode() for m in msgs)
    c.close()
    return out


def run(kind, binary, port, app_kills, broker_kills, cp, work):
    bs = f"127.0.0.1:{port}"
    data = os.path.join(work, f"data-{kind}")
    os.makedirs(data)
    if binary == "kafka":
        broker = KafkaBroker(port, data)
    else:
        broker = Broker(binary, port, data)
        broker.cmd[-1] = os.environ.get("EOS_BROKER_LOG", "warn")
    broker.start()
    try:
        check(kind, broker, bs, app_kills, broker_kills, cp, work)
    finally:
        broker.stop()


def check(kind, broker, bs, app_kills, broker_kills, cp, work):
    src, dst, group = f"eos-in-{kind}", f"eos-out-{kind}", f"eos-{kind}"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (src, dst)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    for i in range(N):
        p.produce(src, key=f"k{i}", value=f"in-{i}")
    assert p.flush(60) == 0
    stop = os.path.join(work, f"STOP-{kind}")
    log = open(os.path.join(work, f"app-{kind}.log"), "ab")
    app = App(kind, bs, src, dst, group, stop, cp, log)
    try:
        transform(kind, broker, bs, app, app_kills, broker_kills, (src, dst, group), stop)
    finally:
        app.kill()


def transform(kind, broker, bs, app, app_kills, broker_kills, topics, stop):
    src, dst, group = topics
    app.ensure()
    rng = random.Random(int(os.environ.get("EOS_SEED", "17")))
    events = ["app"] * app_kills + ["broker"] * broker_kills
    rng.shuffle(events)
    t0 = time.time()
    for event in events:
        # Strike while the app is working: after its committed offsets moved since the
        # last event (a fresh instance first waits for its group to settle).
        start = committed_total(bs, group, src)
        deadline, since = time.time() + 90, time.time()
        while committed_total(bs, group, src) <= start and start < N and time.time() < deadline:
            if time.time() - since > STALL_S:
                print(f"[{kind}] no progress for {STALL_S} s: restarting the app", flush=True)
                app.stalls += 1
                app.kill()
                since = time.time()
            app.ensure()
            time.sleep(0.1)
        if committed_total(bs, group, src) >= N:
            break
        time.sleep(rng.uniform(0.0, 0.5))
        if event == "app":
            app.kill()
        else:
            broker.kill()
            broker.start()
        app.ensure()
    deadline = time.time() + 240
    last, last_move = -1, time.time()
    while (done := committed_total(bs, group, src)) < N:
        if time.time() > deadline:
            raise SystemExit(f"FAIL [{kind}]: committed offsets stuck at {done} of {N}")
        if done != last:
            last, last_move = done, time.time()
        elif time.time() - last_move > STALL_S:
            # A watchdog, as an operator's would be: after the only broker's SIGKILL
            # librdkafka keeps a decommissioned handle as group coordinator and
            # send_offsets_to_transaction hangs past its timeout (librdkafka#5511, #5456;
            # see README.md).
            print(f"[{kind}] no progress for {STALL_S} s: restarting the app", flush=True)
            app.stalls += 1
            app.kill()
            last_move = time.time()
        app.ensure()
        time.sleep(0.5)
    elapsed = time.time() - t0
    open(stop, "w").close()
    try:
        app.proc.wait(60)
    except subprocess.TimeoutExpired:
        app.kill()
    committed = read(bs, dst, "read_committed")
    uncommitted = read(bs, dst, "read_uncommitted")
    counts = Counter(committed)
    want = {f"out-in-{i}" for i in range(N)}
    dupes = [v for v, n in counts.items() if n > 1]
    missing = want - set(counts)
    extra = set(counts) - want
    print(f"[{kind}] {len(committed)} read_committed, {len(uncommitted)} read_uncommitted "
          f"(aborted copies: {len(uncommitted) - len(committed)}), app restarts {app.restarts}, "
          f"broker kills {broker_kills}, watchdog restarts {app.stalls}, {elapsed:.1f} s")
    if dupes or missing or extra:
        raise SystemExit(f"FAIL [{kind}]: duplicates {dupes[:5]} ({len(dupes)}), missing "
                         f"{sorted(missing)[:5]} ({len(missing)}), unexpected {sorted(extra)[:5]}")
    if len(uncommitted) < len(committed):
        raise SystemExit(f"FAIL [{kind}]: read_uncommitted saw fewer records than read_committed")


def main():
    binary, port, app_kills, broker_kills, cp = sys.argv[1:6]
    kinds = sys.argv[6:] or ["python", "java"]
    work = tempfile.mkdtemp(prefix="shardlog-eos-")
    try:
        for i, kind in enumerate(kinds):
            run(kind, binary, int(port) + 2 * i, int(app_kills), int(broker_kills), cp, work)
    except BaseException:
        print(f"work dir kept: {work}")
        raise
    if os.environ.get("EOS_KEEP"):
        print(f"work dir kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("eos: ok")


if __name__ == "__main__":
    main()
