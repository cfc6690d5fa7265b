"""Summarises matrix.py's JSON lines as a Markdown table (one row per fault): runs, runs
with a violation, failover time (fault -> first acks=all acknowledgement on the victim's
partitions) min / p50 / p90 / max, acknowledged records, redeliveries, send errors.

Usage: report.py results.jsonl [title]   (Markdown on stdout)
"""

import json
import sys
from collections import OrderedDict


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    i = min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))
    return xs[i]


def fmt_s(ms):
    return "-" if ms is None else f"{ms / 1000:.2f}"


def main():
    rows = OrderedDict()
    for line in open(sys.argv[1]):
        r = json.loads(line)
        rows.setdefault(r["fault"], []).append(r)
    title = sys.argv[2] if len(sys.argv) > 2 else "Replication fault matrix"
    print(f"## {title}\n")
    print("| fault | runs | runs: data broken / stalled / errored | failover s min / p50 / p90 / max | any partition max s | acked | redelivered | send errors |")
    print("|---|---|---|---|---|---|---|---|")
    for fault, rs in rows.items():
        if all(r.get("skipped") for r in rs):
            print(f"| {fault} | 0 | skipped: {rs[0]['skipped']} | | | | | |")
            continue
        fo = [x for r in rs for x in (r.get("failover_ms") or []) if x is not None]
        missing = sum(1 for r in rs for x in (r.get("failover_ms") or [None]) if x is None)
        broken = sum(1 for r in rs if set((r.get("stats") or {}).get("violations", {})) - {"unconsumed"})
        stalled = sum(1 for r in rs if r.get("stalled"))
        errored = sum(1 for r in rs if any(f.startswith("run failed") for f in r.get("findings", [])))
        bad = f"{broken} / {stalled} / {errored}"
        st = [r.get("stats") or {} for r in rs]
        acked = sum(s.get("acked", 0) for s in st)
        red = sum(s.get("redelivered", 0) for s in st)
        errs = sum(s.get("send_errors", 0) for s in st)
        figs = " / ".join(fmt_s(pct(fo, q)) for q in (0, 0.5, 0.9, 1))
        if missing:
            figs += f" ({missing} without an ack in bound)"
        anyp = [v for r in rs for d in (r.get("all_partitions_ms") or []) for v in d.values()]
        print(f"| {fault} | {len(rs)} | {bad} | {figs} | {fmt_s(max(anyp) if anyp else None)} | {acked} | {red} | {errs} |")
    print()
    print("failover: fault -> acks=all acknowledgements again on the victim's partitions (the end of the")
    print("first >= 1 s ack gap); 'any partition': the longest such interruption on any partition,")
    print("including those the victim only followed. Data broken: loss, duplicate, changed offset or")
    print("order (checker.py); stalled: no ack within 90 s after the fault, or the group consumer")
    print("did not get to every acknowledged record; errored: the run itself failed.")
    print()
    for fault, rs in rows.items():
        for r in rs:
            if r.get("what"):
                print(f"- {fault} round {r.get('round')}: {r['what']}; failover ms {r.get('failover_ms')}; "
                      f"per partition {r.get('all_partitions_ms')}")
            for st in r.get("stalled") or []:
                print(f"  - availability: {st}")
            for f in r.get("findings", []):
                print(f"  - finding: {f}")
            kinds = (r.get("stats") or {}).get("send_error_kinds")
            if kinds:
                print(f"  - send errors: {', '.join(kinds)}")


if __name__ == "__main__":
    main()
