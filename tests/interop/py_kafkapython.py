"""kafka-python client program for the interoperability scenario.

Run by driver.py as a subprocess (see scenario.parse_client_args). ``consume``: no consumer
group, ``group_id=None``, partitions assigned directly, read from the beginning. ``create``
also checks describe_acls without an authorizer (SecurityDisabledError).
``consume-group``: ``group_id=--group``, subscribe(), auto_offset_reset=earliest, commit()
once every partition is read, then committed() must equal the end offsets.
"""

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as Errors
from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         KafkaAdminClient, NewTopic, ResourcePatternFilter, ResourceType)

import scenario as sc


def create(args) -> None:
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=30000)
    admin.create_topics([NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)])
    check_acls_without_authorizer(admin)
    admin.close()
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=None)
    deadline = time.monotonic() + args.timeout_s
    while True:
        parts = consumer.partitions_for_topic(args.topic)
        if parts is not None and len(parts) == args.partitions:
            print(f"metadata: {len(parts)} partitions")
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"metadata shows partitions {parts}, expected {args.partitions}")
        time.sleep(0.2)
        consumer._client.cluster.request_update()
    consumer.close()


def check_acls_without_authorizer(admin) -> None:
    """Without an authorizer, describe_acls raises SecurityDisabledError (error 54) as against
    Kafka, and the admin client's connection stays usable (issue 32: it was closed)."""
    everything = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                  ACLResourcePatternType.ANY))
    try:
        admin.describe_acls(everything)
        raise SystemExit("describe_acls: expected SecurityDisabledError, got an answer")
    except Errors.SecurityDisabledError as e:
        print(f"describe_acls: {e}")
    admin.list_topics()


def produce(args) -> None:
    codec = None if args.compression == "none" else args.compression
    producer = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", linger_ms=5,
                             compression_type=codec)
    futures = [
        producer.send(args.topic, value=r.value, key=r.key, headers=r.headers,
                      partition=r.partition, timestamp_ms=r.timestamp_ms)
        for r in sc.read_records(args.input)
    ]
    producer.flush(timeout=args.timeout_s)
    errors = []
    for f in futures:
        try:
            f.get(timeout=1)
        except Exception as e:  # noqa: BLE001 - report every failed send, whatever the type
            errors.append(repr(e))
    producer.close()
    if errors:
        raise SystemExit(f"{len(errors)} sends failed: {errors[:5]}")


def consume(args) -> None:
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    out = []
    deadline = time.monotonic() + args.timeout_s
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out at positions {[consumer.position(tp) for tp in tps]}, ends {ends}")
        for tp, msgs in consumer.poll(timeout_ms=1000).items():
            for m in msgs:
                tstype = {0: "create", 1: "append"}.get(m.timestamp_type, "none")
                out.append(sc.Consumed(m.partition, m.offset, m.timestamp, tstype, m.key, m.value,
                                       list(m.headers or [])))
    consumer.close()
    sc.write_consumed(args.output, out)


def record(m) -> sc.Consumed:
    tstype = {0: "create", 1: "append"}.get(m.timestamp_type, "none")
    return sc.Consumed(m.partition, m.offset, m.timestamp, tstype, m.key, m.value, list(m.headers or []))


def consume_group(args) -> None:
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    ends = consumer.end_offsets(tps)
    consumer.subscribe([args.topic])
    out, next_offset = [], {tp: 0 for tp in tps}
    deadline = time.monotonic() + args.timeout_s
    while any(next_offset[tp] < ends[tp] for tp in tps):
        if time.monotonic() > deadline:
            consumer.close()
            raise SystemExit(f"timed out at {next_offset}, ends {ends}")
        for tp, msgs in consumer.poll(timeout_ms=1000).items():
            for m in msgs:
                out.append(record(m))
                next_offset[tp] = m.offset + 1
    sc.write_consumed(args.output, out)
    consumer.commit()
    committed = {tp.partition: consumer.committed(tp) for tp in tps}
    consumer.close()
    sc.exit_unless_committed({tp.partition: end for tp, end in ends.items()}, committed)


def offsets(args) -> None:
    queries = sc.read_queries(args.input)
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=None)
    answers = []
    # One query per partition per call: a dict keyed by partition holds one timestamp.
    for p, ts in queries:
        tp = TopicPartition(args.topic, p)
        res = consumer.offsets_for_times({tp: ts})[tp]
        answers.append((p, ts, -1 if res is None else res.offset))
    consumer.close()
    sc.write_answers(args.output, answers)


if __name__ == "__main__":
    a = sc.parse_client_args()
    {"create": create, "produce": produce, "consume": consume, "consume-group": consume_group,
     "offsets": offsets}[a.step](a)
    sys.exit(0)
