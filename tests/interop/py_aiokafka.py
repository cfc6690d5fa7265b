"""aiokafka client program for the interoperability scenario (asyncio; aiokafka carries its own
protocol code, not kafka-python's).

Run by driver.py as a subprocess (see scenario.parse_client_args). ``create``:
AIOKafkaAdminClient.create_topics, then describe_topics until every partition has a leader.
``produce``: explicit partitions and timestamps, acks=all (aiokafka's producer is not
idempotent by default and is left so). ``consume``: no consumer group, ``group_id=None``,
partitions assigned directly, read from the beginning. ``consume-group``: ``group_id=--group``,
subscribe(), auto_offset_reset=earliest, commit() once every partition is read, then
committed() must equal the end offsets. ``offsets``: offsets_for_times, one call per query
timestamp for every partition.
"""

import asyncio
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

import scenario as sc


async def create(args) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=30000)
    await admin.start()
    try:
        res = await admin.create_topics([NewTopic(args.topic, num_partitions=args.partitions,
                                                  replication_factor=1)])
        errors = [t for t in res.to_object()["topic_errors"] if t["error_code"] != 0]
        if errors:
            raise SystemExit(f"CreateTopics: {errors}")
        deadline = asyncio.get_running_loop().time() + args.timeout_s
        while True:
            topics = await admin.describe_topics([args.topic])
            parts = topics[0]["partitions"] if topics and topics[0]["error_code"] == 0 else []
            leaders = [p for p in parts if p["error_code"] == 0 and p["leader"] >= 0]
            if len(parts) == args.partitions and len(leaders) == args.partitions:
                print(f"describe_topics: {len(parts)} partitions with leaders")
                return
            if asyncio.get_running_loop().time() > deadline:
                raise SystemExit(f"describe_topics shows {topics}")
            await asyncio.sleep(0.2)
    finally:
        await admin.close()


async def produce(args) -> None:
    codec = None if args.compression == "none" else args.compression
    producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap, acks="all", linger_ms=5,
                                compression_type=codec)
    await producer.start()
    try:
        # send() returns once the record is in the accumulator; its future resolves on ack.
        futures = [
            await producer.send(args.topic, value=r.value, key=r.key, partition=r.partition,
                                timestamp_ms=r.timestamp_ms, headers=r.headers)
            for r in sc.read_records(args.input)
        ]
        await producer.flush()
        results = await asyncio.gather(*futures, return_exceptions=True)
    finally:
        await producer.stop()
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    if errors:
        raise SystemExit(f"{len(errors)} sends failed: {errors[:5]}")


def record(m) -> sc.Consumed:
    tstype = {0: "create", 1: "append"}.get(m.timestamp_type, "none")
    return sc.Consumed(m.partition, m.offset, m.timestamp, tstype, m.key, m.value, list(m.headers or []))


async def read_to_end(consumer, ends: dict, args) -> list[sc.Consumed]:
    """getmany() until every partition's next offset reaches its end offset."""
    out, next_offset = [], {tp: 0 for tp in ends}
    deadline = asyncio.get_running_loop().time() + args.timeout_s
    while any(next_offset[tp] < ends[tp] for tp in ends):
        if asyncio.get_running_loop().time() > deadline:
            raise SystemExit(f"timed out at {next_offset}, ends {ends}")
        for tp, msgs in (await consumer.getmany(timeout_ms=1000)).items():
            for m in msgs:
                out.append(record(m))
                next_offset[tp] = m.offset + 1
    return out


async def consume(args) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        out = await read_to_end(consumer, ends, args)
    finally:
        await consumer.stop()
    sc.write_consumed(args.output, out)


async def consume_group(args) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
        ends = await consumer.end_offsets(tps)
        consumer.subscribe([args.topic])
        out = await read_to_end(consumer, ends, args)
        sc.write_consumed(args.output, out)
        await consumer.commit()
        committed = {tp.partition: await consumer.committed(tp) for tp in tps}
    finally:
        await consumer.stop()  # leaves the group
    sc.exit_unless_committed({tp.partition: end for tp, end in ends.items()}, committed)


async def offsets(args) -> None:
    queries = sc.read_queries(args.input)
    by_ts: dict[int, list[int]] = {}
    for p, ts in queries:
        by_ts.setdefault(ts, []).append(p)
    consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, group_id=None)
    await consumer.start()
    found = {}
    try:
        # One call per timestamp: the dict is keyed by partition.
        for ts, parts in by_ts.items():
            res = await consumer.offsets_for_times({TopicPartition(args.topic, p): ts for p in parts})
            for tp, ot in res.items():
                found[(tp.partition, ts)] = -1 if ot is None else ot.offset
    finally:
        await consumer.stop()
    sc.write_answers(args.output, [(p, ts, found[(p, ts)]) for p, ts in queries])


if __name__ == "__main__":
    a = sc.parse_client_args()
    step = {"create": create, "produce": produce, "consume": consume, "consume-group": consume_group,
            "offsets": offsets}[a.step]
    asyncio.run(step(a))
    sys.exit(0)
