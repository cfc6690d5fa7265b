"""Idempotent producers against a broker SIGKILLed over and over (issue 14).

A Java producer and a confluent-kafka producer (enable.idempotence=true, acks=all, 5 in
flight, retrying for minutes) write to a 3-partition topic while this driver SIGKILLs the
broker KILLS times at random moments and restarts it on the same port and data directory.
Then both stop, and the topic is read back from the beginning. Pass: every acknowledged
record is present exactly once at the offset it was acknowledged with, no record appears
twice (acknowledged or not), each producer's records keep their send order within each
partition, and no send failed.

Usage: kill_loop.py BIN PORT KILLS CLASSPATH   (uses PORT and PORT+1)"""
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
TOPIC = "idem-kill"
PARTITIONS = 3


def wait_port(port, limit_s=60):
    deadline = time.time() + limit_s
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"FAIL: broker not listening on {port} after {limit_s} s")


class Broker:
    def __init__(self, binary, port, data):
        self.cmd = [binary, "serve", "--listen", f"127.0.0.1:{port}",
                    "--admin-listen", f"127.0.0.1:{port + 1}", "--data-dir", data,
                    "--shards", "2", "--log-level", "warn"]
        self.port = port
        self.log = open(os.path.join(data, "..", "broker.log"), "ab")
        self.proc = None

    def start(self):
        self.log.write(f"=== start {time.time():.3f}\n".encode())
        self.log.flush()
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=self.log)
        wait_port(self.port)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.log.write(f"=== killed {time.time():.3f}\n".encode())
        self.log.flush()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def read_all(bs, topic=TOPIC, partitions=PARTITIONS):
    """Every record of `topic` from offset 0 to the end: (partition, offset, value)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"idem-check-{os.getpid()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ends = {}
    for p in range(partitions):
        deadline = time.time() + 60
        while True:
            try:
                ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                break
            except Exception:  # a broker just restarted may not lead yet
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    seen_end = {p: 0 for p in range(partitions)}
    deadline = time.time() + 120
    while any(seen_end[p] < ends[p] for p in ends) and time.time() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error():
                continue
            out.append((m.partition(), m.offset(), m.value().decode()))
            seen_end[m.partition()] = m.offset() + 1
    c.close()
    if any(seen_end[p] < ends[p] for p in ends):
        raise SystemExit(f"FAIL: could not read to the end: {seen_end} < {ends}")
    return out


def describe_producers(bs):
    """Rows of `kafka-transactions.sh describe-producers` for partition 0 (Kafka's tool)."""
    tool = os.path.join(HERE, "..", "..", "perf", "kafka", "kafka.sh")
    out = subprocess.run([tool, "tool", "org.apache.kafka.tools.TransactionsCommand",
                          "--bootstrap-server", bs, "describe-producers", "--topic", TOPIC,
                          "--partition", "0"], capture_output=True, text=True, timeout=120)
    print(out.stdout.strip())
    rows = out.stdout.strip().splitlines()[1:]
    return [r.split() for r in rows if r.strip()]


def parse(path):
    acks, errors, done = {}, [], None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "ACK":
                acks[parts[3]] = (int(parts[1]), int(parts[2]))
            elif parts and parts[0] == "ERR":
                errors.append(line.strip())
            elif parts and parts[0] == "DONE":
                done = line.strip()
    return acks, errors, done


def main():
    binary, port, kills, classpath = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    work = tempfile.mkdtemp(prefix="idem-kill-")
    data = os.path.join(work, "data")
    os.makedirs(data)
    bs = f"127.0.0.1:{port}"
    broker = Broker(binary, port, data)
    broker.start()
    producers = []
    try:
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        del admin
        stop = os.path.join(work, "STOP")
        outs = {"java": os.path.join(work, "java.out"), "rdkafka": os.path.join(work, "rdkafka.out")}
        cmds = {
            "java": ["java", "-Xmx256m", "-cp", classpath,
                     os.path.join(HERE, "java", "IdempotentProducer.java"), bs, TOPIC, stop],
            "rdkafka": [sys.executable, os.path.join(HERE, "producer_confluent.py"), bs, TOPIC, stop],
        }
        for name, cmd in cmds.items():
            producers.append((name, subprocess.Popen(cmd, stdout=open(outs[name], "w"),
                                                     stderr=open(outs[name] + ".err", "w"))))
        time.sleep(4)  # the JVM compiles the producer first
        rng = random.Random(port)
        for k in range(kills):
            time.sleep(rng.uniform(0.3, 1.2))
            broker.kill()
            broker.start()
            print(f"kill {k + 1}/{kills}", flush=True)
        time.sleep(3)
        open(stop, "w").close()
        for name, proc in producers:
            try:
                proc.wait(300)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise SystemExit(f"FAIL: the {name} producer did not finish")
        records = read_all(bs)
        producers_shown = describe_producers(bs)
    finally:
        for _, proc in producers:
            if proc.poll() is None:
                proc.kill()
        broker.stop()
    failures = []
    counts = Counter(v for _, _, v in records)
    dups = {v: n for v, n in counts.items() if n > 1}
    if dups:
        failures.append(f"{len(dups)} records stored more than once, e.g. {list(dups.items())[:5]}")
    where = {v: (p, o) for p, o, v in records}
    for name, path in outs.items():
        acks, errors, done = parse(path)
        lost = [v for v, po in acks.items() if where.get(v) != po]
        print(f"{name}: {len(acks)} acknowledged, {len(errors)} failed, {done}")
        if not done:
            failures.append(f"{name}: no DONE line (see {path}.err)")
        if errors:
            failures.append(f"{name}: {len(errors)} sends failed, e.g. {errors[:3]}")
        if lost:
            failures.append(f"{name}: {len(lost)} acknowledged records missing or moved, "
                            f"e.g. {[(v, acks[v], where.get(v)) for v in lost[:5]]}")
        if len(acks) == 0:
            failures.append(f"{name}: nothing acknowledged")
    order = defaultdict(list)
    for p, o, v in sorted(records):
        client, n = v.rsplit("-", 1)
        order[(client, p)].append(int(n))
    for (client, p), seq in order.items():
        if any(b <= a for a, b in zip(seq, seq[1:])):
            failures.append(f"{client}: partition {p} out of send order")
    if len(producers_shown) < 2:
        failures.append(f"describe-producers shows {len(producers_shown)} producers, not 2")
    print(f"{kills} kills, {len(records)} records stored")
    if failures:
        for f in failures:
            print("FAIL:", f)
        print(f"(work dir kept: {work})")
        sys.exit(1)
    subprocess.run(["rm", "-rf", work], check=False)
    print("PASS")


if __name__ == "__main__":
    main()
