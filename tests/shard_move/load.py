"""The client side of tests/processes/shard_move.rs: an idempotent acks=all producer (librdkafka via
confluent-kafka, 5 in flight) writes "v<n>" round-robin over PARTITIONS partitions of TOPIC
until the file STOP exists, while a consumer (assigned every partition from the start)
reads continuously. Then the producer flushes, the consumer reads until it has every
acknowledged value (or a bound), and one JSON line reports what happened: acknowledged,
consumed, duplicates, missing, and every error either client saw (with its retriable flag).
Usage: load.py BOOTSTRAP TOPIC PARTITIONS STOP"""
import json
import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def main():
    bs, topic, partitions, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    errors = []
    acked = set()
    consumed = {}
    lock = threading.Lock()
    done = threading.Event()

    def on_error(err):
        # Client-level errors (connection resets are retriable and logged by librdkafka).
        with lock:
            errors.append({"who": "client", "error": str(err), "retriable": err.retriable(),
                           "fatal": err.fatal()})

    p = Producer({
        "bootstrap.servers": bs,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 2,
        "message.timeout.ms": 120000,
        "request.timeout.ms": 10000,
        "retry.backoff.ms": 20,
        "error_cb": on_error,
    })
    latencies = []

    def report(err, msg):
        if err is not None:
            with lock:
                errors.append({"who": "producer", "error": str(err),
                               "retriable": err.retriable(), "fatal": err.fatal()})
        else:
            with lock:
                acked.add(msg.value().decode())
                lat = msg.latency()
                if lat is not None:
                    latencies.append(lat)

    def consume():
        c = Consumer({"bootstrap.servers": bs, "group.id": "shard-move-check",
                      "enable.auto.commit": False, "error_cb": on_error,
                      "fetch.wait.max.ms": 100})
        c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        while True:
            for m in c.consume(500, timeout=0.2):
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        with lock:
                            errors.append({"who": "consumer", "error": str(m.error()),
                                           "retriable": m.error().retriable(),
                                           "fatal": m.error().fatal()})
                    continue
                v = m.value().decode()
                with lock:
                    # A value at two offsets is a duplicate in the log; the same offset
                    # read twice (a consumer re-fetch) is not.
                    consumed.setdefault(v, set()).add((m.partition(), m.offset()))
            if done.is_set():
                with lock:
                    if acked.issubset(consumed.keys()):
                        break
            if done.is_set() and time.time() > deadline[0]:
                break
        c.close()

    deadline = [0.0]
    t = threading.Thread(target=consume)
    t.start()
    n = 0
    started = time.time()
    while not os.path.exists(stop):
        try:
            p.produce(topic, value=f"v{n}".encode(), partition=n % partitions, on_delivery=report)
        except BufferError:
            p.poll(0.05)
            continue
        n += 1
        p.poll(0)
        if n % 50 == 0:
            time.sleep(0.005)
    left = p.flush(120)
    elapsed = time.time() - started
    deadline[0] = time.time() + 60
    done.set()
    t.join()
    with lock:
        dups = sorted(v for v, k in consumed.items() if len(k) > 1)
        missing = sorted(acked - consumed.keys())
        latencies.sort()
        q = lambda x: round(latencies[min(len(latencies) - 1, int(x * len(latencies)))] * 1000, 1) if latencies else None
        print(json.dumps({
            "sent": n, "unflushed": left, "acked": len(acked), "consumed": len(consumed),
            "duplicates": len(dups), "missing": len(missing), "missing_sample": missing[:10],
            "errors": errors[:50], "error_count": len(errors), "seconds": round(elapsed, 1),
            "ack_latency_ms": {"p50": q(0.5), "p99": q(0.99), "max": q(0.99999)},
        }), flush=True)


if __name__ == "__main__":
    main()
