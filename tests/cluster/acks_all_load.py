#!/usr/bin/env python3
"""An acks=all idempotent load for the controlled-shutdown test (tests/processes/cluster_leadership.rs).

Produces numbered values round-robin over the topic's partitions with confluent-kafka
(enable.idempotence, acks=all) until STOP_FILE exists, remembers every acknowledged
(partition, offset, value), then reads every partition back to its high watermark and
prints one JSON line: acked, delivery errors (name, retriable), client error events, lost
acknowledged records, duplicates and the longest gap between two acknowledgements (with
its start, Unix seconds).
Bounded: the load stops after 300 s whatever happens.

Usage: acks_all_load.py BOOTSTRAP TOPIC PARTITIONS STOP_FILE
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

LOAD_LIMIT_S = 300
RATE_PER_S = 400


def main():
    bootstrap, topic, partitions, stop_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    acked = {}
    delivery_errors = []
    events = []
    ack_times = []

    def on_error(err):
        events.append({"name": err.name(), "retriable": err.retriable(), "fatal": err.fatal()})

    def on_delivery(err, msg):
        if err is not None:
            delivery_errors.append({"name": err.name(), "retriable": err.retriable()})
            return
        acked[msg.value().decode()] = (msg.partition(), msg.offset())
        ack_times.append(time.time())

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120000,
        "error_cb": on_error,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    started = time.monotonic()
    n = 0
    while not os.path.exists(stop_file) and time.monotonic() - started < LOAD_LIMIT_S:
        value = f"v-{n}"
        try:
            producer.produce(topic, value=value.encode(), partition=n % partitions,
                             on_delivery=on_delivery)
            n += 1
        except BufferError:
            pass
        producer.poll(1.0 / RATE_PER_S)
    left = producer.flush(150)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "acks-all-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "error_cb": on_error})
    seen = {}
    duplicates = 0
    for p in range(partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        consumer.assign([TopicPartition(topic, p, 0)])
        offset = 0
        deadline = time.monotonic() + 60
        while offset < high and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    events.append({"name": msg.error().name(), "retriable": msg.error().retriable(),
                                   "fatal": False})
                continue
            value = msg.value().decode()
            if value in seen:
                duplicates += 1
            seen[value] = (p, msg.offset())
            offset = msg.offset() + 1
    consumer.close()
    lost = [v for v, at in acked.items() if seen.get(v) != at]
    gaps = [(b - a, a) for a, b in zip(ack_times, ack_times[1:])]
    worst = max(gaps) if gaps else (0, 0)
    print(json.dumps({
        "produced": n,
        "acked": len(acked),
        "unflushed": left,
        "delivery_errors": delivery_errors,
        "events": events,
        "lost": len(lost),
        "lost_sample": lost[:10],
        "duplicates": duplicates,
        "max_ack_gap_ms": round(worst[0] * 1000),
        "max_ack_gap_from_unix_s": round(worst[1], 3),
    }))


if __name__ == "__main__":
    main()
