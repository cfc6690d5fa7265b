"""Client quotas (issue 18) with Kafka's own ConfigCommand and a confluent-kafka producer.

- `kafka.admin.ConfigCommand --alter --entity-type clients --entity-name qc-slow
  --add-config producer_byte_rate=R` and `--entity-default --add-config
  consumer_byte_rate=...`, then `--describe` of each shows the value; `--delete-config`
  removes the default's.
- A confluent-kafka producer with client.id qc-slow, producing as fast as it can for a few
  seconds, sees throttling in librdkafka's statistics (`brokers.*.throttle.max > 0`) and its
  acknowledged rate stays near its quota (the shards re-split it by measured demand every
  window, so its one connection's shard soon holds nearly all of it), within 2x; a producer with
  another client id is not throttled.
- A kafka-python producer (client.id qc-slow again) reports the
  throttling in its throttle-time metrics.
- The Java producer (client.id qc-java, its own quota) reports the throttling in its
  `produce-throttle-time-avg`/`-max` metrics and is held near its share
  (`java/ThrottleCheck.java`).

Bounded: every tool run and client call times out.
Usage: KAFKA_CLASSPATH=... python3 quota_check.py BOOTSTRAP SHARDS
Prints PASS or exits non-zero.
"""
import json
import os
import subprocess
import sys
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

RATE = 200_000
TOOL_TIMEOUT_S = 60


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok   {what}", flush=True)


def configs(bs, *args):
    cmd = ["java", "-Xmx256m", "-cp", os.environ["KAFKA_CLASSPATH"], "kafka.admin.ConfigCommand",
           "--bootstrap-server", bs, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    return done.returncode, done.stdout + done.stderr


def config_command(bs):
    code, out = configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "qc-slow",
                        "--add-config", f"producer_byte_rate={RATE}")
    check(code == 0 and "Completed updating config for client qc-slow" in out, f"alter: {out!r}")
    code, out = configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "qc-java",
                        "--add-config", f"producer_byte_rate={RATE}")
    check(code == 0, f"alter qc-java: {out!r}")
    code, out = configs(bs, "--alter", "--entity-type", "clients", "--entity-default",
                        "--add-config", "consumer_byte_rate=1048576")
    check(code == 0, f"alter <default>: {out!r}")
    code, out = configs(bs, "--describe", "--entity-type", "clients", "--entity-name", "qc-slow")
    check(code == 0 and f"producer_byte_rate={RATE}" in out, f"describe qc-slow: {out!r}")
    code, out = configs(bs, "--describe", "--entity-type", "clients", "--entity-default")
    check(code == 0 and "consumer_byte_rate=1048576" in out, f"describe <default>: {out!r}")
    code, out = configs(bs, "--alter", "--entity-type", "clients", "--entity-default",
                        "--delete-config", "consumer_byte_rate")
    check(code == 0, f"delete-config: {out!r}")
    code, out = configs(bs, "--describe", "--entity-type", "clients", "--entity-default")
    check(code == 0 and "consumer_byte_rate" not in out, f"deleted from <default>: {out!r}")
    code, out = configs(bs, "--alter", "--entity-type", "clients", "--entity-name", "qc-slow",
                        "--add-config", "producer_byte_rate=abc")
    check(code != 0, f"a non-numeric rate is refused: {out.splitlines()[-1:]!r}")


def produce(bs, topic, client_id, secs):
    """Produces 1 kB records as fast as librdkafka sends them: (acked B/s, max throttle ms)."""
    throttle = [0]

    def on_stats(raw):
        for b in json.loads(raw).get("brokers", {}).values():
            throttle[0] = max(throttle[0], b.get("throttle", {}).get("max", 0))

    acked = [0]

    def on_delivery(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    p = Producer({"bootstrap.servers": bs, "client.id": client_id, "linger.ms": 5,
                  "statistics.interval.ms": 500, "stats_cb": on_stats,
                  "queue.buffering.max.kbytes": 256})
    value = b"x" * 1000
    start = time.monotonic()
    while time.monotonic() - start < secs:
        try:
            p.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.flush(30)
    elapsed = time.monotonic() - start  # queued records count: the time to send them too
    p.poll(1.0)  # a last statistics callback
    return acked[0] / elapsed, throttle[0]


def kafka_python_throttle(bs, topic, records):
    """kafka-python's report: the producer's produce-throttle-time metrics (client id
    qc-slow, so qc-slow's quota holds it). A bounded burst: `records` of 1 KB, every
    wait bounded."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    p = KafkaProducer(bootstrap_servers=bs, client_id="qc-slow", linger_ms=5,
                      max_block_ms=20000, request_timeout_ms=30000)
    try:
        for _ in range(records):
            p.send(topic, b"k" * 1000)
        p.flush(timeout=60)
    except KafkaError as e:
        print(f"     kafka-python: {e!r}", flush=True)
    m = p.metrics().get("producer-metrics", {})
    # kafka-python 3.x names them throttle-time-max/avg (2.x: produce-throttle-time-*).
    throttle_max = m.get("throttle-time-max", m.get("produce-throttle-time-max", 0))
    throttle_avg = m.get("throttle-time-avg", m.get("produce-throttle-time-avg", 0))
    p.close(timeout=10)
    return throttle_max or 0, throttle_avg or 0


def main():
    bs, shards = sys.argv[1], int(sys.argv[2])
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"qc-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    config_command(bs)
    time.sleep(0.5)
    rate, throttle = produce(bs, topic, "qc-slow", 8)
    share = RATE / shards
    print(f"     qc-slow: {rate:.0f} B/s acknowledged over 8 s (quota {RATE}, even split "
          f"{share:.0f} until the first re-split), librdkafka throttle max {throttle} ms", flush=True)
    check(throttle > 0, "librdkafka reports the broker's throttle_time_ms")
    check(share / 2 < rate < RATE * 2, f"rate {rate:.0f} B/s near the quota")
    rate, throttle = produce(bs, topic, "qc-free", 3)
    print(f"     qc-free: {rate:.0f} B/s, throttle max {throttle} ms", flush=True)
    check(throttle == 0, "a client without a quota is not throttled")
    check(rate > RATE * 2, "and is not held to the other client's rate")
    kmax, kavg = kafka_python_throttle(bs, topic, 3000)
    print(f"     qc-slow (kafka-python): throttle-time max {kmax} ms, avg {kavg:.0f} ms",
          flush=True)
    check(kmax > 0, "kafka-python reports the broker's throttle_time_ms")
    java = ["java", "-Xmx256m", "-cp", os.environ["KAFKA_CLASSPATH"],
            os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "ThrottleCheck.java"),
            bs, topic, str(RATE), str(shards)]
    done = subprocess.run(java, capture_output=True, text=True, timeout=90)
    print(done.stdout, end="", flush=True)
    check(done.returncode == 0, f"Java producer throttled: {done.stderr[-2000:]!r}")
    print("PASS")


if __name__ == "__main__":
    main()
