#!/usr/bin/env python3
"""Issue 43's scale scenario against any Kafka-compatible cluster, with one client for both
(confluent-kafka, i.e. librdkafka): create TOPICS topics of 3 partitions at RF 3 through the
Admin API in batches of 100, wait until every partition is led with a full ISR, time a full
Metadata request, watch leaders and ISRs over a quiet window (Metadata every 5 s), then send
one acks=all record to every partition and time until all are acknowledged. Prints one JSON
object (the figures) on stdout; progress goes to stderr.

    scale_client.py --bootstrap HOST:PORT[,..] --topics N --quiet-s S [--pids P1,P2,P3]
"""
import argparse
import json
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

PREFIX = "scale-"
PARTITIONS = 3
BATCH = 100


def log(msg):
    print(f"[scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def snapshot(admin):
    md = admin.list_topics(timeout=60)
    out = {}
    for name, t in md.topics.items():
        if not name.startswith(PREFIX):
            continue
        for p in t.partitions.values():
            out[(name, p.id)] = (p.leader, tuple(sorted(p.isrs)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--quiet-s", type=int, default=60)
    ap.add_argument("--settle-limit-s", type=int, default=900)
    ap.add_argument("--pids", default="")
    a = ap.parse_args()
    partitions = a.topics * PARTITIONS
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    res = {"topics": a.topics, "partitions": partitions}

    start = time.monotonic()
    names = [f"{PREFIX}{i:05}" for i in range(a.topics)]
    for i in range(0, len(names), BATCH):
        batch = [NewTopic(n, PARTITIONS, 3) for n in names[i:i + BATCH]]
        for attempt in range(20):
            futures = admin.create_topics(batch, request_timeout=60, operation_timeout=60)
            retry = []
            for name, f in futures.items():
                try:
                    f.result()
                except Exception as e:  # noqa: BLE001: a retried batch finds its topics
                    if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                        retry.append(name)
                        log(f"{name}: {e}")
            if not retry:
                break
            batch = [NewTopic(n, PARTITIONS, 3) for n in retry]
            time.sleep(1)
        else:
            sys.exit(f"topics never created: {batch[:3]}")
    res["create_s"] = round(time.monotonic() - start, 2)
    log(f"{a.topics} topics created in {res['create_s']} s")

    settled = None
    last = 0
    while time.monotonic() - start < res["create_s"] + a.settle_limit_s:
        s = snapshot(admin)
        full = sum(1 for v in s.values() if v[0] >= 0 and len(v[1]) == 3)
        if full == partitions:
            settled = s
            break
        if time.monotonic() - last > 10:
            log(f"{full} of {partitions} partitions led with a full ISR")
            last = time.monotonic()
        time.sleep(0.5)
    res["full_isr_s"] = round(time.monotonic() - start, 2) if settled else None
    if settled is None:
        log("never settled")
        print(json.dumps(res))
        return
    log(f"every partition led with a full ISR after {res['full_isr_s']} s")

    t = time.monotonic()
    admin.list_topics(timeout=60)
    res["metadata_ms"] = round((time.monotonic() - t) * 1000, 1)

    quiet_start = time.monotonic()
    changed = 0
    while time.monotonic() - quiet_start < a.quiet_s:
        time.sleep(5)
        now = snapshot(admin)
        differ = sum(1 for k, v in settled.items() if now.get(k) != v)
        if differ:
            log(f"{differ} partitions changed leader or ISR while idle")
        changed = max(changed, differ)
    res["quiet_s"] = a.quiet_s
    res["changed_while_idle"] = changed
    res["rss_mib"] = [rss_mib(int(p)) for p in a.pids.split(",") if p]

    acked = [0]
    failed = []

    def delivered(err, msg):
        if err is None:
            acked[0] += 1
        else:
            failed.append((msg.topic(), msg.partition(), str(err)))

    producer = Producer({
        "bootstrap.servers": a.bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000,
        "message.timeout.ms": 300_000,
        "enable.idempotence": False,
    })
    # Metadata for every topic before the clock starts (both brokers pay the same).
    producer.list_topics(timeout=60)
    t = time.monotonic()
    for (topic, part) in settled:
        producer.produce(topic, b"x", partition=part, on_delivery=delivered)
        producer.poll(0)
    producer.flush(310)
    res["one_record_each_s"] = round(time.monotonic() - t, 2)
    res["acked"] = acked[0]
    res["failed"] = len(failed)
    log(f"{acked[0]} of {partitions} acknowledged in {res['one_record_each_s']} s")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
