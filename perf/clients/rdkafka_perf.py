#!/usr/bin/env python3
"""librdkafka (confluent-kafka) as a load client for perf/run.sh: the same shapes as the
bundled generator and Kafka's ProducerPerformance, so a broker is compared with a third,
independent client.

  rdkafka_perf.py produce --bootstrap H:P --topic T --records N [--rate R] [--acks 1]
                          [--record-size 1024] --json OUT
  rdkafka_perf.py consume --bootstrap H:P --topic T --records N --json OUT [-X KEY=VALUE]...

produce: N records of --record-size bytes, keyless (librdkafka's sticky partitioner spreads
them), linger.ms=0 and idempotence off as run.sh's other producers; closed loop (as fast as
the client queue drains) unless --rate is given, then records are sent on a fixed schedule
and a record's latency runs from its intended send time to its delivery report
(coordinated omission corrected, as the bundled generator does).
consume: reads the topic from the earliest offset until N records arrived (no group
commit: assign, not subscribe), reporting records/s and MiB/s from the assignment to the
last record.

The JSON has the bundled generator's field names (records_per_s, mib_per_s, latency_us
p50/p99/p9999/max, cpu_pct_of_core, errors), so perf/report.py reads both alike. Bounded:
the run stops after --timeout-s (default 300) whatever it reached.
"""
import argparse
import json
import resource
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def _name(v):
    """`version()`/`libversion()` give (text, int) or, in some releases, the text alone."""
    return v[0] if isinstance(v, tuple) else v


CLIENT = (f"confluent-kafka {_name(confluent_kafka.version())}, "
          f"librdkafka {_name(confluent_kafka.libversion())}")


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pct(sorted_us, q):
    if not sorted_us:
        return None
    i = min(len(sorted_us) - 1, int(q * len(sorted_us)))
    return sorted_us[i]


def produce(a):
    p = Producer({
        "bootstrap.servers": a.bootstrap,
        "acks": str(a.acks),
        "linger.ms": 0,
        "enable.idempotence": False,
        "queue.buffering.max.messages": 100000,
        "queue.buffering.max.kbytes": 1048576,
    })
    payload = b"x" * a.record_size
    lat_us, errors = [], {}

    def make_cb(intended):
        def cb(err, _msg):
            if err is not None:
                errors[err.name()] = errors.get(err.name(), 0) + 1
            else:
                lat_us.append((time.monotonic() - intended) * 1e6)
        return cb

    deadline = time.monotonic() + a.timeout_s
    c0, t0 = cpu_s(), time.monotonic()
    sent = 0
    while sent < a.records and time.monotonic() < deadline:
        intended = t0 + sent / a.rate if a.rate else time.monotonic()
        if a.rate:
            now = time.monotonic()
            if now < intended:
                # Serve delivery reports while waiting for the schedule.
                p.poll(min(intended - now, 0.001))
                continue
        try:
            p.produce(a.topic, payload, on_delivery=make_cb(intended))
            sent += 1
        except BufferError:
            p.poll(0.001)
            continue
        if sent % 64 == 0:
            p.poll(0)
    left = max(0.0, deadline - time.monotonic())
    p.flush(left)
    t1 = time.monotonic()
    done = len(lat_us)
    lat_us.sort()
    secs = max(t1 - t0, 1e-9)
    return {
        "client": CLIENT,
        "records": done,
        "records_per_s": done / secs,
        "mib_per_s": done * a.record_size / secs / 2**20,
        "target_rate": a.rate or None,
        "latency_us": {"p50": pct(lat_us, 0.50), "p99": pct(lat_us, 0.99),
                       "p9999": pct(lat_us, 0.9999), "max": lat_us[-1] if lat_us else None},
        "cpu_pct_of_core": 100.0 * (cpu_s() - c0) / secs,
        "errors": errors,
    }


def extra_config(a):
    """The -X KEY=VALUE properties as a dict."""
    out = {}
    for kv in a.extra:
        k, sep, v = kv.partition("=")
        if not sep:
            sys.exit(f"-X {kv}: expected KEY=VALUE")
        out[k] = v
    return out


def consume(a):
    c = Consumer({
        "bootstrap.servers": a.bootstrap,
        "group.id": "rdkafka-perf",
        "enable.auto.commit": False,
        "fetch.max.bytes": 52428800,
        "max.partition.fetch.bytes": 1048576,
        **extra_config(a),
    })
    md = c.list_topics(a.topic, timeout=30).topics[a.topic]
    if md.error is not None:
        raise KafkaException(md.error)
    c.assign([TopicPartition(a.topic, p, -2) for p in md.partitions])  # -2: earliest
    got, nbytes, errors = 0, 0, {}
    deadline = time.monotonic() + a.timeout_s
    # From the assignment: the first fetch's wait counts, as it does for the other clients.
    t0, c0 = time.monotonic(), cpu_s()
    while got < a.records and time.monotonic() < deadline:
        # No more than are still due: consume() waits out its timeout for a short batch.
        msgs = c.consume(min(10000, a.records - got), 1.0)
        for m in msgs:
            if m.error() is not None:
                if not m.error().code() == -191:  # _PARTITION_EOF
                    errors[m.error().name()] = errors.get(m.error().name(), 0) + 1
                continue
            got += 1
            nbytes += len(m.value() or b"")
    t1 = time.monotonic()
    c.close()
    secs = max(t1 - t0, 1e-9)
    return {
        "client": CLIENT,
        "records": got,
        "records_per_s": got / secs,
        "mib_per_s": nbytes / secs / 2**20,
        "cpu_pct_of_core": 100.0 * (cpu_s() - c0) / secs,
        "errors": errors,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--acks", type=int, default=1)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--timeout-s", type=float, default=300)
    ap.add_argument("--json", required=True)
    ap.add_argument("-X", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                    help="one more librdkafka property for the client (repeatable)")
    a = ap.parse_args()
    out = produce(a) if a.mode == "produce" else consume(a)
    json.dump(out, open(a.json, "w"), indent=1)
    print(json.dumps(out))
    return 0 if out["records"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
