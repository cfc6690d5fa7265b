"""kafka-python consumer groups, then lag as Kafka's own tool and `shardlog groups` see it.

Two kafka-python consumers share a 4-partition topic (disjoint assignments covering all
partitions, every record consumed, offsets committed); both stop; N more records are
produced; `kafka-consumer-groups.sh --describe` (ConsumerGroupCommand) and
`shardlog groups describe` (when the binary has the subcommand) must both show lag N.
Then ConsumerGroupCommand --reset-offsets --to-earliest and --delete.
Usage: kafka_python_and_tools.py BOOTSTRAP [SHARDLOG_BINARY]. Bounded: 60 s per wait.
"""
import os
import subprocess
import sys
import threading
import time
import uuid

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

BS = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:39092"
BIN = sys.argv[2] if len(sys.argv) > 2 else None
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KAFKA_SH = os.path.join(REPO, "perf", "kafka", "kafka.sh")
CGC = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TOPIC = f"kp-{uuid.uuid4().hex[:8]}"
GROUP = f"kp-g-{uuid.uuid4().hex[:8]}"
N = 25


def tool(*args):
    res = subprocess.run([KAFKA_SH, "tool", CGC, "--bootstrap-server", BS, *args],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise SystemExit(f"FAIL: {CGC} {args}: {res.stderr[-2000:]}")
    return res.stdout


def lag_column(text, lag_index):
    total = 0
    for line in text.splitlines():
        cols = line.split()
        if cols and cols[0] == GROUP and len(cols) > lag_index and cols[lag_index].isdigit():
            total += int(cols[lag_index])
    return total


def main():
    admin = KafkaAdminClient(bootstrap_servers=BS)
    admin.create_topics([NewTopic(TOPIC, 4, 1)])
    producer = KafkaProducer(bootstrap_servers=BS, enable_idempotence=False)
    for i in range(200):
        producer.send(TOPIC, value=f"v{i}".encode(), partition=i % 4)
    producer.flush()

    seen, parts = [], []
    lock = threading.Lock()

    def run(idx):
        c = KafkaConsumer(TOPIC, bootstrap_servers=BS, group_id=GROUP, auto_offset_reset="earliest",
                          enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
        deadline = time.time() + 60
        while time.time() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                with lock:
                    seen.extend(r.value for r in recs)
            c.commit()
            with lock:
                if len(set(seen)) >= 200 and len(c.assignment()) in (1, 2, 3):
                    break
        with lock:
            parts.append({tp.partition for tp in c.assignment()})
        c.commit()
        time.sleep(2)  # keep membership while the other one finishes
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    if len(set(seen)) != 200:
        raise SystemExit(f"FAIL: kafka-python consumed {len(set(seen))} of 200")
    print("kafka-python assignments:", parts)
    if len(parts) == 2 and parts[0] & parts[1]:
        raise SystemExit(f"FAIL: overlapping assignments {parts}")

    for i in range(N):
        producer.send(TOPIC, value=f"late{i}".encode(), partition=i % 4)
    producer.flush()
    described = tool("--describe", "--group", GROUP)
    lag = lag_column(described, 5)
    print(f"kafka-consumer-groups --describe: lag {lag}")
    if lag != N:
        raise SystemExit(f"FAIL: expected lag {N}:\n{described}")
    if BIN and subprocess.run([BIN, "groups", "--help"], capture_output=True).returncode == 0:
        out = subprocess.run([BIN, "groups", "--bootstrap-server", BS, "describe", GROUP],
                             capture_output=True, text=True, timeout=60).stdout
        ours = lag_column(out, 5)
        print(f"shardlog groups describe: lag {ours}")
        if ours != N:
            raise SystemExit(f"FAIL: shardlog groups describe lag {ours}:\n{out}")
    else:
        print("shardlog groups: subcommand not wired in this binary; skipped")
    tool("--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute")
    lag = lag_column(tool("--describe", "--group", GROUP), 5)
    if lag != 200 + N:
        raise SystemExit(f"FAIL: lag after reset {lag}")
    out = tool("--delete", "--group", GROUP)
    if "successful" not in out:
        raise SystemExit(f"FAIL: delete: {out}")
    if GROUP in tool("--list").split():
        raise SystemExit("FAIL: group still listed after delete")
    print("PASS")


if __name__ == "__main__":
    main()
