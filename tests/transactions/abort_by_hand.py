"""kafka-transactions.sh find-hanging and abort against Shardlog (issue 17's tools).

A confluent-kafka producer opens a transaction on a new 1-partition topic and leaves it
open. Kafka's own TransactionsCommand (through perf/kafka/kafka.sh) must then:
`find-hanging` exits 0 (the coordinator knows the transaction: it is not hanging), and
`abort --start-offset 0` writes an ABORT marker, after which a read_committed consumer sees
none of the records and a read_uncommitted one sees all three.
Usage: abort_by_hand.py BOOTSTRAP"""
import os
import subprocess
import sys

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bs = sys.argv[1]
TOPIC = "abort-by-hand"
HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = [os.path.join(HERE, "..", "..", "perf", "kafka", "kafka.sh"), "tool",
        "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bs]


def tool(*args):
    out = subprocess.run(TOOL + list(args), capture_output=True, text=True, timeout=120)
    print(f"$ kafka-transactions.sh {' '.join(args)}\n{out.stdout.strip()}", flush=True)
    if out.returncode != 0:
        raise SystemExit(f"FAIL: kafka-transactions.sh {args[0]} exited {out.returncode}: "
                         f"{out.stderr.strip()[-500:]}")
    return out.stdout


def read(isolation):
    c = Consumer({"bootstrap.servers": bs, "group.id": f"abort-by-hand-{isolation}",
                  "isolation.level": isolation, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    values, idle = [], 0
    while idle < 3:
        msgs = [m for m in c.consume(10, 1.0) if not m.error()]
        idle = 0 if msgs else idle + 1
        values += [m.value() for m in msgs]
    c.close()
    return values


admin = AdminClient({"bootstrap.servers": bs})
for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
    f.result(30)
p = Producer({"bootstrap.servers": bs, "transactional.id": "abort-by-hand",
              "transaction.timeout.ms": 600000})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    p.produce(TOPIC, value=b"v%d" % i, partition=0)
assert p.flush(30) == 0
producers = tool("describe-producers", "--topic", TOPIC, "--partition", "0")
assert producers.splitlines()[1].split()[-1] == "0", "the open transaction starts at offset 0"
tool("find-hanging", "--broker-id", "0", "--max-transaction-timeout", "1")
tool("abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "0")
producers = tool("describe-producers", "--topic", TOPIC, "--partition", "0")
assert producers.splitlines()[1].split()[-1] == "None", "no transaction open after the abort"
committed, uncommitted = read("read_committed"), read("read_uncommitted")
print(f"read_committed {committed}, read_uncommitted {uncommitted}", flush=True)
if committed or uncommitted != [b"v0", b"v1", b"v2"]:
    raise SystemExit("FAIL: the aborted records must be visible to read_uncommitted only")
print("abort_by_hand: ok", flush=True)
