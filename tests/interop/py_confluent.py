"""confluent-kafka (librdkafka) client program for the interoperability scenario.

Run by driver.py as a subprocess: ``python3 py_confluent.py STEP --bootstrap ... --topic ...``
(see scenario.parse_client_args). ``consume``: no consumer group, partitions are assign()ed
from OFFSET_BEGINNING with auto commit off (confluent-kafka refuses a consumer without
group.id, so a placeholder id is set; nothing subscribes or commits with it).
``consume-group``: subscribe() with ``--group``, auto.offset.reset=earliest, a synchronous
commit() once every partition is read, then committed() must equal the end offsets.
"""

import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import scenario as sc


def create(args) -> None:
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    fut = admin.create_topics([NewTopic(args.topic, args.partitions, 1)], operation_timeout=30)
    fut[args.topic].result(timeout=args.timeout_s)
    deadline = time.monotonic() + args.timeout_s
    while True:
        md = admin.list_topics(topic=args.topic, timeout=10).topics.get(args.topic)
        ready = md is not None and md.error is None and len(md.partitions) == args.partitions
        if ready and all(p.leader >= 0 for p in md.partitions.values()):
            print(f"metadata: {len(md.partitions)} partitions with leaders")
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"metadata never showed {args.partitions} partitions with leaders: {md}")
        time.sleep(0.2)


def produce(args) -> None:
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"p{msg.partition()}: {err}")

    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 5,
                         "compression.codec": args.compression})
    for r in sc.read_records(args.input):
        while True:
            try:
                producer.produce(
                    args.topic, value=r.value, key=r.key, partition=r.partition,
                    timestamp=r.timestamp_ms, headers=r.headers, on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(args.timeout_s)
    if left or errors:
        raise SystemExit(f"{left} undelivered, {len(errors)} errors: {errors[:5]}")


TSTYPES = {0: "none", 1: "create", 2: "append"}


def consume(args) -> None:
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": "interop-assign-only",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "enable.partition.eof": True,
    })
    ends = {}
    for p in range(args.partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=10)
        ends[p] = high
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(args.partitions)])
    out, pending = [], {p for p, high in ends.items() if high > 0}
    deadline = time.monotonic() + args.timeout_s
    while pending and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                if msg.offset() >= ends[msg.partition()]:
                    pending.discard(msg.partition())
                continue
            raise KafkaException(msg.error())
        tstype, ts = msg.timestamp()
        out.append(sc.Consumed(msg.partition(), msg.offset(), ts, TSTYPES.get(tstype, "?"),
                               msg.key(), msg.value(), list(msg.headers() or [])))
        if msg.offset() + 1 >= ends[msg.partition()]:
            pending.discard(msg.partition())
    consumer.close()
    sc.write_consumed(args.output, out)
    if pending:
        raise SystemExit(f"timed out; partitions not read to their end {sorted(pending)} (ends {ends})")


def consume_group(args) -> None:
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    consumer.subscribe([args.topic])
    out, next_offset = [], {p: 0 for p in ends}
    deadline = time.monotonic() + args.timeout_s
    while any(next_offset[p] < ends[p] for p in ends):
        if time.monotonic() > deadline:
            consumer.close()
            raise SystemExit(f"timed out at {next_offset}, ends {ends}")
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        tstype, ts = msg.timestamp()
        out.append(sc.Consumed(msg.partition(), msg.offset(), ts, TSTYPES.get(tstype, "?"),
                               msg.key(), msg.value(), list(msg.headers() or [])))
        next_offset[msg.partition()] = msg.offset() + 1
    sc.write_consumed(args.output, out)
    # The client's own commit of its consumed positions, then its committed() view.
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=args.timeout_s)}
    consumer.close()
    sc.exit_unless_committed(ends, committed)


def offsets(args) -> None:
    queries = sc.read_queries(args.input)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "interop-assign-only",
                         "enable.auto.commit": False})
    answers = []
    # A partition may appear once per call, so one call per query timestamp.
    for ts in sorted({ts for _, ts in queries}):
        parts = [p for p, t in queries if t == ts]
        res = consumer.offsets_for_times([TopicPartition(args.topic, p, ts) for p in parts],
                                         timeout=args.timeout_s)
        for tp in res:
            if tp.error:
                raise SystemExit(f"p{tp.partition} ts={ts}: {tp.error}")
            answers.append((tp.partition, ts, tp.offset if tp.offset >= 0 else -1))
    consumer.close()
    sc.write_answers(args.output, answers)


if __name__ == "__main__":
    a = sc.parse_client_args()
    {"create": create, "produce": produce, "consume": consume, "consume-group": consume_group,
     "offsets": offsets}[a.step](a)
    sys.exit(0)
