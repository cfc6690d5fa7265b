"""Checks one fault run (issue 15): what the producer was told was acknowledged, what the
consumer saw, and what the log holds at the end, read back from offset 0 of every partition.

Inputs are plain tuples so that both Kafka's VerifiableProducer/VerifiableConsumer output
(JSON lines, parsed by `parse_verifiable`) and any other client can feed it:
  acked     [(partition, offset, value)]  producer_send_success events (acks=all)
  consumed  [(partition, offset, value)]  in consumption order (a group consumer's
                                          record_data events; redelivery is allowed)
  assigned  [index into consumed]         where the consumer was (re)assigned partitions:
                                          the only places its offsets may go backwards
  readback  [(partition, offset, value)]  the final log, one pass from offset 0 to the
                                          high watermark

Invariants (each violation is a finding, never a retry):
  - every acknowledged record is in the final log at its acknowledged offset (no loss),
    and its value is in the log exactly once (no duplicate from an idempotent producer);
  - the consumer consumed every acknowledged record, at its acknowledged offset;
  - no offset ever showed two values (consumer vs log vs ack);
  - per partition the log keeps send order (values are the producer's counter) and the
    consumer's offsets only go up between (re)assignments.
Kinds: LOSS, DUPLICATE, CHANGED, order, ack, readback, consumer (broken data guarantees)
and unconsumed (the group consumer did not get to an acknowledged record: availability of
the consumer group, reported apart). Redeliveries (one offset consumed twice with the same value, after a rebalance or a lost
commit) are counted, not failed: a group consumer is at-least-once.
"""

import json
from collections import defaultdict


def parse_verifiable(lines):
    """Splits VerifiableProducer/VerifiableConsumer JSON lines into (acked, consumed,
    assigned, errors, events); non-JSON lines are ignored."""
    acked, consumed, assigned, errors, events = [], [], [], [], []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        name = ev.get("name")
        if name == "producer_send_success":
            acked.append((ev["partition"], ev["offset"], ev["value"], ev.get("timestamp")))
        elif name == "producer_send_error":
            errors.append(ev)
        elif name == "record_data":
            consumed.append((ev["partition"], ev["offset"], ev["value"]))
        elif name == "partitions_assigned":
            assigned.append(len(consumed))
        events.append(ev)
    return acked, consumed, assigned, errors, events


def _num(value):
    try:
        return int(str(value).rsplit(".", 1)[-1])
    except ValueError:
        return None


def check(acked, consumed, assigned, readback):
    """Returns (findings, stats); findings is a list of strings, empty when all holds."""
    counts = defaultdict(int)
    examples = defaultdict(list)

    def bad(msg):
        kind = msg.split(":", 1)[0]
        counts[kind] += 1
        if len(examples[kind]) < 3:
            examples[kind].append(msg)

    log = {}
    log_values = defaultdict(list)
    last_off = {}
    last_val = {}
    for p, off, val in readback:
        if (p, off) in log:
            bad(f"readback: p{p} offset {off} read twice")
        log[(p, off)] = val
        log_values[val].append((p, off))
        if p in last_off and off <= last_off[p]:
            bad(f"readback: p{p} offset {off} after {last_off[p]}")
        last_off[p] = off
        n = _num(val)
        if n is not None and p in last_val and n <= last_val[p]:
            bad(f"order: p{p} offset {off} holds value {val} after value {last_val[p]}")
        if n is not None:
            last_val[p] = n

    ack_at = {}
    for p, off, val, *_ in acked:
        if (p, off) in ack_at and ack_at[(p, off)] != val:
            bad(f"ack: p{p} offset {off} acknowledged for {ack_at[(p, off)]} and {val}")
        ack_at[(p, off)] = val
        got = log.get((p, off))
        if got is None:
            bad(f"LOSS: acknowledged p{p} offset {off} value {val} is not in the log")
        elif got != val:
            bad(f"LOSS: acknowledged p{p} offset {off} value {val}, the log holds {got}")
        where = log_values.get(val, [])
        if len(where) > 1:
            bad(f"DUPLICATE: acknowledged value {val} is in the log at {where}")

    seen = defaultdict(int)
    resets = set(assigned)
    cons_last = {}
    for i, (p, off, val) in enumerate(consumed):
        if i in resets:
            cons_last = {}
        if p in cons_last and off <= cons_last[p]:
            bad(f"consumer: p{p} offset {off} after {cons_last[p]} without a reassignment")
        cons_last[p] = off
        seen[(p, off)] += 1
        want = log.get((p, off))
        if want is None:
            bad(f"consumer: consumed p{p} offset {off} value {val}, not in the final log")
        elif want != val:
            bad(f"CHANGED: p{p} offset {off} consumed as {val}, the log now holds {want}")
    for (p, off), val in ack_at.items():
        if seen.get((p, off), 0) == 0:
            bad(f"unconsumed: acknowledged p{p} offset {off} value {val} never consumed")

    # The worst first: loss, duplicates and changed offsets before consumer lag.
    order = ["LOSS", "DUPLICATE", "CHANGED", "order", "ack", "readback", "consumer", "unconsumed"]
    findings = []
    for kind in sorted(counts, key=lambda k: order.index(k) if k in order else len(order)):
        findings.append(f"{kind}: {counts[kind]} violation(s), e.g.")
        findings.extend(f"  {m}" for m in examples[kind])
    stats = {
        "acked": len(ack_at),
        "log_records": len(log),
        "unacked_in_log": sum(1 for k in log if k not in ack_at),
        "consumed": len(consumed),
        "redelivered": sum(n - 1 for n in seen.values() if n > 1),
        "violations": dict(counts),
    }
    return findings, stats


if __name__ == "__main__":
    # Self-test: a clean run, then each kind of violation.
    ok_log = [(0, 0, "0"), (0, 1, "1"), (1, 0, "2")]
    ack = [(0, 0, "0", 1), (0, 1, "1", 2), (1, 0, "2", 3)]
    f, s = check(ack, [(0, 0, "0"), (0, 1, "1"), (1, 0, "2"), (0, 1, "1")], [0, 3], ok_log)
    assert not f and s["redelivered"] == 1, (f, s)
    f, _ = check(ack, [], [], ok_log[:2])
    assert f[0].startswith("LOSS"), f
    f, _ = check(ack[:2], [(0, 0, "0"), (0, 1, "9")], [0], ok_log)
    assert any(x.startswith("CHANGED") for x in f), f
    f, _ = check(ack, [(0, 0, "0"), (0, 1, "1"), (1, 0, "2")], [0], ok_log + [(1, 1, "0")])
    assert any(x.startswith("DUPLICATE") for x in f), f
    f, _ = check([], [], [], [(0, 0, "5"), (0, 1, "4")])
    assert any(x.startswith("order") for x in f), f
    print("checker self-test ok")
