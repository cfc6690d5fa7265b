#!/usr/bin/env python3
"""A long soak of one Shardlog broker (issue 19): mixed load for an hour, a SIGKILL every
ten minutes, then a check that nothing acknowledged was lost, that memory and open files
stayed flat within each process lifetime, and that every ERROR line logged is expected.

Run by perf/soak.sh (which builds the broker and picks the Python environment). Not in CI:
it takes an hour. Everything it starts is stopped on exit; every wait is bounded.

Load, all at once:
  * one idempotent acks=all producer per codec (none, gzip, snappy, lz4, zstd) writing
    numbered records to `soak-verify`; each acknowledgement (partition, offset, value) is
    appended to acked-<codec>.tsv, the ground truth of the loss check;
  * `shardlog bench produce` bursts on `soak-load` (retention.bytes small, so retention
    deletes segments all the time) and on `soak-compact` (compacted, few keys, small
    segments, so the cleaner runs all the time), each codec in turn;
  * consumer-group members that join `soak-group`, read `soak-load` for a while, commit,
    and leave, one every few seconds, two or three at once.

Checks at the end:
  * every acknowledged record of `soak-verify` is read back at its acknowledged offset with
    its value, once (a duplicate value at two offsets is reported too: the producers are
    idempotent, so after a kill they must not write a record twice);
  * per process lifetime, after a warm-up (two minutes, and until the batch cache first
    reaches 95% of its largest size in the lifetime: it fills up to its fixed per-shard bound
    by design), RSS and open files grow < 5% (median of the first minute after warm-up to
    median of the last minute), the issue's criterion. Reported beside, not gating: RSS minus
    the cache (`shardlog_batch_cache_bytes`), the live heap and its part outside the cache,
    and the allocator's slack. (Until 2026-12-03 the gate was RSS minus the cache < 5%, chosen
    when the cache still filled after the warm-up; on its ~66 MiB base that limit is ~3 MiB,
    inside the ±3 MiB the in-flight requests of the load's phases move the live heap.)
  * every ERROR line of the broker's log matches the allowlist below.
"""

import argparse
import json
import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
VERIFY_TOPIC = "soak-verify"
VERIFY_PARTITIONS = 8
WARMUP_S = 120
GROWTH_LIMIT = 0.05
# Growth compares the median of the first and of the last minute after warm-up, not two
# single samples: one sample can catch a transient (a bench burst's requests in flight, a
# large fetch response being built) that moves RSS by ~5% and is gone 5 s later.
WINDOW_S = 60
# Warm-up also lasts until the batch cache first reaches this share of the largest size it
# has in the lifetime: while the cache fills, the heap around it grows with it (allocator
# metadata and free pages in proportion to the heap) and is not yet at its steady size.
CACHE_FULL_SHARE = 0.95
# Gauges sampled with RSS (KiB in samples.tsv): the batch cache, and jemalloc's live heap
# and resident bytes, which split RSS into live memory and the allocator's unpurged pages.
SAMPLED_GAUGES = ("shardlog_batch_cache_bytes", "shardlog_allocator_allocated_bytes",
                  "shardlog_allocator_resident_bytes", "shardlog_allocator_active_bytes")

# ERROR lines a SIGKILL every ten minutes is expected to cause; anything else fails the run.
ERROR_ALLOWLIST = [
    # none expected today: recovery after a kill logs WARN/INFO, not ERROR.
]


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Broker:
    """One broker process; restarted on the same data dir after each kill."""

    def __init__(self, binary, data_dir, port, admin_port, log_path):
        self.binary, self.data_dir, self.port, self.admin_port = binary, data_dir, port, admin_port
        self.log_path = log_path
        self.proc = None
        # One list per process of (t, rss_kib, fds, cache_kib, allocated_kib, resident_kib,
        # active_kib).
        self.lifetimes = []
        self.samples_file = None

    def start(self):
        # A killed broker's listening socket can outlive the process for a moment (its
        # io_uring is torn down asynchronously): wait for the port to be free, bounded.
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError:
                break
            if time.time() > deadline:
                raise SystemExit(f"port {self.port} is still served by another process")
            time.sleep(0.2)
        logf = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}",
             "--admin-listen", f"127.0.0.1:{self.admin_port}", "--data-dir", self.data_dir,
             "--shards", "2", "--log-level", "info",
             "--log-cleaner-backoff-ms", "2000", "--log-retention-check-interval-ms", "5000",
             "--log-segment-delete-delay-ms", "10000"],
            stdout=logf, stderr=logf)
        self.lifetimes.append([])
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise SystemExit(f"broker exited with {self.proc.returncode}; see {self.log_path}")
                time.sleep(0.2)
        raise SystemExit(f"broker did not listen within 60 s; see {self.log_path}")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=70)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def sample(self):
        if not self.proc or self.proc.poll() is not None:
            return
        pid = self.proc.pid
        try:
            rss = 0
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except (FileNotFoundError, ProcessLookupError):
            return
        m = self.metrics_kib()
        sample = (time.time(), rss, fds, m.get("shardlog_batch_cache_bytes", 0),
                  m.get("shardlog_allocator_allocated_bytes", 0),
                  m.get("shardlog_allocator_resident_bytes", 0),
                  m.get("shardlog_allocator_active_bytes", 0))
        self.lifetimes[-1].append(sample)
        if self.samples_file:
            self.samples_file.write("\t".join(str(round(v)) for v in
                                               (sample[0], len(self.lifetimes) - 1) + sample[1:]))
            self.samples_file.write("\n")
            self.samples_file.flush()

    def metrics_kib(self):
        """The gauges of SAMPLED_GAUGES from /metrics, in KiB; empty if unreachable."""
        try:
            with socket.create_connection(("127.0.0.1", self.admin_port), timeout=2) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                body = b""
                while chunk := s.recv(65536):
                    body += chunk
        except OSError:
            return {}
        out = {}
        for line in body.decode(errors="replace").splitlines():
            name, _, value = line.partition(" ")
            if name in SAMPLED_GAUGES:
                out[name] = int(float(value)) // 1024
        return out


def create_topics(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(VERIFY_TOPIC, VERIFY_PARTITIONS, 1),
        NewTopic("soak-load", 4, 1, config={"retention.bytes": str(64 << 20),
                                             "segment.bytes": str(16 << 20)}),
        NewTopic("soak-compact", 2, 1, config={"cleanup.policy": "compact",
                                                "segment.bytes": str(4 << 20),
                                                "min.cleanable.dirty.ratio": "0.1",
                                                "delete.retention.ms": "60000"}),
    ]
    for topic, fut in admin.create_topics(topics).items():
        try:
            fut.result(30)
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise


def verified_producer(bootstrap, codec, out_dir, stop, rate_per_s, stats):
    """Numbered records; each acknowledgement is written to acked-<codec>.tsv."""
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "compression.type": codec, "linger.ms": 5, "message.timeout.ms": 120000,
            "retry.backoff.ms": 200}
    if os.environ.get("SOAK_CLIENT_DEBUG") == "1":
        # librdkafka's idempotence and per-batch log (base sequence, epoch, each produce
        # answer's error) to rdkafka-<codec>.log, to trace a duplicate to the retry that
        # wrote it (issue 19). About 100 MB per producer and hour.
        logger = logging.getLogger(f"rdkafka-{codec}")
        handler = logging.FileHandler(os.path.join(out_dir, f"rdkafka-{codec}.log"))
        handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        conf.update({"debug": "eos,msg", "logger": logger})
    p = Producer(conf)
    acked = open(os.path.join(out_dir, f"acked-{codec}.tsv"), "a")
    errors = stats.setdefault(f"produce_errors_{codec}", {})

    def on_delivery(err, msg):
        if err is not None:
            errors[err.name()] = errors.get(err.name(), 0) + 1
            return
        acked.write(f"{msg.partition()}\t{msg.offset()}\t{msg.value().decode()}\n")

    seq = 0
    interval = 1.0 / rate_per_s
    next_t = time.time()
    while not stop.is_set():
        try:
            p.produce(VERIFY_TOPIC, value=f"{codec}-{seq}".encode(), on_delivery=on_delivery)
            seq += 1
        except BufferError:
            p.poll(0.1)
            continue
        p.poll(0)
        next_t += interval
        delay = next_t - time.time()
        if delay > 0:
            time.sleep(delay)
    p.flush(150)
    acked.close()
    stats[f"produced_{codec}"] = seq


def bench_bursts(binary, bootstrap, stop, stats):
    """`shardlog bench produce` bursts on the retention and the compaction topics."""
    i = 0
    while not stop.is_set():
        codec = CODECS[i % len(CODECS)]
        topic = "soak-load" if i % 2 == 0 else "soak-compact"
        log(f"bench burst {i}: {topic} {codec}")
        cmd = [binary, "bench", "produce", "--bootstrap-server", bootstrap, "--topic", topic,
               "--duration", "20", "--rate", "3000", "--record-size", "512",
               "--compression", codec, "--acks", "1"]
        if topic == "soak-compact":
            cmd += ["--keys", "500", "--key-size", "16"]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        key = "bench_ok" if r.returncode == 0 else "bench_failed"
        stats[key] = stats.get(key, 0) + 1
        if r.returncode != 0:
            # A burst cut by a kill fails (the bench client does not retry); keep the reasons.
            why = stats.setdefault("bench_failures", {})
            line = (r.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1][:160]
            why[line] = why.get(line, 0) + 1
        i += 1
        stop.wait(5)


def group_member(bootstrap, stop, stats, member_no):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-group",
                  "client.id": f"soak-member-{member_no}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
                  "session.timeout.ms": 10000})
    c.subscribe(["soak-load"])
    until = time.time() + random.uniform(10, 60)
    n = 0
    while time.time() < until and not stop.is_set():
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            n += 1
    try:
        c.commit(asynchronous=False)
    except KafkaException:
        pass
    c.close()
    stats["group_members"] = stats.get("group_members", 0) + 1
    stats["group_records"] = stats.get("group_records", 0) + n


def group_churn(bootstrap, stop, stats):
    n = 0
    live = []
    while not stop.is_set():
        live = [t for t in live if t.is_alive()]
        if len(live) < 3:
            t = threading.Thread(target=group_member, args=(bootstrap, stop, stats, n), daemon=True)
            t.start()
            live.append(t)
            n += 1
        stop.wait(random.uniform(3, 8))
    for t in live:
        t.join(90)


def read_back(bootstrap, timeout_s=600):
    """Every record of soak-verify as {(partition, offset): value}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-check-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ends = {}
    for p in range(VERIFY_PARTITIONS):
        deadline = time.time() + 60
        while True:  # a broker just restarted answers NOT_LEADER while it opens the logs
            try:
                lo, hi = c.get_watermark_offsets(TopicPartition(VERIFY_TOPIC, p), timeout=30)
                break
            except KafkaException:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        ends[p] = hi
    c.assign([TopicPartition(VERIFY_TOPIC, p, 0) for p in range(VERIFY_PARTITIONS)])
    seen = {}
    done = {p for p, hi in ends.items() if hi == 0}
    deadline = time.time() + timeout_s
    while len(done) < VERIFY_PARTITIONS and time.time() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error():
                continue
            seen[(m.partition(), m.offset())] = m.value().decode()
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
    c.close()
    return seen, ends


def check_loss(out_dir, seen):
    missing, wrong, acked_n, unknown_offset = [], [], 0, []
    for codec in CODECS:
        path = os.path.join(out_dir, f"acked-{codec}.tsv")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                p, o, v = line.rstrip("\n").split("\t")
                acked_n += 1
                if o == "None":
                    # Acknowledged without an offset: librdkafka's report for a retried batch
                    # the broker answered as a duplicate. It must be in the log, once.
                    unknown_offset.append(v)
                    continue
                got = seen.get((int(p), int(o)))
                if got is None:
                    missing.append((p, o, v))
                elif got != v:
                    wrong.append((p, o, v, got))
    by_value = {}
    for key, v in seen.items():
        by_value.setdefault(v, []).append(key)
    missing.extend(("?", "?", v) for v in unknown_offset if v not in by_value)
    dups = {v: k for v, k in by_value.items() if len(k) > 1}
    return acked_n, missing, wrong, dups


def check_growth(lifetimes):
    rows = []
    ok = True
    for i, samples in enumerate(lifetimes):
        if not samples:
            continue
        t0 = samples[0][0]
        cache_max = max(s[3] for s in samples)
        full_at = next(s[0] for s in samples if s[3] >= CACHE_FULL_SHARE * cache_max)
        start = max(t0 + WARMUP_S, full_at)
        warm = [s for s in samples if s[0] >= start]
        if len(warm) < 2 or warm[-1][0] - warm[0][0] < 2 * WINDOW_S:
            rows.append({"lifetime": i, "verdict": "shorter than the warm-up",
                         "last_rss_kib": samples[-1][1], "last_fds": samples[-1][2]})
            continue
        first = [s for s in warm if s[0] - warm[0][0] <= WINDOW_S]
        last = [s for s in warm if warm[-1][0] - s[0] <= WINDOW_S]

        def med(rows_, f):
            v = sorted(f(s) for s in rows_)
            return v[len(v) // 2]

        rss0, fd0 = med(first, lambda s: s[1]), med(first, lambda s: s[2])
        rss1, fd1 = med(last, lambda s: s[1]), med(last, lambda s: s[2])
        other0, other1 = med(first, lambda s: s[1] - s[3]), med(last, lambda s: s[1] - s[3])
        other_g = (other1 - other0) / max(other0, 1)
        rss_g = (rss1 - rss0) / max(rss0, 1)
        fd_g = (fd1 - fd0) / max(fd0, 1)
        verdict = "ok" if rss_g < GROWTH_LIMIT and fd_g < GROWTH_LIMIT else "GROWTH"
        ok &= verdict == "ok"
        rows.append({"lifetime": i, "verdict": verdict, "seconds": round(warm[-1][0] - t0),
                     "warmup_end_s": round(start - t0),
                     "non_cache_kib_after_warmup": other0, "non_cache_kib_end": other1,
                     "non_cache_growth": round(other_g, 4),
                     "cache_kib_after_warmup": med(first, lambda s: s[3]),
                     "cache_kib_end": med(last, lambda s: s[3]),
                     "rss_kib_after_warmup": rss0, "rss_kib_end": rss1,
                     "rss_kib_max": max(s[1] for s in warm), "rss_growth": round(rss_g, 4),
                     "heap_kib_after_warmup": med(first, lambda s: s[4]),
                     "heap_kib_end": med(last, lambda s: s[4]),
                     "heap_kib_max": max(s[4] for s in warm),
                     "heap_outside_cache_kib_after_warmup": med(first, lambda s: s[4] - s[3]),
                     "heap_outside_cache_kib_end": med(last, lambda s: s[4] - s[3]),
                     "allocator_slack_kib_after_warmup": med(first, lambda s: s[1] - s[4]),
                     "allocator_slack_kib_end": med(last, lambda s: s[1] - s[4]),
                     "jemalloc_resident_kib_end": med(last, lambda s: s[5]),
                     "fds_after_warmup": fd0, "fds_end": fd1, "fds_max": max(s[2] for s in warm),
                     "fd_growth": round(fd_g, 4)})
    return ok, rows


def check_errors(log_path):
    bad = []
    with open(log_path, errors="replace") as f:
        for line in f:
            if " ERROR " in line or line.startswith("ERROR"):
                if not any(re.search(p, line) for p in ERROR_ALLOWLIST):
                    bad.append(line.rstrip())
    return bad


def check_only(args):
    """The loss check of an earlier run's data dir (its acked-*.tsv and data/)."""
    broker = Broker(args.binary, os.path.join(args.out, "data"), args.port, args.port + 1,
                    os.path.join(args.out, "broker-check.log"))
    broker.start()
    try:
        seen, _ = read_back(f"127.0.0.1:{args.port}")
    finally:
        broker.stop()
    acked_n, missing, wrong, dups = check_loss(args.out, seen)
    log(f"check only: acked {acked_n}, read back {len(seen)}, missing {len(missing)}, "
        f"wrong {len(wrong)}, duplicates {len(dups)}")
    sys.exit(0 if not missing and not wrong and not dups else 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--duration-s", type=int, default=3600)
    ap.add_argument("--kill-every-s", type=int, default=600)
    ap.add_argument("--port", type=int, default=29393)
    ap.add_argument("--verify-rate", type=int, default=200, help="records/s per codec")
    ap.add_argument("--check-only", action="store_true",
                    help="restart the broker on --out's data and run the loss check only")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.check_only:
        return check_only(args)
    data_dir = os.path.join(args.out, "data")
    broker = Broker(args.binary, data_dir, args.port, args.port + 1,
                    os.path.join(args.out, "broker.log"))
    bootstrap = f"127.0.0.1:{args.port}"
    stop = threading.Event()
    stats = {}
    kills = []
    broker.samples_file = open(os.path.join(args.out, "samples.tsv"), "a")
    broker.samples_file.write("t\tlifetime\trss_kib\tfds\tcache_kib\tallocated_kib\tresident_kib"
                             "\tactive_kib\n")
    broker.start()
    try:
        create_topics(bootstrap)
        workers = [threading.Thread(target=verified_producer,
                                    args=(bootstrap, c, args.out, stop, args.verify_rate, stats))
                   for c in CODECS]
        workers.append(threading.Thread(target=bench_bursts,
                                        args=(args.binary, bootstrap, stop, stats)))
        workers.append(threading.Thread(target=group_churn, args=(bootstrap, stop, stats)))
        for w in workers:
            w.start()
        start = time.time()
        next_kill = start + args.kill_every_s
        last_report = start
        while time.time() - start < args.duration_s:
            broker.sample()
            now = time.time()
            if now >= next_kill and now - start < args.duration_s - 60:
                log(f"SIGKILL broker pid {broker.proc.pid}")
                broker.kill()
                t = time.time()
                broker.start()
                kills.append({"at_s": round(t - start), "restart_s": round(time.time() - t, 2)})
                log(f"restarted in {kills[-1]['restart_s']} s")
                next_kill += args.kill_every_s
            if now - last_report >= 60:
                s = broker.lifetimes[-1][-1] if broker.lifetimes[-1] else None
                log(f"t={round(now - start)} s rss={s and s[1]} KiB cache={s and s[3]} KiB "
                    f"heap={s and s[4]} KiB jemalloc_resident={s and s[5]} KiB "
                    f"fds={s and s[2]} "
                    f"bench_ok={stats.get('bench_ok', 0)} members={stats.get('group_members', 0)}")
                last_report = now
            time.sleep(5)
        log("load stops; draining producers")
        stop.set()
        for w in workers:
            w.join(300)
        broker.sample()
        seen, ends = read_back(bootstrap)
        acked_n, missing, wrong, dups = check_loss(args.out, seen)
        growth_ok, rows = check_growth(broker.lifetimes)
    finally:
        stop.set()
        broker.stop()
    bad_errors = check_errors(broker.log_path)
    result = {
        "duration_s": args.duration_s, "kills": kills, "acked": acked_n,
        "read_back": len(seen), "log_end_offsets": ends, "missing": len(missing),
        "wrong_value": len(wrong), "duplicates": len(dups), "growth_ok": growth_ok,
        "lifetimes": rows, "unexpected_errors": len(bad_errors), "stats": stats,
        "missing_sample": missing[:20], "wrong_sample": wrong[:20],
        "duplicate_sample": list(dups.items())[:20], "error_sample": bad_errors[:20],
    }
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    passed = not missing and not wrong and not dups and growth_ok and not bad_errors
    log(f"acked {acked_n}, missing {len(missing)}, wrong {len(wrong)}, duplicates {len(dups)}, "
        f"growth ok {growth_ok}, unexpected ERROR lines {len(bad_errors)}: "
        f"{'PASS' if passed else 'FAIL'}")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
