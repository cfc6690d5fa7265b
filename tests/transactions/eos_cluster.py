"""Exactly-once across a three-broker cluster while the transaction coordinator's broker dies
(issues 15 and 17; driven by tests/transactions_cluster.rs, which owns the brokers).

N input records go to IN (3 partitions, replication factor 3, created by the caller); the
app (confluent-kafka's eos_app.py or the Java client's EosApp.java) turns each into
"out-<value>" on OUT in transactions that commit the consumed offsets too. Once the group's
committed offsets moved past a quarter of the input, this prints "KILL" and waits for a line
on stdin: the caller SIGKILLs the broker coordinating the app's transactional id meanwhile.
The app carries on (a watchdog restarts it after STALL_S without progress, printed). Pass: a
read_committed consumer of OUT sees each input exactly once.
With EOS_CLUSTER_STRICT=1 (tests/transactions_coordinator_kill.rs) a stall fails the run
instead of restarting the app: the app must carry on through the failover by itself.
Usage: eos_cluster.py BOOTSTRAP KIND CLASSPATH N [NAME]   (KIND: python | java; NAME, KIND
unless given, names the topics cl-in-NAME and cl-out-NAME, the group cl-NAME and the
transactional id cl-NAME-txn)"""
import os
import shutil
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from confluent_kafka import Producer  # noqa: E402
from eos import App, committed_total, read  # noqa: E402

# Longer than eos.py's 20 s: on a loaded two-core host the Java app's source launcher alone
# can take that long to start, and a watchdog shorter than a start never lets it run.
STALL_S = 60
STRICT = os.environ.get("EOS_CLUSTER_STRICT") == "1"


def wait_progress(bs, group, src, app, target, limit_s, since=None):
    """Waits until the committed offsets reach `target`; restarts a stalled app. Returns the
    longest time without progress (s), counted from `since` = (committed, time) if given."""
    last, last_move = since or (-1, time.time())
    deadline, longest = time.time() + limit_s, 0.0
    while (done := committed_total(bs, group, src)) < target:
        if time.time() > deadline:
            raise SystemExit(f"FAIL: committed offsets stuck at {done} of {target}")
        if done >= 0 and done != last:
            if last >= 0:
                longest = max(longest, time.time() - last_move)
            last, last_move = done, time.time()
        elif time.time() - last_move > STALL_S:
            if STRICT:
                raise SystemExit(f"FAIL: no progress for {STALL_S} s at {done} of {target}")
            print(f"no progress for {STALL_S} s: restarting the app", flush=True)
            app.stalls += 1
            app.kill()
            last_move = time.time()
        app.ensure()
        time.sleep(0.3)
    return max(longest, time.time() - last_move) if last >= 0 else longest


def main():
    bs, kind, cp, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    name = sys.argv[5] if len(sys.argv) > 5 else kind
    src, dst, group = f"cl-in-{name}", f"cl-out-{name}", f"cl-{name}"
    work = tempfile.mkdtemp(prefix="shardlog-eos-cluster-")
    print(f"work dir {work} (removed on success unless EOS_KEEP is set)", flush=True)
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(src, key=f"k{i}", value=f"in-{i}")
    assert p.flush(60) == 0
    stop = os.path.join(work, "STOP")
    log = open(os.path.join(work, "app.log"), "ab")
    app = App(kind, bs, src, dst, group, stop, cp, log)
    t0 = time.time()
    try:
        app.ensure()
        wait_progress(bs, group, src, app, n // 4, 180)
        at_kill = (committed_total(bs, group, src), time.time())
        print("KILL", flush=True)
        answer = sys.stdin.readline().strip()
        print(f"coordinator killed: {answer}", flush=True)
        gap = wait_progress(bs, group, src, app, n, 300 + n // 20, at_kill)
        print(f"longest time without progress after the kill: {gap:.1f} s", flush=True)
        elapsed = time.time() - t0
        open(stop, "w").close()
        try:
            app.proc.wait(60)
        except Exception:
            app.kill()
    finally:
        app.kill()
    committed = read(bs, dst, "read_committed")
    uncommitted = read(bs, dst, "read_uncommitted")
    counts = Counter(committed)
    want = {f"out-in-{i}" for i in range(n)}
    dupes = [v for v, c in counts.items() if c > 1]
    missing = want - set(counts)
    extra = set(counts) - want
    print(f"RESULT [{kind}] {len(committed)} read_committed, {len(uncommitted)} read_uncommitted "
          f"(aborted copies: {len(uncommitted) - len(committed)}), app restarts {app.restarts}, "
          f"watchdog restarts {app.stalls}, {elapsed:.1f} s", flush=True)
    if dupes or missing or extra:
        print(f"app log kept in {work}", flush=True)
        raise SystemExit(f"FAIL [{kind}]: duplicates {dupes[:5]} ({len(dupes)}), missing "
                         f"{sorted(missing)[:5]} ({len(missing)}), unexpected {sorted(extra)[:5]}")
    if os.environ.get("EOS_KEEP"):
        print(f"work dir kept: {work}", flush=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("eos_cluster: ok", flush=True)


if __name__ == "__main__":
    main()
