"""Issue 32: a producer quota holds whatever the client's pipelining.

`kafka.admin.ConfigCommand --entity-type clients --entity-name greedy --add-config
producer_byte_rate=1048576`, then a confluent-kafka producer with client.id greedy and
librdkafka's defaults plus acks=1, linger.ms=5, queue.buffering.max.kbytes=4096 (many
requests in flight on its connection) produces 1 KiB values as fast as it can to a
4-partition topic. The bytes acknowledged between the end of the warm-up and the end of the
measurement, over that span, must be within +-10 % of the quota. Then the Java producer
with its defaults (Kafka's `org.apache.kafka.tools.ProducerPerformance --throughput -1
--producer-props client.id=greedy`, 1 KiB records): its 5 s interval reports after the first
one must average within +-10 % of the quota. QUOTA_PIPELINING_ONLY=fetch runs instead a
confluent-kafka consumer (librdkafka's defaults, client.id greedy, consumer_byte_rate
1 MiB/s) over a topic filled beforehand, with the same bound. Before issue 32's fix confluent-kafka got
1.5-2.1x the quota (the broker read and recorded the pipelined requests queued behind a
throttled one before the mute took effect).

Bounded: the producer runs WARMUP_S + MEASURE_S, then flushes for at most 30 s; the Java run
is killed after JAVA_TIMEOUT_S; every tool run times out.
Usage: KAFKA_CLASSPATH=... python3 pipelining.py BOOTSTRAP [TOPIC]
Prints the rate and PASS, or exits non-zero.
"""
import os
import re
import subprocess
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

QUOTA = 1_048_576
CLIENT = "greedy"
# QUOTA_WARMUP_S / QUOTA_MEASURE_S change them (e.g. for a broker with Kafka's 11 samples).
WARMUP_S = int(os.environ.get("QUOTA_WARMUP_S", "4"))
MEASURE_S = int(os.environ.get("QUOTA_MEASURE_S", "20"))
TOLERANCE = 0.10
JAVA_INTERVAL_S = 5  # ProducerPerformance's reporting interval
JAVA_INTERVALS = 5  # one of warm-up, four measured
JAVA_TIMEOUT_S = 60


def config_command(bs, key="producer_byte_rate"):
    cmd = ["java", "-Xmx256m", "-cp", os.environ["KAFKA_CLASSPATH"], "kafka.admin.ConfigCommand",
           "--bootstrap-server", bs, "--alter", "--entity-type", "clients", "--entity-name",
           CLIENT, "--add-config", f"{key}={QUOTA}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"FAIL: ConfigCommand: {done.stdout}{done.stderr}")


def topic_of(bs, topic):
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 4, 1)]).values():
        f.result(30)
    return topic


def produce(bs, topic):
    """Acknowledged bytes/s between WARMUP_S and WARMUP_S + MEASURE_S after the start."""
    acked = []  # (monotonic time of the delivery report, bytes)

    def on_delivery(err, msg):
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    p = Producer({"bootstrap.servers": bs, "client.id": CLIENT, "acks": 1, "linger.ms": 5,
                  "queue.buffering.max.kbytes": 4096})
    value = b"x" * 1024
    start = time.monotonic()
    end = start + WARMUP_S + MEASURE_S
    while time.monotonic() < end:
        try:
            p.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.purge(in_queue=True, in_flight=False)  # what is still queued is not part of the test
    p.flush(30)
    lo, hi = start + WARMUP_S, end
    inside = sum(n for t, n in acked if lo <= t < hi)
    return inside / (hi - lo), sum(n for _, n in acked)


def java_perf(bs, topic):
    """The Java producer's rate: the mean of ProducerPerformance's interval reports (records
    of 1 KiB acknowledged per second) after the first; stops after JAVA_INTERVALS of them."""
    records = QUOTA // 1024 * JAVA_INTERVAL_S * (JAVA_INTERVALS + 2)  # outlasts the intervals
    cmd = ["java", "-Xmx256m", "-cp", os.environ["KAFKA_CLASSPATH"],
           "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records",
           str(records), "--record-size", "1024", "--throughput", "-1", "--producer-props",
           f"bootstrap.servers={bs}", f"client.id={CLIENT}"]
    rates = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    timer = threading.Timer(JAVA_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            # "N records sent, R records/sec (M MB/sec), ..." every 5 s.
            m = re.match(r"\d+ records sent, ([\d.]+) records/sec", line)
            if m:
                rates.append(float(m.group(1)) * 1024)
                if len(rates) == JAVA_INTERVALS:
                    break
    finally:
        timer.cancel()
        proc.kill()
        proc.wait(10)
    if len(rates) < 3:
        raise SystemExit(f"FAIL: ProducerPerformance reported {len(rates)} intervals")
    measured = rates[1:]
    return sum(measured) / len(measured), len(measured) * JAVA_INTERVAL_S


def fill(bs, topic, nbytes):
    """Produces `nbytes` of 1 KiB values to `topic` with an unthrottled client id."""
    p = Producer({"bootstrap.servers": bs, "client.id": "filler", "linger.ms": 20})
    value = b"y" * 1024
    for _ in range(nbytes // 1024):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(60) != 0:
        raise SystemExit("FAIL: the fill did not complete")


def consume(bs, topic):
    """A confluent-kafka consumer with librdkafka's defaults (it prefetches up to
    queued.max.messages.kbytes) and client.id greedy: bytes received/s between WARMUP_S and
    WARMUP_S + MEASURE_S after its first record."""
    c = Consumer({"bootstrap.servers": bs, "client.id": CLIENT, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, start, deadline = 0, None, time.monotonic() + WARMUP_S + MEASURE_S + 30
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.1)
            if msg is None or msg.error():
                continue
            now = time.monotonic()
            if start is None:
                start = now
            if now >= start + WARMUP_S + MEASURE_S:
                break
            if now >= start + WARMUP_S:
                got += len(msg.value())
    finally:
        c.close()
    if start is None:
        raise SystemExit("FAIL: the consumer received nothing")
    return got / MEASURE_S


def check_rate(who, rate, span_s):
    ratio = rate / QUOTA
    print(f"     {who}: {rate:.0f} B/s acknowledged over {span_s} s after the warm-up = "
          f"{ratio:.3f} of the quota", flush=True)
    if abs(ratio - 1.0) > TOLERANCE:
        raise SystemExit(f"FAIL: {who} at {ratio:.3f} of the quota, outside +-{TOLERANCE:.0%}")


def main():
    bs = sys.argv[1]
    topic = sys.argv[2] if len(sys.argv) > 2 else f"greedy-{uuid.uuid4().hex[:8]}"
    topic_of(bs, topic)
    config_command(bs)
    time.sleep(1.0)  # the quota reaches every shard's image
    # One case only: "librdkafka", "java", or "fetch" (a consumer_byte_rate case, run only
    # when asked for).
    only = os.environ.get("QUOTA_PIPELINING_ONLY", "")
    if only in ("", "librdkafka"):
        rate, _ = produce(bs, topic)
        check_rate("confluent-kafka (librdkafka defaults, acks=1, linger.ms=5)", rate, MEASURE_S)
    if only in ("", "java"):
        rate, span_s = java_perf(bs, topic)
        check_rate("Java producer (ProducerPerformance, defaults)", rate, span_s)
    # Not in CI: 0.65 of the quota (too strict; Kafka 4.1.2: 0.52), see
    # perf/results/2026-12-07-quota-pipelining.md.
    if only == "fetch":
        fetched = topic_of(bs, f"{topic}-fetch")
        fill(bs, fetched, QUOTA * (WARMUP_S + MEASURE_S + 14))
        config_command(bs, "consumer_byte_rate")
        time.sleep(1.0)
        check_rate("confluent-kafka consumer (librdkafka defaults)", consume(bs, fetched),
                   MEASURE_S)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
