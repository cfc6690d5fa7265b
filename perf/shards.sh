#!/usr/bin/env bash
# Throughput and p99 of Shardlog versus --shards and versus partitions per shard, and the
# overhead of metrics recording (the `metrics` cargo feature on vs compiled out).
#
#   perf/shards.sh [--quick] [--shards "1 2"] [--pps "1 4 16 64"] [--overhead-only]
#                  [--no-overhead] [--keep TMPDIR]
#
# For every shard count S and partitions-per-shard P: start `shardlog serve --shards S`
# (fresh data dir), run `bench produce` closed loop (max throughput: records/s, MiB/s and
# its closed-loop p99), then open loop at half that rate (p50/p99/p99.9, coordinated-
# omission corrected), and scrape the broker's /metrics for its own Produce p99 and each
# shard's busy ratio. Overhead: the same 1-shard workloads with two builds, alternated
# A/B/A/B, median of the runs.
#
# CPU split on a 2-core host: with --shards 1 the broker is on cpu 1 and the load
# generator on cpu 0; with --shards 2 the broker spans both cores and shares cpu 0 with
# the generator (stated in the results). Reactors do not spin (--spin-before-park-us 0).
# Bounded: ~8 minutes by default, ~3 with --quick. Ports 49150-49159.
# Results: perf/results/shards-<date>-<commit>.{tsv,md}. Environment: SHARDLOG (binary,
# default target/release/shardlog), BENCH (load generator, default "$SHARDLOG bench", else
# target/release/examples/bench), CARGO_BUILD=0 to skip building, SHARDLOG_METRICS and
# SHARDLOG_NOMETRICS (prebuilt binaries of both builds) to skip the overhead builds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
QUICK=0; SHARDS="1 2"; PPS="1 4 16 64"; OVERHEAD=1; SWEEP=1; KEEP=""
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --shards) SHARDS="$2"; shift ;;
    --pps) PPS="$2"; shift ;;
    --overhead-only) SWEEP=0 ;;
    --no-overhead) OVERHEAD=0 ;;
    --keep) KEEP="$2"; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "shards.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

log() { echo "[shards $(date +%H:%M:%S)] $*" >&2; }
die() { log "error: $*"; exit 1; }

if ((QUICK)); then DUR=3; WARM=1; REPEAT=2; else DUR=8; WARM=2; REPEAT=3; fi
RECORD=1024
PORT=49150
ADMIN_PORT=49151
TMP="${KEEP:-$(mktemp -d /tmp/shardlog-shards.XXXXXX)}"
mkdir -p "$TMP"
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo nocommit)"
STAMP="$(date -u +%Y-%m-%d)"
OUT="$ROOT/perf/results"
TSV="$OUT/shards-$STAMP-$COMMIT.tsv"
MD="$OUT/shards-$STAMP-$COMMIT.md"
mkdir -p "$OUT"

# ------------------------------------------------------------------ binaries
SHARDLOG="${SHARDLOG:-$ROOT/target/release/shardlog}"
if [[ "${CARGO_BUILD:-1}" == 1 ]]; then
  log "building release binaries"
  cargo build --release --bin shardlog -q 2>&1 | tail -5 >&2
fi
if [[ -z "${BENCH:-}" ]]; then
  if "$SHARDLOG" bench --help >/dev/null 2>&1; then BENCH="$SHARDLOG bench"
  elif [[ -x "$ROOT/target/release/examples/bench" ]]; then BENCH="$ROOT/target/release/examples/bench"
  else die "no load generator (shardlog bench or target/release/examples/bench)"; fi
fi

BROKER_PID=""
stop_broker() {
  if [[ -n "$BROKER_PID" ]]; then
    kill "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=""
  fi
}
cleanup() { stop_broker; [[ -z "$KEEP" ]] && rm -rf "$TMP"; return 0; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_broker BINARY SHARDS
start_broker() {
  local bin="$1" shards="$2" cpus="1"
  ((shards > 1)) && cpus="0-$((shards - 1))"
  rm -rf "$TMP/data"
  taskset -c "$cpus" "$bin" serve --shards "$shards" --listen "127.0.0.1:$PORT" \
    --admin-listen "127.0.0.1:$ADMIN_PORT" --data-dir "$TMP/data" --spin-before-park-us 0 \
    >"$TMP/server.log" 2>&1 &
  BROKER_PID=$!
  for _ in $(seq 1 100); do
    if (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return 0; fi
    kill -0 "$BROKER_PID" 2>/dev/null || { tail -20 "$TMP/server.log" >&2; die "broker exited"; }
    sleep 0.1
  done
  die "broker did not listen"
}

# produce TOPIC PARTITIONS JSON [extra bench args...]
produce() {
  local topic="$1" parts="$2" json="$3"; shift 3
  timeout $((DUR + WARM + 60)) taskset -c 0 $BENCH produce --bootstrap "127.0.0.1:$PORT" \
    --topic "$topic" --partitions "$parts" --record-size "$RECORD" --batch-bytes 16384 \
    --in-flight 5 --warmup "$WARM" --duration "$DUR" --quiet --json "$json" "$@" >/dev/null
}

# field JSON EXPR  (python expression over `s`, the bench summary)
field() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print($2)" "$1"; }

# broker-side: Produce total p99 (ms) and busy % per shard, from /metrics
scrape() {
  python3 - "127.0.0.1:$ADMIN_PORT" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=5).read().decode()
p99, busy = "-", []
for line in text.splitlines():
    if line.startswith('shardlog_request_latency_percentile_seconds{api="Produce",stage="total",quantile="0.99"}'):
        p99 = "%.3f" % (float(line.split()[-1]) * 1e3)
    if line.startswith("shardlog_shard_busy_ratio{"):
        busy.append("%.0f" % (float(line.split()[-1]) * 100))
print(p99, "/".join(busy) or "-")
PY
}

# one_config BINARY SHARDS PPS LABEL [RATE] -> appends a TSV row; the open-loop run uses
# RATE when given (the same for both builds in the overhead comparison), else half the max.
one_config() {
  local bin="$1" shards="$2" pps="$3" label="$4" fixed_rate="${5:-}"
  local parts=$((shards * pps)) topic="t-$shards-$pps-$RANDOM"
  start_broker "$bin" "$shards"
  # Busy % is over the last second, so scrape mid-run (broker p99 is cumulative: after).
  (sleep $((WARM + DUR / 2)); scrape >"$TMP/mid-max.txt" 2>/dev/null) &
  local scraper=$!
  produce "$topic" "$parts" "$TMP/max.json" || { stop_broker; log "max run failed"; return 0; }
  wait "$scraper" || true
  local rps mib cp99 half
  rps=$(field "$TMP/max.json" 's["records_per_s"]')
  mib=$(field "$TMP/max.json" '"%.1f" % s["mib_per_s"]')
  cp99=$(field "$TMP/max.json" '"%.3f" % (s["latency_us"]["p99"]/1e3)')
  read -r _ busy_max <"$TMP/mid-max.txt" || busy_max="-"
  half=${fixed_rate:-$(python3 -c "print(max(1000, int(float('$rps') / 2)))")}
  (sleep $((WARM + DUR / 2)); scrape >"$TMP/mid-rate.txt" 2>/dev/null) &
  scraper=$!
  produce "$topic" "$parts" "$TMP/rate.json" --rate "$half" || { stop_broker; log "rate run failed"; return 0; }
  wait "$scraper" || true
  local p50 p99 p999 bp99 busy_rate
  p50=$(field "$TMP/rate.json" '"%.3f" % (s["latency_us"]["p50"]/1e3)')
  p99=$(field "$TMP/rate.json" '"%.3f" % (s["latency_us"]["p99"]/1e3)')
  p999=$(field "$TMP/rate.json" '"%.3f" % (s["latency_us"]["p999"]/1e3)')
  read -r _ busy_rate <"$TMP/mid-rate.txt" || busy_rate="-"
  read -r bp99 _ < <(scrape)
  stop_broker
  printf '%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$COMMIT" \
    "$shards" "$pps" "$rps" "$mib" "$cp99" "$busy_max" "$half" "$p50" "$p99" "$p999" "$bp99" \
    "$busy_rate" >>"$TSV"
  log "$label shards=$shards pps=$pps: $rps rec/s ($mib MiB/s), open-loop p99 $p99 ms"
}

HEADER="label\tcommit\tshards\tpartitions_per_shard\tmax_records_per_s\tmax_mib_per_s\tmax_closed_p99_ms\tmax_busy_pct\trate_records_per_s\trate_p50_ms\trate_p99_ms\trate_p999_ms\tbroker_p99_ms\trate_busy_pct"
printf '%b\n' "$HEADER" >"$TSV"

if ((SWEEP)); then
  for s in $SHARDS; do
    for p in $PPS; do one_config "$SHARDLOG" "$s" "$p" sweep; done
  done
fi

if ((OVERHEAD)); then
  ON="${SHARDLOG_METRICS:-}"; OFF="${SHARDLOG_NOMETRICS:-}"
  if [[ -z "$OFF" ]]; then
    log "overhead: building without the metrics feature"
    cargo build --release --bin shardlog --no-default-features -q 2>&1 | tail -5 >&2
    OFF="$TMP/shardlog-nometrics"; cp "$ROOT/target/release/shardlog" "$OFF"
  fi
  if [[ -z "$ON" ]]; then
    log "overhead: building with the metrics feature"
    cargo build --release --bin shardlog -q 2>&1 | tail -5 >&2
    ON="$TMP/shardlog-metrics"; cp "$ROOT/target/release/shardlog" "$ON"
  fi
  one_config "$ON" 1 8 "calibrate"
  RATE=$(tail -1 "$TSV" | cut -f9)
  for i in $(seq 1 "$REPEAT"); do
    one_config "$ON" 1 8 "metrics-on" "$RATE"
    one_config "$OFF" 1 8 "metrics-off" "$RATE"
  done
fi

# ------------------------------------------------------------------ report
python3 - "$TSV" "$MD" "$COMMIT" "$DUR" "$WARM" <<'PY'
import csv, statistics, sys, subprocess
tsv, md, commit, dur, warm = sys.argv[1:]
rows = list(csv.DictReader(open(tsv), delimiter="\t"))
cpu = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
kernel = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
out = [f"# Shardlog shards/partitions sweep, commit {commit}", "",
       f"Machine: {cpu} cores, Linux {kernel}; 1 KiB records, acks=1, batch 16 KiB, in-flight 5, "
       f"one connection; {warm} s warm-up then {dur} s measured per run. Broker on cpu 1 with "
       "--shards 1, on cpus 0-1 with --shards 2 (sharing cpu 0 with the load generator); "
       "no reactor spinning. 'rate' runs are open loop at half the max rate (CO-corrected).", "",
       "| label | shards | part/shard | max rec/s | MiB/s | closed p99 ms | busy % | rate rec/s | p50 ms | p99 ms | p99.9 ms | broker p99 ms | busy % |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    out.append("| " + " | ".join(r[k] for k in ["label", "shards", "partitions_per_shard",
        "max_records_per_s", "max_mib_per_s", "max_closed_p99_ms", "max_busy_pct",
        "rate_records_per_s", "rate_p50_ms", "rate_p99_ms", "rate_p999_ms", "broker_p99_ms",
        "rate_busy_pct"]) + " |")
on = [r for r in rows if r["label"] == "metrics-on"]
off = [r for r in rows if r["label"] == "metrics-off"]
if on and off:
    med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
    t_on, t_off = med(on, "max_records_per_s"), med(off, "max_records_per_s")
    p_on, p_off = med(on, "rate_p99_ms"), med(off, "rate_p99_ms")
    out += ["", "## Metrics overhead (median of alternated runs, 1 shard, 8 partitions)", "",
            f"- throughput: on {t_on:.0f} rec/s, off {t_off:.0f} rec/s: {100*(t_off-t_on)/t_off:+.1f}% cost",
            f"- open-loop p99: on {p_on:.3f} ms, off {p_off:.3f} ms: {100*(p_on-p_off)/p_off:+.1f}%"]
open(md, "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
log "wrote $TSV and $MD"
