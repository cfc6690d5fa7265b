#!/usr/bin/env bash
# Side-by-side performance run: Shardlog vs Apache Kafka 4.x on this machine, in one run.
#
#   perf/run.sh [--quick] [--only kafka|shardlog] [--workloads W1,W2,...] [--keep TMPDIR]
#
# 1. records the machine (cores, kernel, disk, memory) and its limits: fio O_DIRECT
#    sequential write (perf/fio.sh when present) and iperf3 over loopback;
# 2. starts each broker in turn on cpu 1 (Shardlog `serve --shards 1`, spinning off;
#    Kafka under `taskset -c 1`), own temp dirs, stopped by the script; the load generator
#    runs on cpu 0;
# 3. runs workloads W1-W6 (perf/README.md) with `shardlog bench` and Kafka's
#    ProducerPerformance as a neutral client;
# 4. writes perf/results/<date>-<commit>.md (table with ratios) and SVG latency plots.
#
# Bounded: about 15 minutes by default, under 3 minutes with --quick. Ports 29092-29199.
# Environment: KAFKA_SH (default perf/kafka/kafka.sh), SHARDLOG (binary with `serve` and
# `bench`, default target/release/shardlog), BENCH (command of the load generator, default
# "$SHARDLOG bench", falling back to target/release/examples/bench), CARGO_BUILD=0 to skip
# the release build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
QUICK=0
ONLY=""
WORKLOADS="W1,W2,W3,W4,W5,W6"
KEEP=""
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --only) ONLY="$2"; shift ;;
    --workloads) WORKLOADS="$2"; shift ;;
    --keep) KEEP="$2"; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

log() { echo "[perf $(date +%H:%M:%S)] $*" >&2; }
die() { log "error: $*"; exit 1; }
want() { [[ ",$WORKLOADS," == *",$1,"* ]]; }

# ------------------------------------------------------------------ parameters
if ((QUICK)); then
  DUR=3; WARM=1; W3_RATE=5000; W4_DUR=3; W5_BYTES=$((256 << 20)); W6_RATE=5000; FIO_S=2; IPERF_S=2
else
  DUR=25; WARM=5; W3_RATE=20000; W4_DUR=20; W5_BYTES=$((2 << 30)); W6_RATE=20000; FIO_S=10; IPERF_S=5
fi
RECORD=1024
KAFKA_PORT=29092
SHARDLOG_PORT=29093
IPERF_PORT=29150
BROKER_CPU=1
CLIENT_CPU=0
KAFKA_SH="${KAFKA_SH:-$ROOT/perf/kafka/kafka.sh}"
TMP="${KEEP:-$(mktemp -d /tmp/shardlog-perf.XXXXXX)}"
mkdir -p "$TMP"
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo nocommit)"
# A run of uncommitted code says so in its name.
git diff --quiet HEAD -- src Cargo.toml 2>/dev/null || COMMIT="$COMMIT-dirty"
STAMP="$(date -u +%Y-%m-%d)"
OUT_DIR="$ROOT/perf/results"
REPORT="$OUT_DIR/$STAMP-$COMMIT.md"
ART_DIR="$OUT_DIR/$STAMP-$COMMIT"
mkdir -p "$OUT_DIR" "$ART_DIR" "$TMP/res"
START_S=$(date +%s)

# ------------------------------------------------------------------ binaries
if [[ "${CARGO_BUILD:-1}" == 1 ]]; then
  log "building release binaries"
  cargo build --release --bin shardlog --example bench -q 2>&1 | tail -5 >&2 || true
fi
SHARDLOG="${SHARDLOG:-$ROOT/target/release/shardlog}"
if [[ -z "${BENCH:-}" ]]; then
  if "$SHARDLOG" bench --help >/dev/null 2>&1; then BENCH="$SHARDLOG bench"
  elif [[ -x "$ROOT/target/release/examples/bench" ]]; then BENCH="$ROOT/target/release/examples/bench"
  else die "no load generator: build with cargo build --release (shardlog bench)"; fi
fi
bench() { taskset -c "$CLIENT_CPU" $BENCH "$@"; }

# ------------------------------------------------------------------ cleanup
KAFKA_DIR="$TMP/kafka"
SHARDLOG_PID=""
cleanup() {
  stop_shardlog
  [[ -f "$KAFKA_DIR/kafka.pid" ]] && "$KAFKA_SH" stop --dir "$KAFKA_DIR" >/dev/null 2>&1 || true
  [[ -z "$KEEP" ]] && rm -rf "$TMP"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ 1. machine
machine() {
  local m="$TMP/res/machine.txt"
  {
    echo "cpu: $(nproc) online ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1))"
    echo "kernel: $(uname -sr)"
    echo "memory: $(free -m | awk '/^Mem:/ {print $2 " MiB"}')"
    echo "disk (temp dir): $(df -h "$TMP" | awk 'NR==2 {print $1 " " $2 " (" $6 ")"}')"
    echo "java: $(java -version 2>&1 | head -1)"
  } >"$m"
  log "measuring disk with fio and loopback with iperf3"
  # shellcheck source=perf/ensure_tools.sh
  source "$ROOT/perf/ensure_tools.sh"
  ensure_tool fio || log "fio missing: the disk's limits are not measured in this run"
  ensure_tool iperf3 || log "iperf3 missing: loopback bandwidth is not measured in this run"
  if [[ -x "$ROOT/perf/fio.sh" ]]; then
    "$ROOT/perf/fio.sh" "$TMP" >"$TMP/res/fio.txt" 2>&1 || echo "perf/fio.sh failed" >>"$TMP/res/fio.txt"
  elif command -v fio >/dev/null; then
    fio --name=seqwrite --filename="$TMP/fio.dat" --size=1g --rw=write --bs=1m --iodepth=8 \
      --ioengine=libaio --direct=1 --time_based --runtime="$FIO_S" --output-format=json \
      >"$TMP/res/fio-seq.json" 2>/dev/null || true
    fio --name=syncwrite --filename="$TMP/fio.dat" --size=256m --rw=write --bs=64k --iodepth=1 \
      --ioengine=sync --direct=1 --fdatasync=1 --time_based --runtime="$FIO_S" \
      --output-format=json >"$TMP/res/fio-sync.json" 2>/dev/null || true
    rm -f "$TMP/fio.dat"
  fi
  if command -v iperf3 >/dev/null; then
    iperf3 -s -1 -B 127.0.0.1 -p "$IPERF_PORT" >/dev/null 2>&1 &
    sleep 0.5
    iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -t "$IPERF_S" -J >"$TMP/res/iperf.json" 2>/dev/null || true
    wait || true
  fi
}

# ------------------------------------------------------------------ brokers
start_kafka() {
  rm -rf "$KAFKA_DIR"
  "$KAFKA_SH" start --port "$KAFKA_PORT" --dir "$KAFKA_DIR" --cpu "$BROKER_CPU" "$@" >"$TMP/kafka.pid"
  BROKER_PID="$(cat "$TMP/kafka.pid")"
}
# Data dirs go as soon as a broker stops: both brokers' data at once would not fit on
# a small disk.
stop_kafka() {
  "$KAFKA_SH" stop --dir "$KAFKA_DIR" >/dev/null 2>&1 || true
  rm -rf "$KAFKA_DIR/data"
}

start_shardlog() {
  local dir="$TMP/shardlog"
  rm -rf "$dir"; mkdir -p "$dir"
  taskset -c "$BROKER_CPU" "$SHARDLOG" serve --shards 1 --listen "127.0.0.1:$SHARDLOG_PORT" \
    --data-dir "$dir/data" --spin-before-park-us 0 >"$dir/server.log" 2>&1 &
  SHARDLOG_PID=$!
  BROKER_PID=$SHARDLOG_PID
  for _ in $(seq 1 100); do
    if (echo >"/dev/tcp/127.0.0.1/$SHARDLOG_PORT") 2>/dev/null; then return 0; fi
    kill -0 "$SHARDLOG_PID" 2>/dev/null || { tail -20 "$dir/server.log" >&2; die "shardlog exited"; }
    sleep 0.1
  done
  die "shardlog did not listen on $SHARDLOG_PORT"
}
stop_shardlog() {
  [[ -z "$SHARDLOG_PID" ]] && return 0
  kill "$SHARDLOG_PID" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$SHARDLOG_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$SHARDLOG_PID" 2>/dev/null || true
  wait "$SHARDLOG_PID" 2>/dev/null || true
  SHARDLOG_PID=""
  rm -rf "$TMP/shardlog/data"
}

# Broker process resources: RSS MiB and open file descriptors.
resources() {
  local pid="$1" rss fds
  rss=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$pid/status" 2>/dev/null || true)
  fds=$( (ls "/proc/$pid/fd" 2>/dev/null || true) | wc -l)
  echo "{\"rss_mib\": ${rss:-0}, \"open_fds\": ${fds:-0}}"
}

# Kafka's ProducerPerformance, pinned to the client cpu; writes its final line to $1.
producer_perf() {
  local out="$1" port="$2" topic="$3" records="$4" rate="$5" acks="$6"
  taskset -c "$CLIENT_CPU" "$KAFKA_SH" tool org.apache.kafka.tools.ProducerPerformance \
    --topic "$topic" --num-records "$records" --record-size "$RECORD" --throughput "$rate" \
    --producer-props "bootstrap.servers=127.0.0.1:$port" "acks=$acks" linger.ms=0 \
    enable.idempotence=false 2>"$out.err" | tail -1 >"$out" || echo "failed" >"$out"
}

# ------------------------------------------------------------------ 3. workloads
run_workloads() {
  local b="$1" port="$2" r="$TMP/res/$1"
  local bs="127.0.0.1:$port"
  mkdir -p "$r"
  local common=(--bootstrap "$bs" --record-size "$RECORD" --quiet)
  if want W1; then
    log "$b W1: max produce throughput, 1 KiB, 8 partitions, acks=1"
    bench produce "${common[@]}" --topic w1 --partitions 8 --acks 1 --duration "$DUR" \
      --warmup "$WARM" --label "$b W1" --json "$r/w1.json" --hgrm "$r/w1.hgrm" >"$r/w1.txt" 2>&1 \
      || log "$b W1 failed: $(tail -1 "$r/w1.txt")"
    # The same record count for both brokers: a third of what our client moved at Kafka's
    # W1 in DUR seconds (the JVM client is slower; this keeps the run bounded).
    local recs
    recs=$(python3 -c "import json;print(max(10000,min(2000000,int(json.load(open('$TMP/res/kafka/w1.json'))['records_per_s']*$DUR/3))))" 2>/dev/null || echo 100000)
    producer_perf "$r/w1-pp.txt" "$port" w1pp "$recs" -1 1
  fi
  if want W2; then
    local rate
    rate=$(python3 -c "import json;print(int(json.load(open('$TMP/res/kafka/w1.json'))['records_per_s']*0.5))" 2>/dev/null || echo 20000)
    echo "$rate" >"$r/w2-rate.txt"
    log "$b W2: produce latency at $rate rec/s (50% of Kafka's W1)"
    bench produce "${common[@]}" --topic w2 --partitions 8 --acks 1 --rate "$rate" --duration "$DUR" \
      --warmup "$WARM" --label "$b W2" --json "$r/w2.json" --hgrm "$r/w2.hgrm" >"$r/w2.txt" 2>&1 \
      || log "$b W2 failed: $(tail -1 "$r/w2.txt")"
    producer_perf "$r/w2-pp.txt" "$port" w2pp $((rate * DUR / 2)) "$rate" 1
  fi
  if want W3; then
    log "$b W3: acks=all, flush per batch (flush.messages=1), $W3_RATE rec/s"
    bench produce "${common[@]}" --topic w3 --partitions 8 --acks -1 --rate "$W3_RATE" \
      --topic-config flush.messages=1 --duration "$DUR" --warmup "$WARM" --label "$b W3" \
      --json "$r/w3.json" >"$r/w3.txt" 2>&1 || log "$b W3 failed: $(tail -1 "$r/w3.txt")"
  fi
  if want W4; then
    log "$b W4: 1,000 partitions, max produce throughput"
    bench produce "${common[@]}" --topic w4 --partitions 1000 --acks 1 --duration "$W4_DUR" \
      --warmup "$WARM" --label "$b W4" --json "$r/w4.json" >"$r/w4.txt" 2>&1 || log "$b W4 failed: $(tail -1 "$r/w4.txt")"
    resources "$BROKER_PID" >"$r/w4-resources.json"
  fi
  if want W5; then
    local n=$((W5_BYTES / RECORD))
    log "$b W5: write $((W5_BYTES >> 20)) MiB, then consume it from the start"
    bench produce "${common[@]}" --topic w5 --partitions 8 --acks 1 --records "$n" \
      --label "$b W5 write" --json "$r/w5-write.json" >"$r/w5-write.txt" 2>&1 || log "$b W5 write failed"
    bench consume --bootstrap "$bs" --quiet --topic w5 --from earliest --to-end \
      --label "$b W5" --json "$r/w5.json" >"$r/w5.txt" 2>&1 || log "$b W5 failed: $(tail -1 "$r/w5.txt")"
  fi
  if want W6; then
    log "$b W6: end-to-end latency at $W6_RATE rec/s"
    bench e2e "${common[@]}" --topic w6 --partitions 8 --acks 1 --rate "$W6_RATE" --duration "$DUR" \
      --warmup "$WARM" --fetch-max-wait-ms 100 --label "$b W6" --json "$r/w6.json" \
      --hgrm "$r/w6.hgrm" >"$r/w6.txt" 2>&1 || log "$b W6 failed: $(tail -1 "$r/w6.txt")"
  fi
  resources "$BROKER_PID" >"$r/resources.json"
}

free_gib=$(df -Pk "$TMP" | awk 'NR==2 {print int($4 / 1048576)}')
need_gib=$(( (W5_BYTES >> 30) * 3 + 3 ))
((free_gib >= need_gib)) || log "warning: $free_gib GiB free in $TMP, the run writes up to ~$need_gib GiB per broker"
machine
if [[ "$ONLY" != shardlog ]]; then
  [[ -x "$KAFKA_SH" ]] || die "$KAFKA_SH missing (the Kafka launcher)"
  log "starting Apache Kafka $("$KAFKA_SH" version 2>/dev/null) on cpu $BROKER_CPU"
  start_kafka
  run_workloads kafka "$KAFKA_PORT"
  stop_kafka
fi
if [[ "$ONLY" != kafka ]]; then
  if [[ -x "$SHARDLOG" ]] && "$SHARDLOG" serve --help >/dev/null 2>&1; then
    log "starting Shardlog (--shards 1) on cpu $BROKER_CPU"
    start_shardlog
    run_workloads shardlog "$SHARDLOG_PORT"
    stop_shardlog
  else
    log "no shardlog serve binary at $SHARDLOG: Shardlog column left empty"
  fi
fi

# ------------------------------------------------------------------ 4. report
log "writing $REPORT"
for w in w2 w6; do
  files=()
  for b in kafka shardlog; do [[ -f "$TMP/res/$b/$w.json" ]] && files+=("$TMP/res/$b/$w.json"); done
  if ((${#files[@]})); then
    $BENCH plot "${files[@]}" -o "$ART_DIR/$w.svg" \
      --title "${w^^} latency by percentile ($STAMP, $COMMIT)" >/dev/null || true
  fi
done
for b in kafka shardlog; do
  for f in "$TMP/res/$b"/*.hgrm "$TMP/res/$b"/*.json; do
    [[ -f "$f" ]] && cp "$f" "$ART_DIR/$b-$(basename "$f")"
  done
done
ELAPSED=$(($(date +%s) - START_S))
python3 - "$TMP/res" "$REPORT" "$COMMIT" "$QUICK" "$ELAPSED" "$BENCH" <<'PY'
import json, os, re, sys
res, report, commit, quick, elapsed, bench = sys.argv[1:7]
def j(b, name):
    try:
        return json.load(open(os.path.join(res, b, name)))
    except Exception:
        return None
def pp(b, name):
    try:
        line = open(os.path.join(res, b, name)).read()
    except Exception:
        return None
    m = re.search(r"([\d.]+) records/sec.*?([\d.]+) ms avg latency.*?([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th", line)
    if not m:
        return None
    return {"rps": float(m[1]), "avg": float(m[2]), "max": float(m[3]), "p50": int(m[4]), "p99": int(m[6]), "p999": int(m[7])}
def ratio(s, k, higher_better=True):
    if s is None or k is None or k == 0 or s == 0:
        return "n/a"
    r = s / k
    txt = f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"
    return txt + ("" if higher_better else " (lower is better)")
def fmt(v, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        v = f"{v:,.0f}" if v >= 100 else f"{v:.2f}"
    return f"{v}{unit}"
rows = []
def row(w, metric, kv, sv, hib=True):
    rows.append(f"| {w} | {metric} | {fmt(kv)} | {fmt(sv)} | {ratio(sv, kv, hib)} |")
def get(d, *path):
    for p in path:
        if d is None:
            return None
        d = d.get(p) if isinstance(d, dict) else None
    return d
K, S = "kafka", "shardlog"
for w, title in [("w1", "W1 max produce"), ("w2", "W2 produce @50% Kafka W1"), ("w3", "W3 acks=all+flush"),
                 ("w4", "W4 1,000 partitions"), ("w5", "W5 consume catch-up"), ("w6", "W6 end-to-end")]:
    k, s = j(K, w + ".json"), j(S, w + ".json")
    if k is None and s is None:
        continue
    if w in ("w1", "w4", "w5"):
        row(title, "records/s", get(k, "records_per_s"), get(s, "records_per_s"))
        row(title, "MiB/s", get(k, "mib_per_s"), get(s, "mib_per_s"))
    else:
        # Below the target rate means the broker saturated: latency then grows with time.
        row(title, "records/s achieved", get(k, "records_per_s"), get(s, "records_per_s"))
    for p, name in [("p50", "p50"), ("p99", "p99"), ("p9999", "p99.99"), ("max", "max")]:
        if w in ("w1", "w4", "w5") and p not in ("p50", "p99"):
            continue
        row(title, f"{name} µs", get(k, "latency_us", p), get(s, "latency_us", p), False)
    row(title, "client CPU % of a core", get(k, "cpu_pct_of_core"), get(s, "cpu_pct_of_core"), False)
    errs = lambda d: sum((d or {}).get("errors", {}).values()) if d else None
    if errs(k) or errs(s):
        row(title, "errors", errs(k), errs(s), False)
    for b, tag in ((k, K), (s, S)):
        if b and b.get("target_rate"):
            row(title, "target rate rec/s", get(k, "target_rate"), get(s, "target_rate"))
            break
for w, title in [("w1-pp.txt", "W1 via ProducerPerformance"), ("w2-pp.txt", "W2 via ProducerPerformance")]:
    k, s = pp(K, w), pp(S, w)
    if k is None and s is None:
        continue
    row(title, "records/s", get(k, "rps"), get(s, "rps"))
    row(title, "p99 ms (not CO-corrected)", get(k, "p99"), get(s, "p99"), False)
for b in (K, S):
    r = j(b, "w4-resources.json")
    if r:
        rows.append(f"| W4 1,000 partitions | {b} broker RSS MiB / open fds | {r['rss_mib']} / {r['open_fds']} | | |")
def machine():
    out = []
    try:
        out += ["    " + l for l in open(os.path.join(res, "machine.txt")).read().splitlines()]
    except Exception:
        pass
    try:
        f = json.load(open(os.path.join(res, "fio-seq.json")))["jobs"][0]["write"]
        out.append(f"    fio O_DIRECT seq write 1 MiB qd8: {f['bw_bytes']/2**20:,.0f} MiB/s")
    except Exception:
        pass
    try:
        f = json.load(open(os.path.join(res, "fio-sync.json")))["jobs"][0]
        w = f["write"]; sync = f.get("sync", {}).get("lat_ns", {}).get("percentile", {})
        p50 = sync.get("50.000000")
        out.append(f"    fio 64 KiB write + fdatasync: {w['bw_bytes']/2**20:,.0f} MiB/s"
                   + (f", fdatasync p50 {p50/1000:.0f} µs" if p50 else ""))
    except Exception:
        pass
    try:
        out += ["    " + l for l in open(os.path.join(res, "fio.txt")).read().splitlines()[-6:]]
    except Exception:
        pass
    try:
        i = json.load(open(os.path.join(res, "iperf.json")))
        out.append(f"    iperf3 loopback one stream: {i['end']['sum_received']['bits_per_second']/8/2**30:.2f} GiB/s")
    except Exception:
        pass
    return "\n".join(out)
w2rate = None
try:
    w2rate = open(os.path.join(res, "kafka", "w2-rate.txt")).read().strip()
except Exception:
    pass
text = f"""# Shardlog vs Apache Kafka — {os.path.basename(report)[:-3]}

Commit `{commit}`, {'--quick' if quick == '1' else 'full'} run, {elapsed} s. Command: `perf/run.sh{' --quick' if quick == '1' else ''}`.
Load generator: `{bench}` (closed loop unless a rate is given; open-loop latency measured from
the intended send time, coordinated omission corrected). Neutral client: Kafka's
`ProducerPerformance` (latency not CO-corrected).

**CPU split** (2 cores): broker on cpu 1 (Shardlog `serve --shards 1 --spin-before-park-us 0`;
Kafka JVM under `taskset -c 1`), load generator on cpu 0 (`taskset -c 0`). Brokers run one
after the other, never at once.

**Durability**: Kafka with its defaults (acks as listed, no fsync: the page cache flushes).
Shardlog with its defaults (O_DIRECT writes, its documented flush policy). W3 sets the topic
config `flush.messages=1` on both (fsync per batch) with acks=all.

## Machine and its limits
{machine()}

## Results (ratio = Shardlog ÷ Kafka)
W2 target rate: {w2rate or 'n/a'} rec/s (50% of Kafka's W1 throughput).

| workload | metric | Kafka | Shardlog | ratio |
|---|---|---|---|---|
""" + "\n".join(rows) + f"""

Plots: [W2]({os.path.basename(report)[:-3]}/w2.svg), [W6]({os.path.basename(report)[:-3]}/w6.svg);
HdrHistogram distributions (`*.hgrm`) and `--json` results in `{os.path.basename(report)[:-3]}/`.
"""
open(report, "w").write(text)
print(text)
PY
log "done in $ELAPSED s: $REPORT"
