"""Real clients through a leader SIGKILL (issue 15): confluent-kafka (librdkafka), the Java
producer (Kafka's VerifiableProducer) and kcat produce to one RF 3 topic
(min.insync.replicas=2, idempotent, acks=all) while the leader of partition 0 is SIGKILLed and
restarted; afterwards every record each client was told was acknowledged is in the log
exactly once, and the errors the clients saw are classified: retriable (retried by the
client, never surfaced as a failed send) or not. kcat and confluent-kafka consumers (partition
assignment, no group) read throughout; their view must match the final log.

Usage: clients.py --bin target/debug/shardlog --cp 'libs/*' [--base-port 31600]
Exit status 1 on a lost or duplicated acknowledged record, a failed send, or a consumer
that saw an offset with another value than the log.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import matrix  # noqa: E402
from cluster import Cluster  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

RATE = 100  # records per second per producer


def ck_producer(bootstrap, stop, acked, errors):
    """confluent-kafka, idempotent, acks=all: values ck.N."""
    p = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "message.timeout.ms": 120000,
        "error_cb": lambda e: errors.append(("error_cb", e.name(), e.retriable(), e.fatal())),
    })

    def report(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value().decode()))
        else:
            errors.append(("delivery", err.name(), err.retriable(), err.fatal()))

    n = 0
    while not stop.is_set():
        p.produce(matrix.TOPIC, value=f"ck.{n}".encode(), key=str(n % 60).encode(), on_delivery=report)
        n += 1
        p.poll(0)
        time.sleep(1 / RATE)
    p.flush(130)
    return n


def kcat_producer(bootstrap, stop, root):
    """kcat -P, idempotent, acks=all, values kc.N from stdin; its stderr is kept."""
    err = open(os.path.join(root, "kcat-producer.err"), "wb")
    proc = subprocess.Popen(
        ["kcat", "-P", "-b", bootstrap, "-t", matrix.TOPIC, "-K", ":",
         "-X", "enable.idempotence=true", "-X", "acks=all", "-X", "message.timeout.ms=120000"],
        stdin=subprocess.PIPE, stderr=err,
    )
    n = 0
    while not stop.is_set():
        proc.stdin.write(f"{n % 60}:kc.{n}\n".encode())
        proc.stdin.flush()
        n += 1
        time.sleep(1 / RATE)
    proc.stdin.close()
    proc.wait(150)
    return n, proc.returncode


def ck_consumer(bootstrap, stop, seen):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "clients-assign",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(matrix.TOPIC, p, 0) for p in range(matrix.PARTITIONS)])
    while not stop.is_set():
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append((m.partition(), m.offset(), m.value().decode()))
    c.close()


def classify_java(path):
    """Java producer WARN lines: 'Error: CODE' of produce responses it retried, and other
    warnings by their first words."""
    kinds = Counter()
    for line in open(path, errors="replace"):
        m = re.search(r"retrying .*Error: ([A-Z_]+)", line)
        if m:
            kinds[f"retried {m.group(1)}"] += 1
        elif " WARN " in line or " ERROR " in line:
            kinds[re.sub(r"[0-9]+", "N", line.split("] ", 2)[-1])[:90]] += 1
    return kinds


def classify_kcat(path):
    kinds = Counter()
    for line in open(path, errors="replace"):
        line = line.strip()
        if line:
            kinds[re.sub(r"[0-9]+", "N", line)[:110]] += 1
    return kinds


def group_offsets_survive_coordinator_kill(args):
    """A consumer group commits offsets; its coordinator's broker is SIGKILLed; the group's
    committed offsets, read through the survivors, are unchanged (the coordinator moves with
    __consumer_offsets leadership: another piece of issue 15). Returns findings."""
    root = tempfile.mkdtemp(prefix="faults-group-")
    c = Cluster(args.bin, root, args.base_port + 50, use_netns=False)
    findings = []
    readers = []
    try:
        c.start()
        matrix.create_topic(c, matrix.PARTITIONS)
        want = [TopicPartition(matrix.TOPIC, p, 100 + p) for p in range(matrix.PARTITIONS)]
        cons = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": "faults-offsets",
                         "enable.auto.commit": False})
        deadline = time.time() + 60
        while True:
            try:
                cons.commit(offsets=want, asynchronous=False)
                break
            except Exception as e:  # noqa: BLE001 - coordinator still loading: retry, bounded
                if time.time() > deadline:
                    raise RuntimeError(f"commit never succeeded: {e}") from e
                time.sleep(1)
        cons.close()
        a = matrix.admin(c)
        desc = a.describe_consumer_groups(["faults-offsets"])["faults-offsets"].result(30)
        victim = desc.coordinator.id
        matrix.log(f"group: offsets committed, coordinator {victim} SIGKILLed")
        c.kill(victim)
        killed = time.time()
        deadline = killed + 90
        got, last_error = None, None
        # Read back through a consumer of the group (OffsetFetch from the consumer's own
        # coordinator handling), not AdminClient.list_consumer_group_offsets: librdkafka
        # (2.16 here) aborts the process in rd_kafka_enq_once_del_source_return when a
        # coordinator-targeted admin request fails on a dropped connection, which is this
        # check's very scenario (librdkafka issue 4605, fix proposed in PR 5397; seen in CI
        # 2026-12-02 and again with one long-lived AdminClient). A consumer that never
        # subscribes does not join the group, so it cannot disturb what it reads.
        reader = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": "faults-offsets",
                           "enable.auto.commit": False})
        readers.append(reader)
        while time.time() < deadline:
            try:
                res = reader.committed(
                    [TopicPartition(matrix.TOPIC, p) for p in range(matrix.PARTITIONS)],
                    timeout=10)
                got = sorted((tp.partition, tp.offset) for tp in res)
                if got == [(tp.partition, tp.offset) for tp in want]:
                    matrix.log(f"group: offsets read back {time.time() - killed:.1f} s after the kill")
                    break
            except Exception as e:  # noqa: BLE001 - coordinator moving: retry, bounded
                last_error = e
            time.sleep(1)
        if got != [(tp.partition, tp.offset) for tp in want]:
            # got None: no read-back succeeded at all (last_error says why).
            findings.append(f"group offsets after the coordinator's SIGKILL: {got}, committed "
                            f"{want}, last error {last_error!r}")
    except Exception as e:  # noqa: BLE001
        findings.append(f"group run failed: {e}")
    finally:
        for r in readers:
            r.close()
        c.close()
    return findings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cp", required=True)
    ap.add_argument("--base-port", type=int, default=31600)
    ap.add_argument("--group", action="store_true", help="only the consumer-group offsets test")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the `finally`s
    if args.group:
        found = group_offsets_survive_coordinator_kill(args)
        for f in found:
            print(f"FINDING: {f}")
        print("group: " + ("FAILED" if found else "ok"))
        return 1 if found else 0
    root = tempfile.mkdtemp(prefix="faults-clients-")
    # Loopback: the clients' view of a leader SIGKILL needs no network cut.
    c = Cluster(args.bin, root, args.base_port, use_netns=False)
    failed = []
    try:
        c.start()
        lp = matrix.create_topic(c, matrix.PARTITIONS)
        boot = c.bootstrap()
        stop_p, stop_c = threading.Event(), threading.Event()
        ck_acked, ck_errors, ck_seen, res = [], [], [], {}
        threads = [
            threading.Thread(target=lambda: res.update(ck=ck_producer(boot, stop_p, ck_acked, ck_errors))),
            threading.Thread(target=lambda: res.update(kc=kcat_producer(boot, stop_p, root))),
            threading.Thread(target=ck_consumer, args=(boot, stop_c, ck_seen)),
        ]
        for t in threads:
            t.start()
        # VerifiableProducer sets retries=0 unless told otherwise: the Java producer's own
        # defaults (retries MAX_INT, idempotence) are what applications run with.
        cfg = os.path.join(root, "java-producer.properties")
        with open(cfg, "w") as f:
            f.write("enable.idempotence=true\nretries=2147483647\ndelivery.timeout.ms=120000\n")
        java = matrix.Java(args.cp, root, "java-producer", "org.apache.kafka.tools.VerifiableProducer", [
            "--bootstrap-server", boot, "--topic", matrix.TOPIC, "--acks", "-1", "--throughput",
            str(RATE), "--repeating-keys", "60", "--value-prefix", "7", "--producer.config", cfg,
        ])
        kc_cons_out = open(os.path.join(root, "kcat-consumer.out"), "wb")
        kc_cons = subprocess.Popen(
            ["kcat", "-C", "-b", boot, "-t", matrix.TOPIC, "-o", "beginning", "-f", "%p %o %s\\n", "-u"],
            stdout=kc_cons_out, stderr=open(os.path.join(root, "kcat-consumer.err"), "wb"),
        )
        matrix.wait_first_acks(java, list(range(matrix.PARTITIONS)), limit_s=120)
        time.sleep(5)
        victim = lp[0][0]
        t = matrix.now_ms()
        c.kill(victim)
        took = matrix.wait_acks(java, t, [0])
        matrix.log(f"clients: leader {victim} SIGKILLed; Java producer acks again after {took} ms")
        c.start([victim])
        time.sleep(10)
        stop_p.set()
        threads[0].join(150)
        threads[1].join(150)
        java.stop()
        time.sleep(3)
        stop_c.set()
        threads[2].join(30)
        kc_cons.terminate()
        kc_cons.wait(10)
        log = matrix.read_back(c, matrix.PARTITIONS)
        at = {(p, o): v for p, o, v in log}
        count = Counter(v for _, _, v in log)
        java_acked, _, _, java_errors, _ = matrix.checker.parse_verifiable(java.lines())

        def check_acked(name, acked):
            for p, o, v, *_ in acked:
                if at.get((p, o)) != v:
                    failed.append(f"{name}: LOSS acknowledged p{p}@{o} {v}, log has {at.get((p, o))}")
                elif count[v] > 1:
                    failed.append(f"{name}: DUPLICATE {v} x{count[v]}")

        check_acked("confluent-kafka", ck_acked)
        check_acked("java", java_acked)
        kc_sent, kc_rc = res.get("kc", (0, None))
        kc_in_log = sum(1 for v in count if v.startswith("kc."))
        kc_dups = sum(1 for v, n in count.items() if v.startswith("kc.") and n > 1)
        if kc_dups:
            failed.append(f"kcat: {kc_dups} values in the log more than once")
        if kc_rc != 0:
            failed.append(f"kcat producer exit status {kc_rc}")
        for name, seen in (("confluent-kafka consumer", ck_seen),):
            bad = [(p, o, v) for p, o, v in seen if at.get((p, o)) != v]
            if bad:
                failed.append(f"{name}: {len(bad)} offsets with another value than the log, e.g. {bad[:3]}")
        kc_lines = [ln.split(" ", 2) for ln in open(os.path.join(root, "kcat-consumer.out"), errors="replace").read().splitlines()]
        kc_bad = [x for x in kc_lines if len(x) == 3 and at.get((int(x[0]), int(x[1]))) != x[2]]
        if kc_bad:
            failed.append(f"kcat consumer: {len(kc_bad)} offsets with another value than the log, e.g. {kc_bad[:3]}")
        final_ck = [e for e in ck_errors if e[0] == "delivery"]
        if final_ck:
            failed.append(f"confluent-kafka: {len(final_ck)} failed deliveries: {Counter(e[1] for e in final_ck)}")
        if java_errors:
            failed.append(f"java: {len(java_errors)} failed sends: {Counter(e.get('exception') for e in java_errors)}")
        summary = {
            "failover_ms_java": took,
            "confluent_kafka": {"sent": res.get("ck"), "acked": len(ck_acked),
                                "errors": dict(Counter(f"{e[0]} {e[1]} retriable={e[2]} fatal={e[3]}" for e in ck_errors))},
            "java": {"acked": len(java_acked), "errors": dict(classify_java(java.err_path))},
            "kcat": {"sent": kc_sent, "in_log": kc_in_log, "exit": kc_rc,
                     "errors": dict(classify_kcat(os.path.join(root, "kcat-producer.err")))},
            "consumers": {"confluent-kafka": len(ck_seen), "kcat": len(kc_lines)},
        }
        print(json.dumps(summary, indent=1))
    except Exception as e:  # noqa: BLE001
        failed.append(f"run failed: {e}")
    finally:
        c.close()
    for f in failed:
        print(f"FINDING: {f}")
    print("clients: " + ("FAILED" if failed else "ok") + f" (logs in {root})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
