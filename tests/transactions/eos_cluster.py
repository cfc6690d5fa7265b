"""Exactly-once across a three-broker cluster while the transaction coordinator's broker dies
(issues 15 and 17; driven by tests/processes/transactions_cluster.rs, which owns the brokers).

N input records go to IN (3 partitions, replication factor 3, created by the caller); the
app (confluent-kafka's eos_app.py or the Java client's EosApp.java) turns each into
"out-<value>" on OUT in transactions that commit the consumed offsets too. Once the group's
committed offsets moved past a quarter of the input, this prints "KILL": the caller SIGKILLs
the broker coordinating the app's transactional id and answers a line on stdin, "NODE" or
"NODE UNIX_TIME" (when the broker went down), read while the app goes on; the time progress
stopped around that moment is printed.
The app carries on (a watchdog restarts it after STALL_S without progress, printed). Pass: a
read_committed consumer of OUT sees each input exactly once.
With EOS_CLUSTER_STRICT=1 (tests/processes/transactions_coordinator_kill.rs) a stall fails the run
instead of restarting the app: the app must carry on through the failover by itself.
Usage: eos_cluster.py BOOTSTRAP KIND CLASSPATH N [NAME]   (KIND: python | java; NAME, KIND
unless given, names the topics cl-in-NAME and cl-out-NAME, the group cl-NAME and the
transactional id cl-NAME-txn)"""
import os
import shutil
import sys
import tempfile
import threading
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


def wait_progress(bs, group, src, app, target, limit_s, moves=None):
    """Waits until the committed offsets reach `target`; restarts a stalled app. Appends the
    time of each observed move of the committed offsets to `moves` if given."""
    last, last_move = -1, time.time()
    deadline = time.time() + limit_s
    while (done := committed_total(bs, group, src)) < target:
        if time.time() > deadline:
            raise SystemExit(f"FAIL: committed offsets stuck at {done} of {target}")
        if done >= 0 and done != last:
            if last >= 0 and moves is not None:
                moves.append(time.time())
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
    if moves is not None:
        moves.append(time.time())


def report_fault(answer, t_kill, moves):
    """Prints how long progress stopped around the fault. `answer`: the caller's line, "NODE"
    (SIGKILLed when KILL was printed) or "NODE UNIX_TIME" (when it went down)."""
    parts = answer.split()
    fault = float(parts[1]) if len(parts) > 1 else t_kill
    print(f"coordinator broker {parts[0] if parts else '?'} went down", flush=True)
    after = [t for t in moves if t > fault]
    gaps = [b - max(a, fault) for a, b in zip(moves, moves[1:]) if b > fault]
    if after and gaps:
        print(f"progress resumed {after[0] - fault:.1f} s after the fault; longest time without "
              f"progress after it: {max(gaps):.1f} s", flush=True)


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
        # The caller's answer is read beside the progress checks: a crash it waits for may
        # come while the app keeps going.
        answers = []
        reader = threading.Thread(target=lambda: answers.append(sys.stdin.readline().strip()),
                                  daemon=True)
        t_kill = time.time()
        print("KILL", flush=True)
        reader.start()
        moves = [t_kill]
        wait_progress(bs, group, src, app, n, 300 + n // 20, moves)
        elapsed = time.time() - t0
        reader.join(600)
        if not answers:
            raise SystemExit("FAIL: no answer to KILL")
        report_fault(answers[0], t_kill, moves)
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
