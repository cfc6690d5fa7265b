"""Idempotent producers with every codec against a broker SIGKILLed over and over (issue 19:
the soak found records stored twice by the gzip and snappy producers after a kill).

One confluent-kafka producer per codec (none, gzip, snappy, lz4, zstd; enable.idempotence,
acks=all, 5 in flight, linger 5 ms) writes numbered records to an 8-partition topic with
small segments (rolls write producer snapshots) while this driver SIGKILLs the broker KILLS
times and restarts it on the same data directory. Then the producers flush and the topic is
read back. Pass: every acknowledged record is stored once at its acknowledged offset, no
record is stored twice, each producer's records keep their send order per partition, and
no send failed.

librdkafka's `eos,msg,protocol` debug log of each producer goes to WORK/rdkafka-<codec>.log
and the broker's log to WORK/broker.log, so a failure can be traced to the request that
wrote the second copy. WORK is kept on failure.

Usage: kill_codecs.py BIN PORT KILLS [WORK]   (uses PORT and PORT+1)"""
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kill_loop import Broker, read_all  # noqa: E402

TOPIC = "idem-codecs"
PARTITIONS = 8
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
RATE_PER_S = 400


def producer(bs, codec, work, stop, results):
    logger = logging.getLogger(f"rdkafka-{codec}")
    handler = logging.FileHandler(os.path.join(work, f"rdkafka-{codec}.log"))
    handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "acks": "all",
                  "compression.type": codec, "linger.ms": 5,
                  "max.in.flight.requests.per.connection": 5, "message.timeout.ms": 300000,
                  "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500,
                  "debug": "eos,msg,protocol", "logger": logger})
    acks = open(os.path.join(work, f"acked-{codec}.tsv"), "w")
    errors = []

    def report(err, msg):
        value = msg.value().decode()
        if err is not None:
            errors.append(f"{value} {err}")
        else:
            acks.write(f"{msg.partition()}\t{msg.offset()}\t{value}\t{time.time():.3f}\n")

    n = 0
    interval = 1.0 / RATE_PER_S
    next_t = time.time()
    while not stop.is_set():
        try:
            p.produce(TOPIC, key=f"k{n % 101}", value=f"{codec}-{n}", on_delivery=report)
        except BufferError:
            p.poll(0.1)
            continue
        n += 1
        p.poll(0)
        next_t += interval
        delay = next_t - time.time()
        if delay > 0:
            time.sleep(delay)
    left = p.flush(240)
    acks.close()
    results[codec] = (n, left, errors)


def group_member(bs, stop):
    """A consumer-group member committing often: after each kill the broker replays
    __consumer_offsets before it registers, which is when it used to serve produces under
    the leader epochs of the metadata it replayed (and then lose those leaderships)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "idem-codecs-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": True,
                  "auto.commit.interval.ms": 100, "session.timeout.ms": 10000})
    c.subscribe([TOPIC])
    while not stop.is_set():
        c.poll(0.2)
    c.close()


def main():
    binary, port, kills = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    work = sys.argv[4] if len(sys.argv) > 4 else tempfile.mkdtemp(prefix="idem-codecs-")
    os.makedirs(work, exist_ok=True)
    bs = f"127.0.0.1:{port}"
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    broker = Broker(binary, port, data)  # logs to work/broker.log
    broker.cmd[-1] = "info"
    broker.start()
    stop = threading.Event()
    results = {}
    threads = []
    try:
        admin = AdminClient({"bootstrap.servers": bs})
        topic = NewTopic(TOPIC, PARTITIONS, 1, config={"segment.bytes": str(1 << 20)})
        admin.create_topics([topic])[TOPIC].result(30)
        del admin
        threads = [threading.Thread(target=producer, args=(bs, c, work, stop, results))
                   for c in CODECS]
        threads.append(threading.Thread(target=group_member, args=(bs, stop)))
        for t in threads:
            t.start()
        rng = random.Random(port)
        time.sleep(2)
        for k in range(kills):
            time.sleep(rng.uniform(5.0, 8.0))
            broker.kill()
            broker.start()
            print(f"kill {k + 1}/{kills} at {time.time():.3f}", flush=True)
        time.sleep(3)
        stop.set()
        for t in threads:
            t.join(300)
        records = read_all(bs, TOPIC, PARTITIONS)
    finally:
        stop.set()
        broker.stop()
    failures = []
    where = {}
    dups = {}
    for p, o, v in records:
        if v in where:
            dups.setdefault(v, [where[v]]).append((p, o))
        else:
            where[v] = (p, o)
    if dups:
        sample = sorted(dups.items(), key=lambda kv: kv[1][0])[:10]
        failures.append(f"{len(dups)} records stored more than once, e.g. {sample}")
    for codec in CODECS:
        n, left, errors = results.get(codec, (0, -1, ["no result"]))
        acked = 0
        lost = []
        with open(os.path.join(work, f"acked-{codec}.tsv")) as f:
            for line in f:
                p, o, v, _ = line.rstrip("\n").split("\t")
                acked += 1
                if o in ("None", "-1001"):
                    # Acknowledged without an offset (a retry answered as a duplicate):
                    # it must be stored, once.
                    if v not in where:
                        lost.append((v, p, o, None))
                elif where.get(v) != (int(p), int(o)):
                    lost.append((v, p, o, where.get(v)))
        print(f"{codec}: sent {n}, acknowledged {acked}, unflushed {left}, failed {len(errors)}")
        if errors or left:
            failures.append(f"{codec}: {len(errors)} sends failed, {left} unflushed, "
                            f"e.g. {errors[:3]}")
        if lost:
            failures.append(f"{codec}: {len(lost)} acknowledged records missing or moved, "
                            f"e.g. {lost[:5]}")
        if acked == 0:
            failures.append(f"{codec}: nothing acknowledged")
    order = {}
    for p, o, v in sorted(records):
        codec, n = v.rsplit("-", 1)
        order.setdefault((codec, p), []).append(int(n))
    for (codec, p), seq in order.items():
        if any(b <= a for a, b in zip(seq, seq[1:])):
            failures.append(f"{codec}: partition {p} out of send order")
    print(f"{kills} kills, {len(records)} records stored")
    if failures:
        for f in failures:
            print("FAIL:", f)
        print(f"(work dir kept: {work})")
        sys.exit(1)
    if len(sys.argv) <= 4:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
