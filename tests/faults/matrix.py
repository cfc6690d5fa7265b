"""The replication fault matrix on real processes (issue 15).

For each fault: a fresh three-broker cluster (cluster.py), a topic with replication factor 3
and min.insync.replicas=2, Kafka's own VerifiableProducer (idempotent, acks=all, a value
counter, keys spread over the partitions) and VerifiableConsumer (a group, every record
logged) running throughout; the fault; healing (restart, SIGCONT, links up, disk freed); the
producer stopped, the consumer drained, the log read back from offset 0 (confluent-kafka),
and checker.py over the three. Failover time = fault -> the first acks=all acknowledgement,
after the fault, on every partition the victim led.

Usage: matrix.py --bin target/debug/shardlog --cp 'libs/*' [--faults a,b] [--rounds N]
                 [--kills N] [--json out.jsonl] [--base-port 31000]
Faults: kill_leader, stop_leader, cut_leader (nftables: leader cut from brokers, clients
still reach it), cut_leader_link (its link down), kill_controller_in_failover,
rolling_restart, follower_disk_full, repeated_kills (issue 41: two of three SIGKILLed, and a
leader then the controller, three times each; afterwards a whole ISR within 30 s and three
identical replica logs are required, not just reported). `--kills N` instead runs N leader SIGKILLs (each
broker restarted before the next) in one cluster: the failover distribution.
Exit status 1 when any run found a violation (acknowledged-record loss is one).
"""

import argparse
import glob
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402
from cluster import Cluster, netns_possible  # noqa: E402

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "faults"
PARTITIONS = 3
RATE = 300  # records per second from the producer
FAULTS = [
    "kill_leader",
    "stop_leader",
    "cut_leader",
    "kill_controller_in_failover",
    "rolling_restart",
    "follower_disk_full",
    "repeated_kills",
]


def now_ms():
    return int(time.time() * 1000)


def log(msg):
    print(f"[faults {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- cluster state through the Admin API --------------------------------------------------
def admin(c):
    return AdminClient({"bootstrap.servers": c.bootstrap(), "socket.timeout.ms": 3000})


def metadata(c, topic=TOPIC):
    try:
        return admin(c).list_topics(topic, timeout=3) if topic else admin(c).list_topics(timeout=3)
    except Exception:  # noqa: BLE001 - any failure means "ask again"
        return None


def leaders(c):
    """{partition: (leader, [isr])} or None."""
    md = metadata(c)
    if md is None or TOPIC not in md.topics or md.topics[TOPIC].error is not None:
        return None
    return {p: (m.leader, list(m.isrs)) for p, m in md.topics[TOPIC].partitions.items()}


def controller(c):
    md = metadata(c)
    return md.controller_id if md else -1


def wait_until(what, limit_s, fn, every_s=0.2):
    deadline = time.time() + limit_s
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(every_s)
    raise RuntimeError(f"timed out after {limit_s}s waiting for {what}")


def create_topic(c, partitions):
    def registered():
        md = metadata(c, None)
        return md is not None and len(md.brokers) == 3 and md.controller_id > 0

    wait_until("three registered brokers", 60, registered)
    a = admin(c)  # kept alive until the futures resolve
    fs = a.create_topics(
        [NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})], request_timeout=15
    )
    for f in fs.values():
        f.result(20)

    def healthy():
        lp = leaders(c)
        return lp if lp and len(lp) == partitions and all(l > 0 and len(i) == 3 for l, i in lp.values()) else None

    return wait_until("topic with 3 in-sync replicas", 60, healthy)


def wait_full_isr(c, limit_s=90):
    def full():
        lp = leaders(c)
        return lp if lp and all(l > 0 and len(i) == 3 for l, i in lp.values()) else None

    return wait_until("every partition back to 3 in-sync replicas", limit_s, full)


# ---- Kafka's verifiable clients -----------------------------------------------------------
def log4j_config(root):
    """WARN and above to stderr: the clients' retriable errors, classified by the report."""
    path = os.path.join(root, "log4j2.properties")
    with open(path, "w") as f:
        f.write("status = error\nappender.err.type = Console\nappender.err.name = STDERR\n"
                "appender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n"
                "appender.err.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = warn\n"
                "rootLogger.appenderRef.err.ref = STDERR\n")
    return path


class Java:
    def __init__(self, cp, root, name, main, args):
        self.out_path = os.path.join(root, f"{name}.out")
        self.err_path = os.path.join(root, f"{name}.err")
        self.out = open(self.out_path, "wb")
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={log4j_config(root)}", "-cp", cp, main]
            + args,
            stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL,
        )

    def lines(self):
        with open(self.out_path, "r", errors="replace") as f:
            return f.readlines()

    def stop(self, limit_s=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(limit_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_clients(c, cp, root):
    cfg = os.path.join(root, "producer.properties")
    with open(cfg, "w") as f:
        f.write("enable.idempotence=true\nmax.in.flight.requests.per.connection=5\n"
                "retries=2147483647\ndelivery.timeout.ms=120000\nrequest.timeout.ms=5000\n"
                "metadata.max.age.ms=5000\nreconnect.backoff.max.ms=500\n")
    ccfg = os.path.join(root, "consumer.properties")
    with open(ccfg, "w") as f:
        f.write("metadata.max.age.ms=5000\nreconnect.backoff.max.ms=500\n")
    consumer = Java(cp, root, "consumer", "org.apache.kafka.tools.VerifiableConsumer", [
        "--bootstrap-server", c.bootstrap(), "--topic", TOPIC, "--group-id", "faults-group",
        "--reset-policy", "earliest", "--verbose", "--session-timeout", "10000",
        "--consumer.config", ccfg,
    ])
    producer = Java(cp, root, "producer", "org.apache.kafka.tools.VerifiableProducer", [
        "--bootstrap-server", c.bootstrap(), "--topic", TOPIC, "--acks", "-1",
        "--throughput", str(RATE), "--repeating-keys", "60", "--producer.config", cfg,
    ])
    return producer, consumer


GAP_MS = 1000  # an ack gap this long on a partition is an interruption, not load jitter
CALM_MS = 5000  # acks flowing this long past the fault without such a gap: no interruption


def acks_by_partition(producer):
    out = {}
    for p, _off, _v, ts in checker.parse_verifiable(producer.lines())[0]:
        if ts is not None:
            out.setdefault(p, []).append(ts)
    return out


def recovery(ts_list, t_ms):
    """When acks on one partition resumed after a fault at `t_ms`: the end of the first gap
    of at least GAP_MS that ends after the fault (acks printed just after the fault, close
    behind the ones before it, were answered before it: in-flight responses, not recovery).
    0 when acks kept flowing for CALM_MS past the fault without such a gap; None when not
    known yet."""
    prev = None
    for ts in sorted(ts_list):
        if prev is not None and ts >= t_ms and ts - prev >= GAP_MS:
            return ts
        if ts >= t_ms + CALM_MS:
            return 0
        prev = ts
    return None


def wait_first_acks(producer, partitions, limit_s=60):
    wait_until("the producer's first acks", limit_s,
               lambda: set(partitions) <= set(acks_by_partition(producer)))


# Every partition's interruption at each measured fault, {partition: ms}: partitions the
# victim only followed stall too while it is still in their ISR.
ALL_PARTITIONS = []


def wait_acks(producer, t_ms, partitions, limit_s=90):
    """Failover time: fault -> acks=all acknowledgements again on every one of
    `partitions` (the latest of their recoveries); 0 for no interruption; None when some
    partition had none within `limit_s`. Waits for every partition of the topic, and keeps
    their figures in ALL_PARTITIONS."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        acks = acks_by_partition(producer)
        every = {p: recovery(ts, t_ms) for p, ts in acks.items()}
        if all(every.get(p) is not None for p in partitions) and None not in every.values():
            ALL_PARTITIONS.append({p: (r - t_ms if r else 0) for p, r in every.items()})
            return max([every[p] - t_ms if every[p] else 0 for p in partitions] + [0])
        if producer.proc.poll() is not None:
            break
        time.sleep(0.2)
    return None


# ---- faults: each returns a list of failover times in ms (None: no ack within bound) -----
def victim_partitions(lp, nid):
    return [p for p, (l, _) in lp.items() if l == nid]


def f_kill_leader(c, producer, lp):
    victim = lp[0][0]
    t = now_ms()
    c.kill(victim)
    took = wait_acks(producer, t, victim_partitions(lp, victim))
    c.start([victim])
    return [took], f"SIGKILL leader {victim}"


def f_stop_leader(c, producer, lp):
    victim = lp[0][0]
    t = now_ms()
    c.signal(victim, signal.SIGSTOP)
    time.sleep(15)
    c.signal(victim, signal.SIGCONT)
    took = wait_acks(producer, t, victim_partitions(lp, victim))
    return [took], f"SIGSTOP leader {victim} 15 s, SIGCONT"


def cut(how):
    def f(c, producer, lp):
        victim = lp[0][0]
        t = now_ms()
        c.isolate(c.node(victim), how)
        took = wait_acks(producer, t, victim_partitions(lp, victim), limit_s=30)
        time.sleep(max(0, 15 - (now_ms() - t) / 1000))
        c.heal(c.node(victim), how)
        if took is None:
            took = wait_acks(producer, t, victim_partitions(lp, victim))
        return [took], f"leader {victim} cut off ({how}) 15 s"

    return f


def f_kill_controller_in_failover(c, producer, lp):
    ctl = controller(c)
    # A partition whose leader is not the active controller, so two different nodes die.
    p = next((p for p, (l, _) in lp.items() if l != ctl), 0)
    leader = lp[p][0]
    t = now_ms()
    c.kill(leader)
    time.sleep(0.3)  # the controller is now fencing the leader / electing
    c.kill(ctl)
    # Two of three down: no quorum and no min.insync until one comes back.
    time.sleep(1.0)
    c.start([leader])
    took = wait_acks(producer, t, victim_partitions(lp, leader))
    c.start([ctl])
    return [took], f"SIGKILL leader {leader}, 300 ms later controller {ctl}, leader back at 1.3 s"


def f_rolling_restart(c, producer, lp):
    took = []
    for n in c.nodes:
        cur = leaders(c) or lp
        t = now_ms()
        c.stop(n.id)
        c.start([n.id])
        parts = victim_partitions(cur, n.id)
        took.append(wait_acks(producer, t, parts) if parts else 0)
        wait_full_isr(c)
    return took, "SIGTERM + restart of each broker in turn, waiting for full ISR"


def f_follower_disk_full(c, producer, lp):
    leader = lp[0][0]
    victim = next(n.id for n in c.nodes if n.id != leader)
    t = now_ms()
    c.node(victim).disk.fill()
    time.sleep(10)
    gaps = [wait_acks(producer, t + 9000, list(lp.keys()))]
    st = leaders(c)
    c.node(victim).disk.free()
    c.stop(victim)
    c.start([victim])
    return gaps, f"follower {victim} disk full 10 s (ISR then {st and st[0][1]}), freed, restarted"


def f_repeated_kills(c, producer, lp):
    """Issue 41's runs: quick leadership changes that leave a replica with a batch of an
    epoch nobody else saw. Each round waits only for acks to resume, not for a whole ISR."""
    took = []
    for rnd in range(3):
        cur = leaders(c) or lp
        ctl = controller(c)
        # Two of three: the leader of partition 0 and one other node.
        first = cur[0][0]
        second = next(n.id for n in c.nodes if n.id != first)
        t = now_ms()
        c.kill(first)
        time.sleep(0.3 + 0.2 * rnd)
        c.kill(second)
        time.sleep(5)
        c.start([first, second])
        took.append(wait_acks(producer, t, list(cur.keys())))
        log(f"repeated_kills: round {rnd + 1}: SIGKILL {first} and {second}, restarted after 5 s")
        cur = leaders(c) or cur
        ctl = controller(c)
        took += f_kill_controller_in_failover(c, producer, cur)[0]
        log(f"repeated_kills: round {rnd + 1}: SIGKILL a leader then controller {ctl}")
    return took, "3x SIGKILL two of three (restart after 5 s), 3x a leader then the controller"


FAULT_FNS = {
    "kill_leader": f_kill_leader,
    "stop_leader": f_stop_leader,
    "cut_leader": cut("nft"),
    "cut_leader_link": cut("link"),
    "kill_controller_in_failover": f_kill_controller_in_failover,
    "rolling_restart": f_rolling_restart,
    "follower_disk_full": f_follower_disk_full,
    "repeated_kills": f_repeated_kills,
}


# ---- replica logs, read from the brokers' files ---------------------------------------------
def log_batches(data_dir, partition):
    """[(base offset, last offset, partitionLeaderEpoch, crc)] of a replica's segment files,
    up to the end of the written log (preallocated zeros follow it)."""
    out = []
    for path in sorted(glob.glob(os.path.join(data_dir, f"{TOPIC}-{partition}", "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        at = 0
        while at + 61 <= len(data):
            base, length, epoch, magic, crc = struct.unpack_from(">qiibI", data, at)
            if magic != 2 or length < 49:
                break
            last_delta = struct.unpack_from(">i", data, at + 23)[0]
            out.append((base, base + last_delta, epoch, crc))
            at += 12 + length
    return out


def same_replica_logs(c, partitions, limit_s=20):
    """None when every replica of every partition holds the same batches (offsets, epochs,
    CRCs); else what differs. Waited for: the followers fetch the last records first."""
    deadline = time.time() + limit_s
    while True:
        diffs = []
        for p in range(partitions):
            logs = {n.id: log_batches(n.data_dir, p) for n in c.nodes}
            ref = logs[c.nodes[0].id]
            for nid, batches in logs.items():
                if batches != ref:
                    first = next((i for i, (a, b) in enumerate(zip(ref, batches)) if a != b),
                                 min(len(ref), len(batches)))
                    diffs.append(f"partition {p}: node {nid} holds {len(batches)} batches, node "
                                 f"{c.nodes[0].id} {len(ref)}; first difference at batch {first}: "
                                 f"{batches[first:first + 1]} vs {ref[first:first + 1]}")
        if not diffs or time.time() > deadline:
            return diffs or None
        time.sleep(1)


# ---- the end of a run: drain, read back, check ------------------------------------------
def read_back(c, partitions):
    cons = Consumer({
        "bootstrap.servers": c.bootstrap(), "group.id": "faults-readback",
        "enable.auto.commit": False, "enable.partition.eof": True,
    })
    out = []
    for p in range(partitions):
        _lo, hi = cons.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=15)
        if hi <= 0:
            continue
        cons.assign([TopicPartition(TOPIC, p, 0)])
        got = 0
        deadline = time.time() + 60
        while got < hi and time.time() < deadline:
            m = cons.poll(1.0)
            if m is None or m.error():
                continue
            out.append((p, m.offset(), m.value().decode()))
            got = m.offset() + 1
        cons.unassign()
    cons.close()
    return out


def finish(c, producer, consumer, partitions):
    producer.stop()
    acked, _, _, perrors, _ = checker.parse_verifiable(producer.lines())
    want = {(a[0], a[1]) for a in acked}
    # A consumer that never got an assignment (its group's coordinator still loading) will
    # not catch up in the next seconds either: a short wait then.
    started = time.time()
    while time.time() < started + 25:
        consumed = checker.parse_verifiable(consumer.lines())[1]
        if want <= {(p, o) for p, o, _ in consumed} or (not consumed and time.time() > started + 5):
            break
        time.sleep(0.5)
    consumer.stop()
    _, consumed, assigned, _, _ = checker.parse_verifiable(consumer.lines())
    readback = read_back(c, partitions)
    findings, stats = checker.check(acked, consumed, assigned, readback)
    stats["send_errors"] = len(perrors)
    stats["send_error_kinds"] = sorted({str(e.get("exception")) for e in perrors})
    return findings, stats


AVAILABILITY = {"unconsumed"}


def judge(result, took):
    """`ok`: no broken data guarantee (loss, duplicate, changed offset, order). `stalled`:
    availability problems (no acks within the bound after a fault, a group consumer that
    did not get to every acknowledged record); they fail the run only with
    SHARDLOG_FAULTS_STRICT=1."""
    kinds = set((result.get("stats") or {}).get("violations", {}))
    stalled = []
    if None in took:
        stalled.append("no acks=all acknowledgement within the bound after the fault")
    if kinds & AVAILABILITY:
        stalled.append("the group consumer did not consume every acknowledged record")
    result["stalled"] = stalled
    result["ok"] = not (kinds - AVAILABILITY) and not (stalled and STRICT)


STRICT = os.environ.get("SHARDLOG_FAULTS_STRICT") == "1"


def run_fault(args, fault, use_netns):
    ALL_PARTITIONS.clear()
    root = tempfile.mkdtemp(prefix=f"faults-{fault}-")
    disk = fault == "follower_disk_full"
    partitions = 1 if disk else PARTITIONS
    c = Cluster(args.bin, root, args.base_port, use_netns, disk_images=disk)
    producer = consumer = None
    result = {"fault": fault, "dir": root}
    try:
        c.start()
        lp = create_topic(c, partitions)
        producer, consumer = start_clients(c, args.cp, root)
        wait_first_acks(producer, list(lp.keys()))
        time.sleep(2)
        lp = leaders(c) or lp
        took, what = FAULT_FNS[fault](c, producer, lp)
        result.update(what=what, failover_ms=took, all_partitions_ms=list(ALL_PARTITIONS))
        log(f"{fault}: {what}; failover ms {took}")
        time.sleep(2)
        strict_isr = fault == "repeated_kills"
        try:
            wait_full_isr(c, 30)
        except RuntimeError as e:
            result["note"] = str(e)
            if strict_isr:
                raise
        findings, stats = finish(c, producer, consumer, partitions)
        if strict_isr:
            diffs = same_replica_logs(c, partitions)
            findings += [f"replica logs differ: {d}" for d in diffs or []]
            stats.setdefault("violations", {})
            if diffs:
                stats["violations"]["replica_logs_differ"] = len(diffs)
        result.update(findings=findings, stats=stats)
        judge(result, took)
    except Exception as e:  # noqa: BLE001 - reported, with the logs
        result.update(ok=False, findings=[f"run failed: {e}"])
    finally:
        for j in (producer, consumer):
            if j:
                j.stop(5)
        if not result.get("ok"):
            for n in c.nodes:
                result[f"log{n.id}"] = c.tail(n.id)
        c.close()
    return result


def run_kills(args, kills, use_netns):
    """N leader SIGKILLs in one cluster, the killed broker restarted and the ISR full again
    before the next: the failover distribution."""
    root = tempfile.mkdtemp(prefix="faults-kills-")
    c = Cluster(args.bin, root, args.base_port, use_netns)
    producer = consumer = None
    result = {"fault": f"kill_leader x{kills}", "dir": root, "failover_ms": []}
    ALL_PARTITIONS.clear()
    try:
        c.start()
        lp = create_topic(c, PARTITIONS)
        producer, consumer = start_clients(c, args.cp, root)
        wait_first_acks(producer, list(lp.keys()))
        for i in range(kills):
            time.sleep(1)
            lp = wait_full_isr(c)
            victim = lp[i % PARTITIONS][0]
            t = now_ms()
            c.kill(victim)
            took = wait_acks(producer, t, victim_partitions(lp, victim))
            result["failover_ms"].append(took)
            result.setdefault("kill_ms", []).append(t)
            log(f"kill {i + 1}/{kills}: leader {victim}, failover {took} ms")
            c.start([victim])
        wait_full_isr(c)
        result["all_partitions_ms"] = list(ALL_PARTITIONS)
        findings, stats = finish(c, producer, consumer, PARTITIONS)
        result.update(findings=findings, stats=stats, what=f"{kills} leader SIGKILLs")
        judge(result, result["failover_ms"])
    except Exception as e:  # noqa: BLE001
        result.update(ok=False, findings=[f"run failed: {e}"])
    finally:
        for j in (producer, consumer):
            if j:
                j.stop(5)
        if not result.get("ok"):
            for n in c.nodes:
                result[f"log{n.id}"] = c.tail(n.id)
        c.close()
    return result


def count_in_logs(c, needle):
    """Lines containing `needle` in every broker's log (FAULTS_LOG_LEVEL=info for INFO)."""
    total = 0
    for n in c.nodes:
        try:
            with open(os.path.join(c.root, f"node-{n.id}.log"), errors="replace") as fh:
                total += sum(1 for line in fh if needle in line)
        except OSError:
            pass
    return total


def run_rapid_kills(args, kills, use_netns):
    """Issue 32's repeated-kill run: the leader of partition 0 SIGKILLed every 3-6 s, each
    victim restarted 5 s after its kill, without waiting for the ISR. Per kill: the time to
    the next acknowledgement on the partitions it led; at the end, the time to a whole ISR
    and the truncations and stuck-follower warnings in the broker logs."""
    import random
    rng = random.Random(kills)
    root = tempfile.mkdtemp(prefix="faults-rapid-")
    c = Cluster(args.bin, root, args.base_port, use_netns)
    producer = consumer = None
    result = {"fault": f"rapid_kills x{kills}", "dir": root, "failover_ms": []}
    ALL_PARTITIONS.clear()
    restarts = []  # (due time, node)
    try:
        c.start()
        lp = create_topic(c, PARTITIONS)
        producer, consumer = start_clients(c, args.cp, root)
        wait_first_acks(producer, list(lp.keys()))
        for i in range(kills):
            time.sleep(rng.uniform(3, 6))
            for due, nid in [r for r in restarts if r[0] <= time.time()]:
                c.start([nid], wait_s=30)
                restarts.remove((due, nid))
            cur = leaders(c) or lp
            victim = cur[0][0]
            if victim <= 0 or any(nid == victim for _, nid in restarts):
                log(f"rapid kill {i + 1}/{kills}: partition 0 has no live leader; skipped")
                continue
            t = now_ms()
            c.kill(victim)
            restarts.append((time.time() + 5, victim))
            took = wait_acks(producer, t, victim_partitions(cur, victim), limit_s=20)
            result["failover_ms"].append(took)
            log(f"rapid kill {i + 1}/{kills}: leader {victim}, next ack after {took} ms")
        for due, nid in sorted(restarts):
            time.sleep(max(0, due - time.time()))
            c.start([nid], wait_s=30)
        t = time.time()
        try:
            wait_full_isr(c, 120)
            result["full_isr_after_s"] = round(time.time() - t, 1)
        except RuntimeError as e:
            result["note"] = str(e)
        result["truncation_lines"] = count_in_logs(c, "truncating the log")
        result["stuck_warnings"] = count_in_logs(c, "truncated to the same offset twice")
        findings, stats = finish(c, producer, consumer, PARTITIONS)
        result.update(findings=findings, stats=stats, what=f"{kills} rapid leader SIGKILLs")
        judge(result, result["failover_ms"])
    except Exception as e:  # noqa: BLE001
        result.update(ok=False, findings=[f"run failed: {e}"])
    finally:
        for j in (producer, consumer):
            if j:
                j.stop(5)
        c.close()
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cp", required=True)
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--kills", type=int, default=0)
    ap.add_argument("--rapid-kills", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--base-port", type=int, default=31000)
    args = ap.parse_args()
    # A bounding `timeout` sends SIGTERM: exit through the `finally`s, which stop the brokers
    # and clients, unmount the disk images and remove the namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    use_netns, why = netns_possible()
    if os.environ.get("FAULTS_NETNS") == "0":
        use_netns, why = False, "FAULTS_NETNS=0"
    if not use_netns:
        log(f"no network namespaces ({why}): brokers on 127.0.0.1, network cuts skipped")
    results = []
    todo = [("kills", None)] if args.kills else [(f, r) for r in range(args.rounds) for f in args.faults.split(",")]
    if args.rapid_kills:
        todo = [("rapid", None)]
    for fault, rnd in todo:
        if fault.startswith("cut") and not use_netns:
            results.append({"fault": fault, "round": rnd, "skipped": why})
            continue
        if fault == "rapid":
            r = run_rapid_kills(args, args.rapid_kills, use_netns)
        elif fault == "kills":
            r = run_kills(args, args.kills, use_netns)
        else:
            r = run_fault(args, fault, use_netns)
        r["round"] = rnd
        results.append(r)
        status = "ok" if r.get("ok") else "FAILED"
        if r.get("stalled"):
            status += f" (availability: {'; '.join(r['stalled'])})"
        log(f"{r['fault']} round {rnd}: {status} failover_ms={r.get('failover_ms')} stats={r.get('stats')}")
        for f in r.get("findings", []):
            log(f"  finding: {f}")
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(r) + "\n")
    bad = [r for r in results if not r.get("ok") and not r.get("skipped")]
    for r in bad:
        for k in ("log1", "log2", "log3"):
            if r.get(k):
                print(f"--- {r['fault']} {k} (tail)\n{r[k]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
