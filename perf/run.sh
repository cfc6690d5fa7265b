#!/usr/bin/env bash
# Side-by-side performance run: Shardlog vs Apache Kafka 4.x on this machine, in one run.
#
#   perf/run.sh [--quick] [--only kafka|shardlog] [--workloads W1,W2,...] [--reps N]
#               [--keep TMPDIR]
#
# 1. records the machine (cores, kernel, disk, memory), its load average, and its limits:
#    fio O_DIRECT sequential write (perf/fio.sh when present) and iperf3 over loopback;
# 2. starts both brokers on cpu 1 (Shardlog `serve --shards 1`, spinning off; Kafka under
#    `taskset -c 1`), own temp dirs, stopped by the script; the load generator runs on cpu 0;
# 3. runs workloads W1-W6 (perf/README.md) with `shardlog bench`, and W1, W2 and W5 also
#    with Kafka's Java client (ProducerPerformance, ConsumerPerformance) and librdkafka
#    (perf/clients/rdkafka_perf.py, confluent-kafka; W5 also librdkafka's C client
#    rdkafka_performance, built by perf/clients/rdkafka_performance.sh; W2 also the C client
#    perf/clients/rdkafka_latency.c), each workload N times
#    (default 3) per broker,
#    interleaved Kafka, Shardlog, Kafka, Shardlog, ... (one broker loaded at a time, a fresh
#    topic per run), so a ratio is never one noisy sample;
# 4. writes perf/results/<date>-<commit>.md: per metric the median and [min–max] of the
#    runs, the ratio of medians, which targets are met, and SVG latency plots.
#
# Bounded: about 40 minutes by default, under 10 minutes with --quick. Ports 29092-29199.
# Environment: KAFKA_SH (default perf/kafka/kafka.sh), SHARDLOG (binary with `serve` and
# `bench`, default target/release/shardlog), BENCH (command of the load generator, default
# "$SHARDLOG bench", falling back to target/release/examples/bench), CARGO_BUILD=0 to skip
# the release build, PERF_KAFKA_PORT / PERF_SHARDLOG_PORT / PERF_IPERF_PORT to move the ports,
# PERF_SHARDLOG_ARGS for extra `shardlog serve` flags (e.g. "--cache-bytes 3GiB").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
QUICK=0
ONLY=""
WORKLOADS="W1,W2,W3,W4,W5,W6"
SETTLE_S=3  # after each run: deleted topics removed, dirty pages written back
KEEP=""
REPS=3
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --only) ONLY="$2"; shift ;;
    --workloads) WORKLOADS="$2"; shift ;;
    --keep) KEEP="$2"; shift ;;
    --reps) REPS="$2"; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
# Overridable so concurrent runs (or a port block per session) do not collide.
KAFKA_PORT="${PERF_KAFKA_PORT:-29092}"
SHARDLOG_PORT="${PERF_SHARDLOG_PORT:-29093}"
IPERF_PORT="${PERF_IPERF_PORT:-29150}"
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
    echo "load average at start (1/5/15 min; other work on the host): $(cut -d' ' -f1-3 /proc/loadavg)"
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
  # Deleted topics' files go after 1 s instead of a minute (the run deletes each run's
  # topics to stay within the disk).
  "$KAFKA_SH" start --port "$KAFKA_PORT" --dir "$KAFKA_DIR" --cpu "$BROKER_CPU" \
    --set log.segment.delete.delay.ms=1000 "$@" >"$TMP/kafka.pid"
  BROKER_PID="$(cat "$TMP/kafka.pid")"
}
# Data dirs go as soon as a broker stops: both brokers' data at once would not fit on
# a small disk.
stop_kafka() {
  "$KAFKA_SH" stop --dir "$KAFKA_DIR" >/dev/null 2>&1 || true
  rm -rf "$KAFKA_DIR/data"
}

start_shardlog() { # [keep]: start on the data directory left by restart_shardlog
  local dir="$TMP/shardlog"
  [[ "${1:-}" == keep ]] || { rm -rf "$dir"; mkdir -p "$dir"; }
  taskset -c "$BROKER_CPU" "$SHARDLOG" serve --shards 1 --listen "127.0.0.1:$SHARDLOG_PORT" \
    --data-dir "$dir/data" --spin-before-park-us 0 ${PERF_SHARDLOG_ARGS:-} >"$dir/server.log" 2>&1 &
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

# Shardlog stopped cleanly and started again on the same data: its batch cache empty, the
# equivalent of dropping Kafka's page cache (its cache holds up to an eighth of memory, so
# a written W5 would otherwise still be in it).
restart_shardlog() {
  kill "$SHARDLOG_PID" 2>/dev/null || true
  for _ in $(seq 1 300); do kill -0 "$SHARDLOG_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SHARDLOG_PID" 2>/dev/null && die "shardlog did not stop within 30 s"
  wait "$SHARDLOG_PID" 2>/dev/null || true
  start_shardlog keep
}

# Broker process resources: RSS MiB and open file descriptors.
resources() {
  local pid="$1" rss fds
  rss=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$pid/status" 2>/dev/null || true)
  fds=$( (ls "/proc/$pid/fd" 2>/dev/null || true) | wc -l)
  echo "{\"rss_mib\": ${rss:-0}, \"open_fds\": ${fds:-0}}"
}

# Kafka's ProducerPerformance, pinned to the client cpu; writes its final line to $1 and
# the client's CPU (user + system s, wall s, JVM start-up included) to $1.cpu.
producer_perf() {
  local out="$1" port="$2" topic="$3" records="$4" rate="$5" acks="$6"
  topic_create "$port" "$topic"
  /usr/bin/time -f "%U %S %e" -o "$out.cpu" taskset -c "$CLIENT_CPU" "$KAFKA_SH" tool \
    org.apache.kafka.tools.ProducerPerformance \
    --topic "$topic" --num-records "$records" --record-size "$RECORD" --throughput "$rate" \
    --producer-props "bootstrap.servers=127.0.0.1:$port" "acks=$acks" linger.ms=0 \
    enable.idempotence=false 2>"$out.err" | tail -1 >"$out" || echo "failed" >"$out"
}

# Kafka's Java consumer (ConsumerPerformance) reading $4 records of topic $3 from the
# earliest offset; its CSV result line to $1, its CPU to $1.cpu.
consumer_perf() {
  local out="$1" port="$2" topic="$3" records="$4"
  /usr/bin/time -f "%U %S %e" -o "$out.cpu" taskset -c "$CLIENT_CPU" "$KAFKA_SH" tool \
    org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "127.0.0.1:$port" \
    --topic "$topic" --messages "$records" --timeout 60000 --group "jperf-$topic-$RANDOM" \
    2>"$out.err" | tail -1 >"$out" || echo "failed" >"$out"
}

# librdkafka through confluent-kafka (perf/clients/rdkafka_perf.py); skipped, with a log
# line, when no Python with confluent_kafka is found (PERF_PYTHON, then the interop venv).
RDK_PY="${PERF_PYTHON:-}"
if [[ -z "$RDK_PY" ]]; then
  for c in "$ROOT/.interop-cache/venv/bin/python" python3; do
    if "$c" -c "import confluent_kafka" 2>/dev/null; then RDK_PY="$c"; break; fi
  done
fi
rdkafka() { # mode out port topic records [rate [-X key=value...]]
  local mode="$1" out="$2" port="$3" topic="$4" records="$5" rate="${6:-0}"
  shift $(($# < 6 ? $# : 6))
  [[ -n "$RDK_PY" ]] || return 0
  [[ "$mode" == produce ]] && topic_create "$port" "$topic"
  taskset -c "$CLIENT_CPU" "$RDK_PY" "$ROOT/perf/clients/rdkafka_perf.py" "$mode" \
    --bootstrap "127.0.0.1:$port" --topic "$topic" --records "$records" --rate "$rate" \
    --record-size "$RECORD" --json "$out" "$@" >"${out%.json}.txt" 2>&1 \
    || log "librdkafka $mode on $topic failed: $(tail -1 "${out%.json}.txt")"
}

# librdkafka's own C load client (perf/clients/rdkafka_performance.sh builds it once):
# the 8 partitions from the start, N records; its "consumed in" line becomes bench-style
# JSON with the client's CPU from /usr/bin/time. Skipped, with a log line, if it cannot
# be built.
# A C client's binary in the variable named VAR, built by perf/clients/SCRIPT on first use;
# after a failed build VAR holds "none", the failure is logged once, and this returns 1.
c_client() { # var script what
  local -n bin="$1"
  if [[ -z "$bin" ]]; then
    bin="$("$ROOT/perf/clients/$2")" || { bin="none"; log "${2%.sh} unavailable: $3 not measured"; }
  fi
  [[ "$bin" != none ]]
}
RDK_PERF=""
rdkperf_consume() { # out port topic records
  local out="$1" port="$2" topic="$3" records="$4"
  c_client RDK_PERF rdkafka_performance.sh "W5 C client" || return 0
  /usr/bin/time -f "%U %S %e" -o "${out%.json}.txt.cpu" taskset -c "$CLIENT_CPU" timeout 120 "$RDK_PERF" -C -t "$topic" \
    -p 0 -p 1 -p 2 -p 3 -p 4 -p 5 -p 6 -p 7 -b "127.0.0.1:$port" -o beginning -c "$records" -q \
    >"${out%.json}.txt" 2>&1 || log "rdkafka_performance consume on $topic failed: $(tail -1 "${out%.json}.txt")"
  python3 - "${out%.json}.txt" "$out" <<'PY' || true
import json, re, sys
txt = open(sys.argv[1]).read()
m = re.search(r"(\d+) messages \((\d+) bytes\) consumed in (\d+)ms", txt)
if m:
    n, b, ms = int(m[1]), int(m[2]), max(int(m[3]), 1)
    try:
        u, s, wall = (float(x) for x in open(sys.argv[1] + ".cpu").read().split()[-3:])
        cpu = 100.0 * (u + s) / wall if wall > 0 else None
    except Exception:
        cpu = None
    json.dump({"client": "rdkafka_performance (librdkafka C)", "records": n,
               "records_per_s": n / ms * 1000, "mib_per_s": b / ms * 1000 / 2**20,
               "cpu_pct_of_core": cpu, "errors": {}}, open(sys.argv[2], "w"))
PY
}

# W2 with librdkafka's C API (perf/clients/rdkafka_latency.c, built once by
# perf/clients/rdkafka_latency.sh): open loop at the rate, waking at most every 1 ms and
# sending what is due, latency from each record's intended time; the first $WARM s are not
# measured. Skipped, with a log line, if it cannot be built.
RDK_LAT=""
rdklat_produce() { # out port topic rate
  local out="$1" port="$2" topic="$3" rate="$4"
  c_client RDK_LAT rdkafka_latency.sh "W2 C client" || return 0
  topic_create "$port" "$topic"
  taskset -c "$CLIENT_CPU" timeout $((DUR + WARM + 90)) "$RDK_LAT" -b "127.0.0.1:$port" -t "$topic" \
    -r "$rate" -n $((rate * (DUR + WARM))) -w "$WARM" -s "$RECORD" -a 1 -i 1000 -o "$out" \
    >"${out%.json}.txt" 2>&1 || log "rdkafka_latency on $topic failed: $(tail -1 "${out%.json}.txt")"
}

# The same 8-partition topic on either broker before a client that does not create it.
topic_create() {
  "$SHARDLOG" topics --bootstrap "127.0.0.1:$1" create "$2" --partitions 8 >/dev/null 2>&1 || true
}

# Empties the kernel's page cache (Kafka's cold read); a log line when not allowed.
drop_caches() {
  sync
  { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null || log "could not drop the page cache (not root?)"
}

# ------------------------------------------------------------------ 3. workloads
# Median over Kafka's runs of a workload's JSON field (W2's rate and ProducerPerformance's
# record count derive from Kafka's W1); $2 when there is none.
kafka_median() { # field, default, scale
  python3 - "$TMP/res/kafka" "$1" "$2" "${3:-1}" <<'PY' 2>/dev/null || echo "$2"
import glob, json, statistics, sys
d, field, default, scale = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
v = []
for f in glob.glob(d + "/w1-[0-9]*.json"):
    try:
        v.append(json.load(open(f))[field])
    except Exception:
        pass
print(int(statistics.median(v) * scale) if v else default)
PY
}

# One run of workload $3 against broker $1 (port $2), repetition $4: results in
# res/<broker>/<w>-<rep>.* and a fresh topic per run.
run_workload() {
  local b="$1" port="$2" w="$3" rep="$4" r="$TMP/res/$1"
  local bs="127.0.0.1:$port" t="${3,,}r$4"
  mkdir -p "$r"
  local common=(--bootstrap "$bs" --record-size "$RECORD" --quiet)
  cut -d' ' -f1 /proc/loadavg >"$r/${w,,}-$rep.load"
  case "$w" in
  W1)
    log "$b W1 #$rep: max produce throughput, 1 KiB, 8 partitions, acks=1"
    bench produce "${common[@]}" --topic "$t" --partitions 8 --acks 1 --duration "$DUR" \
      --warmup "$WARM" --label "$b W1" --json "$r/w1-$rep.json" --hgrm "$r/w1-$rep.hgrm" >"$r/w1-$rep.txt" 2>&1 \
      || log "$b W1 failed: $(tail -1 "$r/w1-$rep.txt")"
    # The same record count for both brokers: a third of what our client moved at Kafka's
    # W1 in DUR seconds (the JVM client is slower; this keeps the run bounded).
    local recs
    recs=$(kafka_median records_per_s 100000 "$DUR / 3")
    recs=$(python3 -c "print(max(10000, min(2000000, int($recs))))")
    producer_perf "$r/w1-pp-$rep.txt" "$port" "${t}pp" "$recs" -1 1
    rdkafka produce "$r/w1rdk-$rep.json" "$port" "${t}rdk" "$recs"
    ;;
  W2)
    local rate
    rate=$(kafka_median records_per_s 40000 0.5)
    echo "$rate" >"$TMP/res/w2-rate.txt"
    log "$b W2 #$rep: produce latency at $rate rec/s (50% of Kafka's W1)"
    bench produce "${common[@]}" --topic "$t" --partitions 8 --acks 1 --rate "$rate" --duration "$DUR" \
      --warmup "$WARM" --label "$b W2 #$rep" --json "$r/w2-$rep.json" --hgrm "$r/w2-$rep.hgrm" >"$r/w2-$rep.txt" 2>&1 \
      || log "$b W2 failed: $(tail -1 "$r/w2-$rep.txt")"
    producer_perf "$r/w2-pp-$rep.txt" "$port" "${t}pp" $((rate * DUR / 2)) "$rate" 1
    rdkafka produce "$r/w2rdk-$rep.json" "$port" "${t}rdk" $((rate * DUR / 2)) "$rate"
    rdklat_produce "$r/w2rdkc-$rep.json" "$port" "${t}rdkc" "$rate"
    ;;
  W3)
    log "$b W3 #$rep: acks=all, flush per batch (flush.messages=1), $W3_RATE rec/s"
    bench produce "${common[@]}" --topic "$t" --partitions 8 --acks -1 --rate "$W3_RATE" \
      --topic-config flush.messages=1 --duration "$DUR" --warmup "$WARM" --label "$b W3" \
      --json "$r/w3-$rep.json" >"$r/w3-$rep.txt" 2>&1 || log "$b W3 failed: $(tail -1 "$r/w3-$rep.txt")"
    ;;
  W4)
    log "$b W4 #$rep: 1,000 partitions, max produce throughput"
    bench produce "${common[@]}" --topic "$t" --partitions 1000 --acks 1 --duration "$W4_DUR" \
      --warmup "$WARM" --label "$b W4" --json "$r/w4-$rep.json" >"$r/w4-$rep.txt" 2>&1 || log "$b W4 failed: $(tail -1 "$r/w4-$rep.txt")"
    resources "$(broker_pid "$b")" >"$r/w4-resources-$rep.json"
    ;;
  W5)
    local n=$((W5_BYTES / RECORD))
    log "$b W5 #$rep: write $((W5_BYTES >> 20)) MiB, then consume it from the start"
    bench produce "${common[@]}" --topic "$t" --partitions 8 --acks 1 --records "$n" \
      --label "$b W5 write" --json "$r/w5-write-$rep.json" >"$r/w5-write-$rep.txt" 2>&1 || log "$b W5 write failed"
    # Cold: Kafka's page cache emptied; Shardlog (O_DIRECT) restarted, so its own cache is
    # empty. Then warm: the same bytes again, with each client.
    drop_caches
    if [[ "$b" != kafka ]]; then restart_shardlog; fi
    bench consume --bootstrap "$bs" --quiet --topic "$t" --from earliest --to-end \
      --label "$b W5" --json "$r/w5-$rep.json" >"$r/w5-$rep.txt" 2>&1 || log "$b W5 failed: $(tail -1 "$r/w5-$rep.txt")"
    bench consume --bootstrap "$bs" --quiet --topic "$t" --from earliest --to-end \
      --label "$b W5 warm" --json "$r/w5warm-$rep.json" >"$r/w5warm-$rep.txt" 2>&1 || log "$b W5 warm failed"
    consumer_perf "$r/w5-java-$rep.txt" "$port" "$t" "$n"
    rdkafka consume "$r/w5rdk-$rep.json" "$port" "$t" "$n"
    # The same app with librdkafka's fetch-queue back-off at 10 ms instead of 1 s: the
    # default parks every partition for a second whenever the broker outruns the app.
    rdkafka consume "$r/w5rdkq-$rep.json" "$port" "$t" "$n" 0 -X fetch.queue.backoff.ms=10
    rdkperf_consume "$r/w5rdkc-$rep.json" "$port" "$t" "$n"
    ;;
  W6)
    log "$b W6 #$rep: end-to-end latency at $W6_RATE rec/s"
    bench e2e "${common[@]}" --topic "$t" --partitions 8 --acks 1 --rate "$W6_RATE" --duration "$DUR" \
      --warmup "$WARM" --fetch-max-wait-ms 100 --label "$b W6 #$rep" --json "$r/w6-$rep.json" \
      --hgrm "$r/w6-$rep.hgrm" >"$r/w6-$rep.txt" 2>&1 || log "$b W6 failed: $(tail -1 "$r/w6-$rep.txt")"
    ;;
  esac
  # Both brokers run for the whole run: each run's gigabytes go as soon as it is measured
  # (a full run writes more than a small disk holds).
  local topic
  for topic in "$t" "${t}pp" "${t}rdk"; do
    "$SHARDLOG" topics --bootstrap "$bs" delete "$topic" >/dev/null 2>&1 || true
  done
  # The next run (the other broker's) starts on a quiet disk: the deleted files' removal
  # (Kafka's after 1 s; this ext4 is mounted with online discard) and the page cache's
  # writeback of Kafka's writes otherwise run during it, and slow a direct-I/O reader that
  # follows Kafka (W5 with rdkafka_performance: 871 MiB/s in the run, 1,215–1,243 alone).
  sleep "$SETTLE_S"
  sync
}

broker_pid() { if [[ "$1" == kafka ]]; then cat "$TMP/kafka.pid"; else echo "$SHARDLOG_PID"; fi; }

free_gib=$(df -Pk "$TMP" | awk 'NR==2 {print int($4 / 1048576)}')
need_gib=$(( (W5_BYTES >> 30) * 3 + 3 ))
((free_gib >= need_gib)) || log "warning: $free_gib GiB free in $TMP, the run writes up to ~$need_gib GiB per broker"
machine
BROKERS=()
if [[ "$ONLY" != shardlog ]]; then
  [[ -x "$KAFKA_SH" ]] || die "$KAFKA_SH missing (the Kafka launcher)"
  log "starting Apache Kafka $("$KAFKA_SH" version 2>/dev/null) on cpu $BROKER_CPU"
  start_kafka
  BROKERS+=(kafka)
fi
if [[ "$ONLY" != kafka ]]; then
  if [[ -x "$SHARDLOG" ]] && "$SHARDLOG" serve --help >/dev/null 2>&1; then
    log "starting Shardlog (--shards 1) on cpu $BROKER_CPU"
    start_shardlog
    BROKERS+=(shardlog)
  else
    log "no shardlog serve binary at $SHARDLOG: Shardlog column left empty"
  fi
fi
# Interleaved: every workload runs REPS times per broker, alternating brokers, so slow
# drifts of the shared machine (other jobs, disk state) hit both alike. Both brokers stay
# up (the idle one parks); only one is loaded at a time.
for w in W1 W2 W3 W4 W5 W6; do
  want "$w" || continue
  for rep in $(seq 1 "$REPS"); do
    for b in "${BROKERS[@]}"; do
      if [[ "$b" == kafka ]]; then run_workload kafka "$KAFKA_PORT" "$w" "$rep"
      else run_workload shardlog "$SHARDLOG_PORT" "$w" "$rep"; fi
    done
  done
done
for b in "${BROKERS[@]}"; do
  mkdir -p "$TMP/res/$b"
  resources "$(broker_pid "$b")" >"$TMP/res/$b/resources.json"
done
stop_shardlog
[[ " ${BROKERS[*]} " == *" kafka "* ]] && stop_kafka
cut -d' ' -f1-3 /proc/loadavg >"$TMP/res/load-end.txt"

# ------------------------------------------------------------------ 4. report
log "writing $REPORT"
for w in w2 w6; do
  files=()
  for b in kafka shardlog; do
    for f in "$TMP/res/$b/$w"-[0-9]*.json; do [[ -f "$f" ]] && files+=("$f"); done
  done
  if ((${#files[@]})); then
    $BENCH plot "${files[@]}" -o "$ART_DIR/$w.svg" \
      --title "${w^^} latency by percentile, every run ($STAMP, $COMMIT)" >/dev/null || true
  fi
done
for b in kafka shardlog; do
  for f in "$TMP/res/$b"/*.hgrm "$TMP/res/$b"/*.json; do
    [[ -f "$f" ]] && cp "$f" "$ART_DIR/$b-$(basename "$f")"
  done
done
ELAPSED=$(($(date +%s) - START_S))
PERF_WORKLOADS="$WORKLOADS" python3 "$ROOT/perf/report.py" "$TMP/res" "$REPORT" "$COMMIT" "$QUICK" "$ELAPSED" "$BENCH" "$REPS"
log "done in $ELAPSED s: $REPORT"
