"""Client side of `cargo test --test processes transactions_prepared_restart`, with
confluent-kafka. Usage: python3 prepared.py BOOTSTRAP TOPIC commit|read
  commit: a transactional producer writes p0..p2 to partition 0 and commits; the broker is
          armed to die between the durable PrepareCommit and the markers, so the commit call
          fails. Prints "sent".
  read:   a read_committed consumer (no transactional client anywhere) reads partition 0
          from the start until it has the 3 values or 60 s passed; prints them as JSON.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bs, topic, mode = sys.argv[1:4]
if mode == "commit":
    p = Producer({"bootstrap.servers": bs, "transactional.id": "prepared-restart",
                  "linger.ms": 0, "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"p{i}".encode(), partition=0)
    p.flush(30)
    try:
        p.commit_transaction(10)
    except KafkaException as e:
        print(f"commit failed as the broker died: {e}", file=sys.stderr)
    print("sent", flush=True)
else:
    c = Consumer({"bootstrap.servers": bs, "group.id": "prepared-restart-reader",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.time() + 60
    while len(got) < 3 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    print(json.dumps(got), flush=True)
