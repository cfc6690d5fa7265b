"""Kafka's own CLI tools of issue 6 against a running broker, run by main class from the
pinned Kafka jars (confirmed with `jar tf` on 4.1.2):

- `org.apache.kafka.tools.DeleteRecordsCommand` (kafka-delete-records.sh) with an
  --offset-json-file: its report names the new low watermark, and ListOffsets earliest and an
  `auto.offset.reset=earliest` consumer start there.
- `kafka.admin.ConfigCommand` (kafka-configs.sh; still in the core jar in 4.1): --alter
  --add-config (with the [a,b] bracket syntax), --describe (with DYNAMIC_TOPIC_CONFIG
  synonyms) and --describe --all, an invalid value refused with Kafka's message,
  --delete-config; and `shardlog configs describe` reports what ConfigCommand set; and
  `--describe --entity-type brokers --entity-name <id> --all` (issue 12): every Kafka broker
  setting Shardlog serves is listed, a set one (run.sh's log.retention.check.interval.ms)
  as STATIC_BROKER_CONFIG and an untouched one as DEFAULT_CONFIG.
- Dynamic broker configs (issue 12): `--alter --entity-type brokers --entity-default
  --add-config log.cleaner.backoff.ms=1000` and `--entity-name 1 --add-config
  leader.replication.throttled.rate=...`, then `--describe` of each shows the value with
  DYNAMIC_DEFAULT_BROKER_CONFIG / DYNAMIC_BROKER_CONFIG and Kafka's synonym order; a
  read-only setting is refused with Kafka's InvalidRequestException; `--delete-config`
  returns both to what run.sh started the broker with (later checks rely on its backoff).

Bounded: every tool run and client call times out.

Usage: KAFKA_CLASSPATH=... python3 kafka_tools_check.py BOOTSTRAP SHARDLOG_BIN
Prints PASS or exits non-zero.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30
TOOL_TIMEOUT_S = 60


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok   {what}", flush=True)


def tool(main_class, *args):
    """Runs a Kafka tool; returns (exit code, stdout + stderr)."""
    cmd = ["java", "-Xmx256m", "-cp", os.environ["KAFKA_CLASSPATH"], main_class, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    return done.returncode, done.stdout + done.stderr


def configs(bs, *args):
    return tool("kafka.admin.ConfigCommand", "--bootstrap-server", bs, *args)


def check_delete_records_command(bs, admin, probe):
    topic = f"drc-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(timeout=TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bs})
    for i in range(50):
        producer.produce(topic, value=str(i).encode())
    check(producer.flush(TIMEOUT_S) == 0, f"produced 50 records to {topic}")
    spec = {"partitions": [{"topic": topic, "partition": 0, "offset": 25}], "version": 1}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(spec, f)
        f.flush()
        rc, out = tool("org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", bs,
                       "--offset-json-file", f.name)
    check(rc == 0 and f"partition: {topic}-0\tlow_watermark: 25" in out,
          f"DeleteRecordsCommand: exit {rc}, report {out.strip().splitlines()[-1:]}")
    marks = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
    check(marks == (25, 50), f"ListOffsets after DeleteRecordsCommand: {marks}")
    consumer = Consumer({"bootstrap.servers": bs, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    first, deadline = None, time.monotonic() + TIMEOUT_S
    while first is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            first = msg.offset()
    consumer.close()
    check(first == 25, f"earliest consumer starts at the new low watermark ({first})")


def check_config_command(bs, admin, shardlog):
    topic = f"cc-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(timeout=TIMEOUT_S)
    entity = ["--entity-type", "topics", "--entity-name", topic]
    rc, out = configs(bs, "--alter", *entity, "--add-config",
                      "retention.ms=86400000,cleanup.policy=[compact,delete]")
    check(rc == 0 and f"Completed updating config for topic {topic}." in out,
          f"ConfigCommand --alter --add-config: exit {rc}")
    rc, out = configs(bs, "--describe", *entity)
    check(rc == 0 and "  retention.ms=86400000 sensitive=false synonyms="
          "{DYNAMIC_TOPIC_CONFIG:retention.ms=86400000, DEFAULT_CONFIG:log.retention.hours=168}"
          in out, "ConfigCommand --describe: retention.ms override with its synonyms")
    check("cleanup.policy=compact,delete" in out, "ConfigCommand --describe: [a,b] list value")
    ours = subprocess.run([shardlog, "configs", "--bootstrap-server", bs, "describe",
                           "--topic", topic], capture_output=True, text=True, timeout=TIMEOUT_S)
    row = ["retention.ms", "86400000", "DYNAMIC_TOPIC_CONFIG", "false", "false"]
    check(ours.returncode == 0 and any(l.split() == row for l in ours.stdout.splitlines()),
          "shardlog configs describe shows what ConfigCommand set")
    rc, out = configs(bs, "--alter", *entity, "--add-config", "retention.ms=abc")
    check(rc != 0 and "InvalidConfigurationException: Invalid value abc for configuration "
          "retention.ms: Not a number of type LONG" in out,
          "ConfigCommand invalid value: Kafka's InvalidConfigurationException and reason")
    rc, out = configs(bs, "--alter", *entity, "--delete-config", "retention.ms")
    check(rc == 0, f"ConfigCommand --delete-config retention.ms: exit {rc}")
    rc, out = configs(bs, "--describe", "--all", *entity)
    check(rc == 0 and f"All configs for topic {topic} are:" in out
          and "  retention.ms=604800000 sensitive=false synonyms={DEFAULT_CONFIG:"
          "log.retention.hours=168}" in out
          and "  cleanup.policy=compact,delete sensitive=false" in out,
          "ConfigCommand --describe --all: retention.ms back to its default")


# Kafka broker settings issue 12 requires to be settable and described.
BROKER_SETTINGS = [
    "group.min.session.timeout.ms", "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms", "group.max.size", "offsets.retention.minutes",
    "offsets.topic.num.partitions", "message.max.bytes", "log.segment.bytes", "log.retention.ms",
    "log.retention.hours", "log.retention.bytes", "log.cleanup.policy", "log.roll.ms",
    "log.index.interval.bytes", "log.flush.interval.messages", "log.flush.interval.ms",
    "listeners", "advertised.listeners", "connections.max.idle.ms", "min.insync.replicas",
    "default.replication.factor", "num.partitions", "socket.request.max.bytes",
]


def check_broker_config_command(bs, admin):
    node = str(admin.describe_cluster().result(timeout=TIMEOUT_S).nodes[0].id)
    rc, out = configs(bs, "--describe", "--entity-type", "brokers", "--entity-name", node, "--all")
    check(rc == 0 and f"All configs for broker {node} are:" in out,
          f"ConfigCommand --describe --entity-type brokers --entity-name {node} --all: exit {rc}")
    listed = {line.split("=", 1)[0].strip() for line in out.splitlines() if line.startswith("  ")}
    missing = [name for name in BROKER_SETTINGS if name not in listed]
    check(not missing, f"ConfigCommand lists every Kafka broker setting (missing: {missing})")
    check("  log.retention.check.interval.ms=500 sensitive=false synonyms={STATIC_BROKER_CONFIG:"
          "log.retention.check.interval.ms=500, DEFAULT_CONFIG:"
          "log.retention.check.interval.ms=300000}" in out,
          "a setting given to serve is STATIC_BROKER_CONFIG, with its default as a synonym")
    check("  group.min.session.timeout.ms=6000 sensitive=false synonyms={DEFAULT_CONFIG:"
          "group.min.session.timeout.ms=6000}" in out,
          "an untouched setting is DEFAULT_CONFIG with Kafka's default")


def check_dynamic_broker_configs(bs, shardlog):
    node = ["--entity-type", "brokers", "--entity-name", "1"]
    default = ["--entity-type", "brokers", "--entity-default"]
    rc, out = configs(bs, "--alter", *default, "--add-config", "log.cleaner.backoff.ms=1000")
    check(rc == 0 and "Completed updating default config for brokers in the cluster." in out,
          f"ConfigCommand --alter --entity-default --add-config: exit {rc} {out.strip()[-200:]}")
    rc, out = configs(bs, "--alter", *node, "--add-config",
                      "leader.replication.throttled.rate=10485760")
    check(rc == 0 and "Completed updating config for broker 1." in out,
          f"ConfigCommand --alter --entity-name 1 --add-config: exit {rc} {out.strip()[-200:]}")
    backoff = ("  log.cleaner.backoff.ms=1000 sensitive=false synonyms="
               "{DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=1000, "
               "STATIC_BROKER_CONFIG:log.cleaner.backoff.ms=500, "
               "DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}")
    rc, out = configs(bs, "--describe", *default)
    check(rc == 0 and "Default configs for brokers in the cluster are:" in out and backoff in out
          and "leader.replication.throttled.rate" not in out,
          "ConfigCommand --describe --entity-default: the cluster default, its synonyms")
    rc, out = configs(bs, "--describe", *node)
    throttle = ("  leader.replication.throttled.rate=10485760 sensitive=false synonyms="
                "{DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=10485760, "
                "DEFAULT_CONFIG:leader.replication.throttled.rate=9223372036854775807}")
    check(rc == 0 and "Dynamic configs for broker 1 are:" in out and throttle in out
          and "log.cleaner.backoff.ms" not in out,
          "ConfigCommand --describe --entity-name 1: the per-broker config only")
    rc, out = configs(bs, "--describe", "--all", *node)
    check(rc == 0 and backoff in out and throttle in out,
          "ConfigCommand --describe --all --entity-name 1: the default in force on broker 1")
    ours = subprocess.run([shardlog, "configs", "--bootstrap-server", bs, "describe",
                           "--broker-default"], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    row = ["log.cleaner.backoff.ms", "1000", "DYNAMIC_DEFAULT_BROKER_CONFIG", "false", "false"]
    check(ours.returncode == 0 and any(l.split() == row for l in ours.stdout.splitlines()),
          "shardlog configs describe --broker-default shows what ConfigCommand set")
    rc, out = configs(bs, "--alter", *default, "--add-config", "num.partitions=3")
    check(rc != 0 and "InvalidRequestException: Cannot update these configs dynamically: "
          "Set(num.partitions)" in out, "ConfigCommand: a read-only setting is refused")
    rc, out = configs(bs, "--alter", *default, "--delete-config", "log.cleaner.backoff.ms")
    check(rc == 0, f"ConfigCommand --delete-config --entity-default: exit {rc}")
    rc, out = configs(bs, "--alter", *node, "--delete-config",
                      "leader.replication.throttled.rate")
    check(rc == 0, f"ConfigCommand --delete-config --entity-name 1: exit {rc}")
    rc, out = configs(bs, "--describe", "--all", *node)
    check(rc == 0 and "  log.cleaner.backoff.ms=500 sensitive=false synonyms="
          "{STATIC_BROKER_CONFIG:log.cleaner.backoff.ms=500, "
          "DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}" in out,
          "after --delete-config the static value is in force again")


def main(bs, shardlog):
    admin = AdminClient({"bootstrap.servers": bs})
    probe = Consumer({"bootstrap.servers": bs, "group.id": "probe", "enable.auto.commit": False})
    check_delete_records_command(bs, admin, probe)
    check_config_command(bs, admin, shardlog)
    check_broker_config_command(bs, admin)
    check_dynamic_broker_configs(bs, shardlog)
    probe.close()
    print("PASS")


if __name__ == "__main__":
    if len(sys.argv) != 3 or "KAFKA_CLASSPATH" not in os.environ:
        raise SystemExit("usage: KAFKA_CLASSPATH=... kafka_tools_check.py BOOTSTRAP SHARDLOG_BIN")
    main(sys.argv[1], sys.argv[2])
