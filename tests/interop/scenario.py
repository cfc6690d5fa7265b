"""The interoperability scenario shared by every client: data set, file formats, checks.

Every client adapter produces the same deterministic data set into its own topic, consumes it
back and answers ListOffsets-by-timestamp queries. The adapters talk to this module through
three plain-text files so that non-Python clients (Java, kcat, Kafka's CLI tools) take part on
equal terms:

* records file (produce input), one record per line, tab-separated:
  ``idx  partition  timestamp_ms  key_b64  value_b64  headers``
  where partition / timestamp are -1 when the client cannot set them, and headers is a
  comma-separated list of ``name_b64:value_b64`` (base64 has neither ':' nor ',').
* consumed file (consume output): ``partition  offset  timestamp_ms  tstype  key_b64
  value_b64  headers``; tstype is ``create``, ``append`` or ``none``; a null key or value is
  written as ``~``.
* offsets query / answer files: ``partition  timestamp_ms`` / ``partition  timestamp_ms
  offset`` (offset -1 when no record has a timestamp at or after the query).

Checks are independent of any client library: a client reading back its own bytes through a
symmetric bug would pass a self-check, so expectations come from the data set, not the client.
"""

from __future__ import annotations

import base64
import dataclasses
from collections import defaultdict

NULL_MARK = "~"
RECORD_SPACING_MS = 10


@dataclasses.dataclass
class Record:
    """One record as a client is asked to produce it (partition/timestamp None = client's own)."""

    idx: int
    partition: int | None
    timestamp_ms: int | None
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclasses.dataclass
class Consumed:
    partition: int
    offset: int
    timestamp_ms: int
    tstype: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes | None:
    return None if text == NULL_MARK else base64.b64decode(text)


def encode_headers(headers: list[tuple[str, bytes]]) -> str:
    return ",".join(f"{b64(k.encode())}:{b64(v)}" for k, v in headers)


def decode_headers(text: str) -> list[tuple[str, bytes]]:
    if not text:
        return []
    out = []
    for item in text.split(","):
        k, v = item.split(":", 1)
        out.append((base64.b64decode(k).decode(), base64.b64decode(v)))
    return out


def make_dataset(
    client: str,
    count: int,
    partitions: int,
    base_ts_ms: int,
    explicit_partition: bool = True,
    explicit_timestamp: bool = True,
) -> list[Record]:
    """Keyed records spread round-robin over partitions, values of varying length (8–120
    bytes, text-safe so line-based tools can carry them), two headers each and explicit
    timestamps spaced RECORD_SPACING_MS apart (None where the client cannot set them)."""
    records = []
    for i in range(count):
        value = f"value-{i:05d}-".encode() + bytes(ord("a") + (i * 7 + j) % 26 for j in range(i % 109))
        records.append(
            Record(
                idx=i,
                partition=(i % partitions) if explicit_partition else None,
                timestamp_ms=(base_ts_ms + i * RECORD_SPACING_MS) if explicit_timestamp else None,
                key=f"key-{i:05d}".encode(),
                value=value,
                headers=[("idx", str(i).encode()), ("src", client.encode())],
            )
        )
    return records


def write_records(path: str, records: list[Record]) -> None:
    with open(path, "w", encoding="ascii") as f:
        for r in records:
            part = -1 if r.partition is None else r.partition
            ts = -1 if r.timestamp_ms is None else r.timestamp_ms
            f.write(f"{r.idx}\t{part}\t{ts}\t{b64(r.key)}\t{b64(r.value)}\t{encode_headers(r.headers)}\n")


def read_records(path: str) -> list[Record]:
    out = []
    with open(path, encoding="ascii") as f:
        for line in f:
            idx, part, ts, key, value, headers = line.rstrip("\n").split("\t")
            out.append(
                Record(
                    idx=int(idx),
                    partition=None if int(part) < 0 else int(part),
                    timestamp_ms=None if int(ts) < 0 else int(ts),
                    key=base64.b64decode(key),
                    value=base64.b64decode(value),
                    headers=decode_headers(headers),
                )
            )
    return out


def format_consumed(c: Consumed) -> str:
    key = NULL_MARK if c.key is None else b64(c.key)
    value = NULL_MARK if c.value is None else b64(c.value)
    return (
        f"{c.partition}\t{c.offset}\t{c.timestamp_ms}\t{c.tstype}\t{key}\t{value}\t"
        f"{encode_headers(c.headers)}\n"
    )


def write_consumed(path: str, consumed: list[Consumed]) -> None:
    with open(path, "w", encoding="ascii") as f:
        for c in consumed:
            f.write(format_consumed(c))


def read_consumed(path: str) -> list[Consumed]:
    out = []
    with open(path, encoding="ascii") as f:
        for line in f:
            p, o, ts, tstype, key, value, headers = line.rstrip("\n").split("\t")
            out.append(
                Consumed(int(p), int(o), int(ts), tstype, unb64(key), unb64(value), decode_headers(headers))
            )
    return out


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (32-bit signed result), used by the Java default partitioner."""
    seed, m, r = 0x9747B28C, 0x5BD1E995, 24
    length = len(data)
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_default_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclasses.dataclass
class Expectations:
    """How a client's produce step is to be judged."""

    partitions: int
    # Where a record must land when the client does not choose it explicitly:
    # "explicit" (Record.partition), "murmur2" (Java default partitioner).
    partitioning: str = "explicit"
    # Headers the client attaches instead of the data set's own (kcat: one set per call).
    headers_override: dict[int, list[tuple[str, bytes]]] | None = None
    # Wall-clock window for producer-assigned CreateTime timestamps.
    produce_window_ms: tuple[int, int] | None = None
    # False for clients that do not expose the timestamp type (kafkajs).
    timestamp_type_known: bool = True


def verify(records: list[Record], consumed: list[Consumed], exp: Expectations) -> list[str]:
    """Every problem found (empty = pass): count, uniqueness, partition, per-partition order and
    offsets, key, value, headers, timestamp and its type."""
    problems: list[str] = []
    by_key = {r.key: r for r in records}
    if len(consumed) != len(records):
        problems.append(f"consumed {len(consumed)} records, produced {len(records)}")
    seen: set[bytes] = set()
    per_part: dict[int, list[Consumed]] = defaultdict(list)
    for c in consumed:
        per_part[c.partition].append(c)
        rec = by_key.get(c.key or b"")
        where = f"p{c.partition}@{c.offset}"
        if rec is None:
            problems.append(f"{where}: unknown key {c.key!r}")
            continue
        if c.key in seen:
            problems.append(f"{where}: duplicate key {c.key!r}")
        seen.add(c.key)
        problems.extend(f"{where}: {p}" for p in check_record(rec, c, exp))
    missing = len(records) - len(seen)
    if missing > 0:
        problems.append(f"{missing} produced records never consumed")
    for part, items in sorted(per_part.items()):
        problems.extend(check_partition_order(part, items, by_key))
    bad_parts = set(per_part) - set(range(exp.partitions))
    if bad_parts:
        problems.append(f"records in nonexistent partitions {sorted(bad_parts)}")
    return problems


def check_record(rec: Record, c: Consumed, exp: Expectations) -> list[str]:
    out = []
    want_part = rec.partition
    if exp.partitioning == "murmur2":
        want_part = java_default_partition(rec.key, exp.partitions)
    if want_part is not None and c.partition != want_part:
        out.append(f"key {rec.key!r} in partition {c.partition}, expected {want_part}")
    if c.value != rec.value:
        out.append(f"value mismatch for {rec.key!r}: {c.value!r:.60} != {rec.value!r:.60}")
    want_headers = rec.headers
    if exp.headers_override is not None:
        want_headers = exp.headers_override.get(c.partition, [])
    if sorted(c.headers) != sorted(want_headers):
        out.append(f"headers {c.headers} != {want_headers}")
    if exp.timestamp_type_known and c.tstype != "create":
        out.append(f"timestamp type {c.tstype}, expected create")
    if rec.timestamp_ms is not None:
        if c.timestamp_ms != rec.timestamp_ms:
            out.append(f"timestamp {c.timestamp_ms} != {rec.timestamp_ms}")
    elif exp.produce_window_ms is not None:
        lo, hi = exp.produce_window_ms
        if not lo <= c.timestamp_ms <= hi:
            out.append(f"timestamp {c.timestamp_ms} outside produce window [{lo}, {hi}]")
    return out


def check_partition_order(part: int, items: list[Consumed], by_key: dict[bytes, Record]) -> list[str]:
    """Offsets 0..n-1 in consumption order, and the data set's order kept within the partition."""
    out = []
    offsets = [c.offset for c in items]
    if offsets != list(range(len(items))):
        first_bad = next((i for i, o in enumerate(offsets) if o != i), len(offsets))
        out.append(
            f"partition {part}: offsets not 0..{len(items) - 1} in order "
            f"(position {first_bad} has {offsets[first_bad] if first_bad < len(offsets) else '?'})"
        )
    idxs = [by_key[c.key].idx for c in items if c.key in by_key]
    if any(a >= b for a, b in zip(idxs, idxs[1:])):
        out.append(f"partition {part}: records out of produce order")
    return out


def query_timestamps(consumed: list[Consumed]) -> list[int]:
    """Timestamps for ListOffsets by timestamp, the same for every partition so that tools
    taking one timestamp for several partitions (GetOffsetShell, kcat -Q) need one call each:
    the exact timestamp of the middle record (an exact hit in its partition, a point between
    records in the others), one just after it, one before everything, one after everything."""
    if not consumed:
        return []
    stamps = sorted(c.timestamp_ms for c in consumed)
    mid = stamps[len(stamps) // 2]
    return [mid, mid + 1, stamps[0] - 1000, stamps[-1] + 1000]


def offset_queries(consumed: list[Consumed], partitions: int) -> list[tuple[int, int, int]]:
    """(partition, timestamp, expected offset) for every partition and query timestamp. Kafka
    answers the earliest offset whose timestamp is >= the query, or none (-1 here)."""
    per_part: dict[int, list[Consumed]] = defaultdict(list)
    for c in consumed:
        per_part[c.partition].append(c)
    queries = []
    for ts in query_timestamps(consumed):
        for part in range(partitions):
            items = sorted(per_part.get(part, []), key=lambda c: c.offset)
            want = next((c.offset for c in items if c.timestamp_ms >= ts), -1)
            queries.append((part, ts, want))
    return queries


def write_queries(path: str, queries: list[tuple[int, int, int]]) -> None:
    with open(path, "w", encoding="ascii") as f:
        for part, ts, _ in queries:
            f.write(f"{part}\t{ts}\n")


def read_queries(path: str) -> list[tuple[int, int]]:
    with open(path, encoding="ascii") as f:
        return [tuple(int(x) for x in line.split("\t")) for line in f if line.strip()]  # type: ignore[misc]


def write_answers(path: str, answers: list[tuple[int, int, int]]) -> None:
    with open(path, "w", encoding="ascii") as f:
        for part, ts, off in answers:
            f.write(f"{part}\t{ts}\t{off}\n")


def check_answers(queries: list[tuple[int, int, int]], answers: list[tuple[int, int, int]]) -> list[str]:
    got = {(p, ts): off for p, ts, off in answers}
    out = []
    for part, ts, want in queries:
        have = got.get((part, ts))
        if have is None:
            out.append(f"p{part} ts={ts}: no answer (expected {want})")
        elif have != want:
            out.append(f"p{part} ts={ts}: offset {have}, expected {want}")
    return out


def check_committed(ends: dict[int, int], committed: dict[int, int | None]) -> list[str]:
    """After a group consumer read every partition to its end and committed: the committed
    offset of each partition must equal its log end offset. A partition without records may
    have no committed offset (None or negative) or 0."""
    problems = []
    for p, end in sorted(ends.items()):
        got = committed.get(p)
        if end == 0 and (got is None or got <= 0):
            continue
        if got != end:
            problems.append(f"p{p}: committed {got}, log end offset {end}")
    extra = sorted(set(committed) - set(ends))
    if extra:
        problems.append(f"committed offsets for unknown partitions {extra}")
    return problems


def exit_unless_committed(ends: dict[int, int], committed: dict[int, int | None]) -> None:
    """The client programs' last act of consume-group: exit non-zero on a commit mismatch."""
    problems = check_committed(ends, committed)
    if problems:
        raise SystemExit("committed offsets differ from the end offsets: " + "; ".join(problems))
    print(f"committed offsets equal the log end offsets {dict(sorted(ends.items()))}")


def parse_client_args(argv: list[str] | None = None):
    """Command line shared by the client programs (Python here; the Java one mirrors it):
    ``create|produce|consume|consume-group|offsets --bootstrap B --topic T [--partitions N]
    [--input F] [--output F] [--compression CODEC] [--group G]``. ``consume-group`` subscribes
    with group id G, reads every partition to its end offset, commits, and fails unless the
    committed offsets then equal the end offsets."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["create", "produce", "consume", "consume-group", "offsets"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--input")
    ap.add_argument("--output")
    ap.add_argument("--timeout-s", type=float, default=60.0)
    ap.add_argument("--compression", default="none", help="producer codec: none|gzip|snappy|lz4|zstd")
    ap.add_argument("--group", help="consumer group id of consume-group")
    return ap.parse_args(argv)
