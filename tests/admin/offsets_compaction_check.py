"""`__consumer_offsets` is compacted by the log cleaner, through confluent-kafka against a
running broker started with `--log-cleaner-backoff-ms 500`: the internal topic's configs are
altered like any topic's (16 KiB segments, dirty ratio 0.01), one group commits the same
partition's offset 1,500 times, and the cleaner must shrink the group's offsets partition
to a few records while the group's committed offset stays the last one committed.

Usage: python3 offsets_compaction_check.py BOOTSTRAP DATA_DIR     Prints PASS or exits non-zero.
"""
import glob
import os
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, NewTopic)

TIMEOUT_S = 30
COMMITS = 1500
CLEAN_DEADLINE_S = 60


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok   {what}")


def offsets_bytes(data_dir):
    """Bytes of every `.log` of every `__consumer_offsets` partition."""
    return sum(os.path.getsize(p) for p in glob.glob(f"{data_dir}/__consumer_offsets-*/*.log"))


def main(bs, data_dir):
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"oc-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=TIMEOUT_S)
    p = Producer({"bootstrap.servers": bs})
    for i in range(COMMITS + 1):
        p.produce(topic, value=b"x", key=str(i).encode())
    p.flush(TIMEOUT_S)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    # Creates __consumer_offsets if this is the first group.
    c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
    res = ConfigResource("topic", "__consumer_offsets", incremental_configs=[
        ConfigEntry("internal.segment.bytes", "16384",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.cleanable.dirty.ratio", "0.01",
                    incremental_operation=AlterConfigOpType.SET),
    ])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=TIMEOUT_S)
    check(True, "IncrementalAlterConfigs on __consumer_offsets accepted")
    def end_offsets():
        return sum(c.get_watermark_offsets(TopicPartition("__consumer_offsets", p),
                                           timeout=TIMEOUT_S)[1] for p in range(50))

    before, ends_before = offsets_bytes(data_dir), end_offsets()
    for i in range(1, COMMITS + 1):
        c.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=False)
    written = end_offsets() - ends_before
    check(written >= COMMITS, f"{COMMITS} commits appended {written} offset records")
    # Uncompacted, every commit keeps at least its 61-byte batch header on disk.
    limit = COMMITS * 61 // 4
    deadline = time.monotonic() + CLEAN_DEADLINE_S
    while time.monotonic() < deadline and offsets_bytes(data_dir) - before >= limit:
        time.sleep(0.5)
    kept = offsets_bytes(data_dir) - before
    check(kept < limit, f"the cleaner compacted __consumer_offsets: {kept} bytes kept (< {limit})")
    committed = c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)[0].offset
    check(committed == COMMITS, f"committed offset is still the last one ({committed})")
    c.close()
    # A new member of the group starts from the committed offset.
    c2 = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                   "auto.offset.reset": "error"})
    c2.assign([TopicPartition(topic, 0)])
    m = c2.poll(TIMEOUT_S)
    check(m is not None and not m.error() and m.offset() == COMMITS,
          f"a new consumer resumes at offset {COMMITS}")
    c2.close()
    print("PASS")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
