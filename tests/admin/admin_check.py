"""Admin APIs of issue 3 through confluent-kafka (librdkafka), against a running broker:
CreatePartitions, DescribeCluster, DescribeConfigs (topic and broker, with sources and
synonyms), InitProducerId (an idempotent producer), and the error paths a Kafka user sees
(invalid config, invalid topic name, shrinking partitions). Bounded: every call times out.

Usage: python3 admin_check.py BOOTSTRAP      Prints PASS or exits non-zero.
"""
import sys
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

TIMEOUT_S = 30


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok   {what}")


def result_of(futures):
    return {k: f.result(timeout=TIMEOUT_S) for k, f in futures.items()}


def error_of(future):
    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0]
    return None


def main(bs):
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"admin-{uuid.uuid4().hex[:8]}"
    result_of(admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})]))
    md = admin.list_topics(topic, timeout=TIMEOUT_S)
    check(len(md.topics[topic].partitions) == 2, "CreateTopics: 2 partitions")

    # CreatePartitions: grow 2 -> 5; shrinking is refused with INVALID_PARTITIONS.
    result_of(admin.create_partitions([NewPartitions(topic, 5)]))
    md = admin.list_topics(topic, timeout=TIMEOUT_S)
    check(len(md.topics[topic].partitions) == 5, "CreatePartitions: grew to 5 partitions")
    err = error_of(admin.create_partitions([NewPartitions(topic, 3)])[topic])
    check(err is not None and err.name() == "INVALID_PARTITIONS",
          f"CreatePartitions: shrinking refused ({err and err.name()})")

    # DescribeCluster: one broker, a cluster id, a controller.
    cluster = admin.describe_cluster().result(timeout=TIMEOUT_S)
    check(len(cluster.nodes) == 1 and cluster.cluster_id and cluster.controller is not None,
          f"DescribeCluster: {len(cluster.nodes)} node, cluster id {cluster.cluster_id}")

    # DescribeConfigs on the topic: the override is a dynamic topic config, the rest defaults.
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = result_of(admin.describe_configs([res]))[res]
    retention = configs["retention.ms"]
    check(retention.value == "3600000" and retention.source == 1,
          f"DescribeConfigs: retention.ms override (source {retention.source})")
    seg = configs["segment.bytes"]
    check(seg.value == "1073741824", f"DescribeConfigs: segment.bytes default {seg.value}")
    syn = [s.name for s in configs["max.message.bytes"].synonyms.values()]
    check("message.max.bytes" in syn or "max.message.bytes" in syn,
          f"DescribeConfigs: max.message.bytes synonyms {syn}")
    broker = ConfigResource(ConfigResource.Type.BROKER, str(cluster.nodes[0].id))
    bconf = result_of(admin.describe_configs([broker]))[broker]
    check("log.retention.hours" in bconf or "log.retention.ms" in bconf,
          f"DescribeConfigs: broker resource has {len(bconf)} configs")

    # Invalid configs and names: Kafka's error codes with a reason.
    bad = f"admin-bad-{uuid.uuid4().hex[:6]}"
    err = error_of(admin.create_topics([NewTopic(bad, 1, 1, config={"retention.ms": "abc"})])[bad])
    check(err is not None and err.name() == "INVALID_CONFIG",
          f"CreateTopics: bad retention.ms -> {err and err.name()}: {err and err.str()}")
    err = error_of(admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"])
    check(err is not None and err.name() == "TOPIC_EXCEPTION",
          f"CreateTopics: invalid name -> {err and err.name()}")

    # InitProducerId: an idempotent producer gets a producer id and delivers in order.
    delivered = []
    producer = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "acks": "all"})
    for i in range(200):
        producer.produce(topic, key=b"k", value=str(i).encode(),
                         on_delivery=lambda e, m: delivered.append((e, m.offset())))
    check(producer.flush(TIMEOUT_S) == 0, "idempotent producer: flushed")
    check(all(e is None for e, _ in delivered) and len(delivered) == 200,
          "InitProducerId + idempotent produce: 200 acknowledged, no errors")
    offsets = [o for _, o in delivered]
    check(offsets == sorted(offsets), "idempotent produce: offsets in send order")

    consumer = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False})
    parts = [TopicPartition(topic, p) for p in range(5)]
    total = sum(consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)[1] for tp in parts)
    check(total == 200, f"ListOffsets: {total} records across partitions")
    consumer.close()

    result_of(admin.delete_topics([topic]))
    print("PASS")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092")
