"""The confluent-kafka side of tests/transactions: a consume-transform-produce loop with
exactly-once semantics. Reads IN (read_committed, group GROUP), writes "out-<value>" to OUT
in a transaction together with the consumed offsets (send_offsets_to_transaction), one
transaction per poll of at most 20 records, each held open 30 ms (simulated work, so that the
driver's kills land inside transactions), until the file STOP exists. Any error exits non-zero
(the driver restarts the app; the transaction left open is aborted by the next instance's
init_transactions, which fences this one).
Usage: eos_app.py BOOTSTRAP IN OUT GROUP TXN_ID STOP"""
import faulthandler
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer

bs, src, dst, group, txn_id, stop = sys.argv[1:7]
faulthandler.register(signal.SIGUSR1)  # a stack dump on demand, when a run hangs
consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     # Static membership: a restarted app takes its partitions back at once.
                     "group.instance.id": f"{group}-app"})
producer = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 5,
                     "transaction.timeout.ms": 10000, "message.timeout.ms": 10000,
                     **({"debug": os.environ["EOS_DEBUG"]} if os.environ.get("EOS_DEBUG") else {})})
producer.init_transactions(60)
consumer.subscribe([src])
done = 0
while not os.path.exists(stop):
    msgs = consumer.consume(20, 0.1)
    msgs = [m for m in msgs if not m.error()]
    if not msgs:
        continue
    producer.begin_transaction()
    for m in msgs:
        producer.produce(dst, key=m.key(), value=b"out-" + m.value(), partition=m.partition())
    time.sleep(0.03)
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    done += len(msgs)
print(f"python app: {done} records transformed", flush=True)
consumer.close()
