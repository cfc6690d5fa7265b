"""The client side of tests/processes/cluster_shard_move.rs: an idempotent acks=all producer
(librdkafka via confluent-kafka, 5 in flight) writes "v<n>" round-robin over PARTITIONS
partitions of TOPIC until the file STOP exists (bounded: 300 s); with PRODUCERS > 1, that many producers (each
its own connections and producer id, so a broker spreads them over its shards) take turns,
writing "p<i>-v<n>". Meanwhile a consumer (assigned
every partition from the start) reads continuously. Then the producer flushes and every
partition is read back from offset 0 to its high watermark with a fresh consumer.

Both clients run with librdkafka's `msg` and `fetch` debug contexts into a logger that
counts what the brokers answered: NOT_LEADER_OR_FOLLOWER ("Not leader for partition", which
librdkafka retries after a metadata refresh) and OUT_OF_ORDER_SEQUENCE_NUMBER, with a few
sample lines. One JSON line reports: sent, acknowledged, read back, lost acknowledged
records, duplicates (a value at two offsets), every delivery/consumer error, the counted
broker answers, and the acknowledgement latencies.
Usage: load.py BOOTSTRAP TOPIC PARTITIONS STOP [PRODUCERS]"""
import json
import logging
import os
import re
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

LOAD_LIMIT_S = 300
# Every librdkafka log line to this file when CLUSTER_SHARD_MOVE_CLIENT_LOG names one.
TRACE = open(os.environ["CLUSTER_SHARD_MOVE_CLIENT_LOG"], "a", buffering=1) \
    if os.environ.get("CLUSTER_SHARD_MOVE_CLIENT_LOG") else None
PATTERNS = {
    "not_leader": re.compile(r"not leader", re.I),
    "out_of_order_sequence": re.compile(r"out of order sequence", re.I),
    "unknown_topic_or_partition": re.compile(r"unknown topic or partition", re.I),
    "timed_out": re.compile(r"timed out", re.I),
}


class Counter(logging.Handler):
    """Counts librdkafka log lines naming a broker answer (each error line once)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.counts = {k: 0 for k in PATTERNS}
        self.samples = []
        self.counts_lock = threading.Lock()

    def emit(self, record):
        text = record.getMessage()
        if TRACE is not None:
            TRACE.write(f"{time.time():.3f} {record.name} {text}\n")
        for name, pattern in PATTERNS.items():
            if pattern.search(text):
                with self.counts_lock:
                    self.counts[name] += 1
                    if len(self.samples) < 12:
                        self.samples.append(text[:300])


def logger(name, counter):
    log = logging.getLogger(name)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    log.addHandler(counter)
    return log


def main():
    bs, topic, partitions, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    producers = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    counter = Counter()
    errors = []
    acked = {}
    lock = threading.Lock()
    done = threading.Event()

    def on_error(err):
        with lock:
            errors.append({"who": "client", "error": str(err), "retriable": err.retriable(),
                           "fatal": err.fatal()})

    config = {
        "bootstrap.servers": bs,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 2,
        "message.timeout.ms": 120000,
        "request.timeout.ms": 10000,
        "retry.backoff.ms": 20,
        "error_cb": on_error,
        "debug": "msg",
        "logger": logger("producer", counter),
    }
    ps = [Producer(config) for _ in range(producers)]
    latencies = []

    def report(err, msg):
        with lock:
            if err is not None:
                errors.append({"who": "producer", "error": str(err),
                               "retriable": err.retriable(), "fatal": err.fatal()})
            else:
                acked[msg.value().decode()] = (msg.partition(), msg.offset())
                lat = msg.latency()
                if lat is not None:
                    latencies.append(lat)

    live = {"consumed": 0}

    def consume():
        c = Consumer({"bootstrap.servers": bs, "group.id": "cluster-shard-move",
                      "enable.auto.commit": False, "error_cb": on_error,
                      "fetch.wait.max.ms": 100, "debug": "fetch",
                      "logger": logger("consumer", counter)})
        c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        while not done.is_set():
            for m in c.consume(500, timeout=0.2):
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        with lock:
                            errors.append({"who": "consumer", "error": str(m.error()),
                                           "retriable": m.error().retriable(),
                                           "fatal": m.error().fatal()})
                    continue
                live["consumed"] += 1
        c.close()

    t = threading.Thread(target=consume)
    t.start()
    n = 0
    started = time.time()
    while not os.path.exists(stop) and time.time() - started < LOAD_LIMIT_S:
        i = n % producers
        p = ps[i]
        value = f"v{n}" if producers == 1 else f"p{i}-v{n}"
        try:
            p.produce(topic, value=value.encode(), partition=(n // producers) % partitions,
                      on_delivery=report)
        except BufferError:
            p.poll(0.05)
            continue
        n += 1
        p.poll(0)
        if n % 50 == 0:
            for q in ps:
                q.poll(0)
            time.sleep(0.005)
    left = sum(p.flush(120) for p in ps)
    elapsed = time.time() - started
    done.set()
    t.join()

    # Read everything back: each value once, at the offset it was acknowledged at.
    r = Consumer({"bootstrap.servers": bs, "group.id": "cluster-shard-move-check",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "error_cb": on_error})
    seen = {}
    duplicates = 0
    for part in range(partitions):
        _, high = r.get_watermark_offsets(TopicPartition(topic, part), timeout=30)
        r.assign([TopicPartition(topic, part, 0)])
        offset = 0
        deadline = time.monotonic() + 60
        while offset < high and time.monotonic() < deadline:
            m = r.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    with lock:
                        errors.append({"who": "reader", "error": str(m.error()),
                                       "retriable": m.error().retriable(), "fatal": False})
                continue
            v = m.value().decode()
            if v in seen:
                duplicates += 1
            seen[v] = (part, m.offset())
            offset = m.offset() + 1
    r.close()
    with lock:
        lost = sorted(v for v, at in acked.items() if seen.get(v) != at)
        latencies.sort()
        q = lambda x: round(latencies[min(len(latencies) - 1, int(x * len(latencies)))] * 1000, 1) if latencies else None
        print(json.dumps({
            "sent": n, "unflushed": left, "acked": len(acked), "read_back": len(seen),
            "consumed_live": live["consumed"], "lost": len(lost), "lost_sample": lost[:10],
            "duplicates": duplicates, "errors": errors[:50], "error_count": len(errors),
            "broker_answers": counter.counts, "answer_samples": counter.samples,
            "seconds": round(elapsed, 1),
            "ack_latency_ms": {"p50": q(0.5), "p99": q(0.99), "max": q(0.99999)},
        }), flush=True)


if __name__ == "__main__":
    main()
