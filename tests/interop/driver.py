"""Interoperability suite driver: every client runs the scenario against one broker, and a
table client x step shows the outcome.

Steps per client, each in its own topic ``interop-<client>-<run id>``: create (6 partitions,
checked through the client's metadata view), produce (10,000 keyed records with headers and,
where the client can set them, explicit partitions and timestamps), consume (every partition
from the beginning, no consumer group), verify (scenario.verify: count, partition, per-partition
order and offsets, key, value, headers, timestamp), list-offsets-by-time (answers checked
against the consumed data) and consume-group (every record again through a consumer group:
subscribe with a group id, commit; the same scenario.verify checks on what it read, and the
group's committed offsets must equal the log end offsets, through the client's committed() API
or ConsumerGroupCommand --describe).

Exit status 0 only if every cell of every requested client is ok: a failed, skipped or
not-installed cell fails the run.

    python3 driver.py --bootstrap 127.0.0.1:9092 [--clients kcat,java-clients] [--records N]
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time

import adapters as ad
import scenario as sc

STEPS = ["create", "produce", "consume", "verify", "list-offsets-by-time", "consume-group"]
# Explicit timestamps start two hours back: Kafka 4 rejects timestamps more than an hour in the
# future (log.message.timestamp.after.max.ms) but accepts any past one.
TIMESTAMP_LAG_MS = 2 * 3600 * 1000


class Cell:
    def __init__(self, status: str, seconds: float = 0.0, detail: str = ""):
        self.status, self.seconds, self.detail = status, seconds, detail

    def text(self) -> str:
        return f"{self.status} {self.seconds:.1f}s" if self.status in ("ok", "FAIL") else self.status


def run_client(adapter: ad.Adapter, args, run_id: str, workroot: str) -> dict[str, Cell]:
    cells: dict[str, Cell] = {}
    why = adapter.missing()
    if why:
        return {s: Cell("MISSING", detail=why if s == "create" else "") for s in STEPS}
    workdir = os.path.join(workroot, adapter.name)
    os.makedirs(workdir, exist_ok=True)
    ctx = ad.Ctx(args.bootstrap, f"interop-{adapter.name}-{run_id}", args.partitions, workdir)
    base_ts = (ad.now_ms() - TIMESTAMP_LAG_MS) // 1000 * 1000
    records = sc.make_dataset(adapter.name, args.records, args.partitions, base_ts,
                              adapter.explicit_partition, adapter.explicit_timestamp)
    sc.write_records(ctx.records_path, records)

    blocked: list[str] = []

    def step(name: str, fn) -> bool:
        if blocked:
            cells[name] = Cell("skip", detail=f"{blocked[0]} failed")
            return False
        start = time.monotonic()
        try:
            detail = fn() or ""
            cells[name] = Cell("ok", time.monotonic() - start, str(detail))
        except ad.SoftStepError as e:
            cells[name] = Cell("FAIL", time.monotonic() - start, f"{e} (later steps still run)")
        except (ad.StepError, OSError, ValueError, KeyError, IndexError) as e:
            cells[name] = Cell("FAIL", time.monotonic() - start, f"{type(e).__name__}: {e}")
            blocked.append(name)
        # consume-group's detail says what was checked of the committed offsets: show it.
        shown = cells[name].detail[-160:] if name == "consume-group" and cells[name].status == "ok" else ""
        print(f"  {adapter.name:16} {name:22} {cells[name].text()} {shown}".rstrip(), file=sys.stderr, flush=True)
        return cells[name].status == "ok"

    def produce():
        start = ad.now_ms()
        out = adapter.produce(ctx)
        ctx.produce_window_ms = (start, ad.now_ms())
        return out

    def verify():
        problems = sc.verify(records, sc.read_consumed(ctx.consumed_path), adapter.expectations(ctx))
        if problems:
            raise ad.SoftStepError(f"{len(problems)} problems, first ones:\n" + "\n".join(problems[:15]))
        return f"{len(records)} records match"

    def list_offsets():
        queries = sc.offset_queries(sc.read_consumed(ctx.consumed_path), args.partitions)
        sc.write_queries(ctx.queries_path, queries)
        adapter.offsets(ctx)
        with open(ctx.answers_path, encoding="ascii") as f:
            answers = [tuple(int(x) for x in line.split("\t")) for line in f if line.strip()]
        problems = sc.check_answers(queries, answers)  # type: ignore[arg-type]
        if problems:
            raise ad.StepError("\n".join(problems[:15]))
        return f"{len(queries)} queries answered"

    def consume_group():
        out = adapter.consume_group(ctx)
        problems = sc.verify(records, sc.read_consumed(ctx.group_consumed_path),
                             adapter.expectations(ctx))
        if problems:
            raise ad.StepError(f"{len(problems)} problems, first ones:\n" + "\n".join(problems[:15]))
        # The program's last line says what it checked of the committed offsets.
        last = (out or "").strip().splitlines()
        return f"{len(records)} records match; {last[-1] if last else ''}"

    step("create", lambda: adapter.create(ctx))
    step("produce", produce)
    step("consume", lambda: adapter.consume(ctx))
    step("verify", verify)
    step("list-offsets-by-time", list_offsets)
    step("consume-group", consume_group)
    return cells


def print_table(results: dict[str, dict[str, Cell]]) -> None:
    width = max(12, *(len(n) for n in results)) + 2
    print("".ljust(width) + "".join(s.ljust(22) for s in STEPS))
    for name, cells in results.items():
        print(name.ljust(width) + "".join(cells[s].text().ljust(22) for s in STEPS))
    for name, cells in results.items():
        for s in STEPS:
            c = cells[s]
            if c.status not in ("ok", "skip") and c.detail:
                print(f"\n--- {name} / {s}: {c.status}\n{c.detail.strip()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--clients", default=",".join(ad.DEFAULT_CLIENTS),
                    help=f"comma-separated, from {', '.join(ad.all_adapters())}")
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--workdir", help="keep work files here (default: a temp dir, kept on failure)")
    ap.add_argument("--compression", default="none",
                    help="producer codec: none (default), mixed (a different codec per client, "
                         "see adapters.MIXED_CODECS) or one of gzip|snappy|lz4|zstd for all")
    args = ap.parse_args()

    adapters = ad.all_adapters()
    wanted = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in adapters]
    if unknown:
        print(f"unknown clients {unknown}; known: {list(adapters)}", file=sys.stderr)
        return 2
    if args.compression not in ("none", "mixed", "gzip", "snappy", "lz4", "zstd"):
        print(f"unknown --compression {args.compression}", file=sys.stderr)
        return 2
    for name in wanted:
        mixed = ad.MIXED_CODECS.get(name, "none")
        adapters[name].codec = mixed if args.compression == "mixed" else args.compression
    workroot = args.workdir or tempfile.mkdtemp(prefix="shardlog-interop-")
    run_id = secrets.token_hex(3)
    print(f"interop: broker {args.bootstrap}, run {run_id}, {args.records} records x "
          f"{args.partitions} partitions, work files in {workroot}", file=sys.stderr)
    started = time.monotonic()
    results = {}
    for name in wanted:
        label = name if args.compression == "none" else f"{name} [{adapters[name].codec}]"
        results[label] = run_client(adapters[name], args, run_id, workroot)
    print_table(results)
    cells = [c for cells in results.values() for c in cells.values()]
    ok = sum(c.status == "ok" for c in cells)
    print(f"\ninterop: {len(results)} clients x {len(STEPS)} steps in {time.monotonic() - started:.0f}s")
    # Alone on its line, so CI readers that count "N passed, N failed" see the cells.
    print(f"interop: {ok} passed, {len(cells) - ok} failed")
    if ok == len(cells) and not args.workdir:
        import shutil

        shutil.rmtree(workroot, ignore_errors=True)
    return 0 if ok == len(cells) else 1


if __name__ == "__main__":
    sys.exit(main())
