#!/usr/bin/env bash
# Where a durable acknowledgement's time goes (issue 20), next to the disk's own figures.
#
#   perf/durable.sh [--rates 5000,10000] [--rounds 3] [--duration 10] [--warmup 3]
#                   [--arms growth,prealloc,flush1000] [--out FILE]
#
# Per round (rounds interleave the arms: A,B,C,A,B,C,...), on this machine:
#  1. fio, 4 KiB write + fdatasync at queue depth 1 in three file layouts: appending
#     (the file grows: fallocate=none), fallocated (unwritten extents: fio's default) and
#     zero-filled (overwrite=1);
#  2. for each rate and arm, a fresh `shardlog serve --shards 1 --spin-before-park-us 0` on
#     cpu 1 and `shardlog bench produce` on cpu 0: 1 KiB records, 8 partitions, linger 0,
#     acks=1, open loop at the rate; then the broker's Produce stage histograms
#     (GET /v1/shards: queue, storage, write_wait, write, fdatasync, notify, send).
# Arms: growth   = fsync every batch, no preallocation (SHARDLOG_PREALLOCATE_BYTES=0);
#       prealloc = fsync every batch, zero-filled preallocation (the default), a log's
#                  sync of its preallocated region sharing one device flush with the
#                  shard's other logs (io::device_flush);
#       prealloc-own = prealloc with one fdatasync per log sync (SHARDLOG_SHARED_FLUSH=0);
#       flush1000= topic config flush.ms=1000 (acknowledged after the O_DIRECT write);
#       prealloc-spin = prealloc with the reactor spinning 200 µs before it parks
#       (not in the default set: it measures what parking costs).
# Reports medians and [min–max] of the rounds, the load average (other work on the host),
# and whether the issue-20 targets are met. Ports 36093 (Kafka API) and 36094 (admin);
# override with DURABLE_PORT / DURABLE_ADMIN_PORT. SHARDLOG: the binary (default
# target/release/shardlog).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RATES=5000,10000; ROUNDS=3; DUR=10; WARM=3; ARMS=growth,prealloc,flush1000; OUT=""
while (($#)); do
  case "$1" in
    --rates) RATES="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --duration) DUR="$2"; shift ;;
    --warmup) WARM="$2"; shift ;;
    --arms) ARMS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "durable.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
SHARDLOG="${SHARDLOG:-$ROOT/target/release/shardlog}"
PORT="${DURABLE_PORT:-36093}"
ADMIN="${DURABLE_ADMIN_PORT:-36094}"
BROKER_CPU=1; CLIENT_CPU=0
[[ -x "$SHARDLOG" ]] || { echo "durable.sh: no binary at $SHARDLOG (cargo build --release)" >&2; exit 2; }
# shellcheck source=perf/ensure_tools.sh
source "$ROOT/perf/ensure_tools.sh"
ensure_tool fio || exit 2
ensure_tool python3 || exit 2
TMP="$(mktemp -d /tmp/shardlog-durable.XXXXXX)"
PID=""
cleanup() {
  if [[ -n "$PID" ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "[durable $(date +%H:%M:%S)] $*" >&2; }
RES="$TMP/res"; mkdir -p "$RES"

fio4k() { # round, layout
  local r="$1" layout="$2" extra=()
  case "$layout" in
    append) extra=(--fallocate=none) ;;
    fallocate) extra=(--fallocate=native) ;;
    zerofill) extra=(--overwrite=1) ;;
  esac
  mkdir -p "$TMP/fio"
  fio --name="fio-$layout" --directory="$TMP/fio" --ioengine=io_uring --direct=1 --rw=write \
    --bs=4k --iodepth=1 --fdatasync=1 --size=32M --runtime=3 --time_based=0 \
    --output-format=json "${extra[@]}" >"$RES/fio-$layout-$r.json" 2>/dev/null || true
  rm -rf "$TMP/fio"
}

run_arm() { # round, rate, arm
  local r="$1" rate="$2" arm="$3" prealloc="" cfg=() spin=0 shared=""
  case "$arm" in
    growth) prealloc=0 ;;
    prealloc) prealloc="" ;;
    prealloc-own) shared=0 ;;
    prealloc-spin) spin=200 ;;
    flush1000) cfg=(--topic-config flush.ms=1000) ;;
    *) echo "unknown arm $arm" >&2; return 1 ;;
  esac
  local dir="$TMP/broker"; rm -rf "$dir"; mkdir -p "$dir"
  local tag="$arm-$rate-$r"
  echo "$(cut -d' ' -f1-3 /proc/loadavg)" >"$RES/load-$tag.txt"
  env ${prealloc:+SHARDLOG_PREALLOCATE_BYTES=$prealloc} ${shared:+SHARDLOG_SHARED_FLUSH=$shared} taskset -c "$BROKER_CPU" "$SHARDLOG" serve \
    --shards 1 --spin-before-park-us "$spin" --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN" \
    --data-dir "$dir/data" >"$dir/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 100); do
    (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
  done
  taskset -c "$CLIENT_CPU" "$SHARDLOG" bench produce --bootstrap "127.0.0.1:$PORT" --quiet \
    --topic durable --partitions 8 --record-size 1024 --linger-ms 0 --acks 1 --rate "$rate" \
    --duration "$DUR" --warmup "$WARM" "${cfg[@]}" --label "$tag" --json "$RES/bench-$tag.json" \
    >"$RES/bench-$tag.txt" 2>&1 || log "$tag: bench failed: $(tail -1 "$RES/bench-$tag.txt")"
  python3 - "$ADMIN" "$RES/stages-$tag.json" <<'PY' || log "$tag: no stage view"
import json, sys, urllib.request
v = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/shards", timeout=5))
json.dump(v, open(sys.argv[2], "w"))
PY
  kill "$PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
  rm -rf "$dir"
}

START=$(date +%s)
IFS=, read -r -a rates <<<"$RATES"
IFS=, read -r -a arms <<<"$ARMS"
for r in $(seq 1 "$ROUNDS"); do
  log "round $r: fio (append, fallocate, zero-filled)"
  for layout in append fallocate zerofill; do fio4k "$r" "$layout"; done
  for rate in "${rates[@]}"; do
    for arm in "${arms[@]}"; do
      log "round $r: $arm at $rate rec/s"
      run_arm "$r" "$rate" "$arm"
    done
  done
done
ELAPSED=$(($(date +%s) - START))
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo nocommit)"
git diff --quiet HEAD -- src 2>/dev/null || COMMIT="$COMMIT-dirty"
OUT="${OUT:-$ROOT/perf/results/$(date -u +%Y-%m-%d)-durable-latency-$COMMIT.md}"
python3 - "$RES" "$OUT" "$COMMIT" "$ROUNDS" "$DUR" "$WARM" "$RATES" "$ARMS" "$ELAPSED" <<'PY'
import glob, json, os, statistics, sys
res, out, commit, rounds, dur, warm, rates, arms, elapsed = sys.argv[1:10]
rates = [int(x) for x in rates.split(",")]
arms = arms.split(",")
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
def spread(xs, unit="", scale=1.0):
    xs = [x * scale for x in xs if x is not None]
    if not xs:
        return "n/a", None
    m = statistics.median(xs)
    f = (lambda v: f"{v:,.0f}") if m >= 100 else (lambda v: f"{v:.1f}")
    return (f"{f(m)}{unit} [{f(min(xs))}–{f(max(xs))}]" if len(xs) > 1 else f"{f(m)}{unit}"), m
def pair(b, key):
    # Client-side stages of each request (bench 2026-12-03 on): median p50 / p99 of rounds.
    xs = [x.get(key) for x in b if x.get(key)]
    if not xs:
        return "n/a"
    return (f"{statistics.median(x['p50'] for x in xs):,.0f} / "
            f"{statistics.median(x['p99'] for x in xs):,.0f}")
lines = []
fio = {}
lines.append("## The device: fio 4 KiB write + fdatasync, qd1 (µs; median [min–max] of rounds)\n")
lines.append("| file layout | write p50 | fdatasync p50 | fdatasync p99 | write+fdatasync p50 | IOPS |")
lines.append("|---|---|---|---|---|---|")
for layout, name in [("append", "appending (file grows)"), ("fallocate", "fallocated (fio default)"),
                     ("zerofill", "zero-filled (overwrite)")]:
    w50, s50, s99, tot, iops = [], [], [], [], []
    for r in range(1, int(rounds) + 1):
        j = load(f"{res}/fio-{layout}-{r}.json")
        if not j:
            continue
        job = j["jobs"][0]
        a = job["write"]["clat_ns"]["percentile"]["50.000000"] / 1000
        b = job["sync"]["lat_ns"]["percentile"]["50.000000"] / 1000
        w50.append(a); s50.append(b); tot.append(a + b)
        s99.append(job["sync"]["lat_ns"]["percentile"]["99.000000"] / 1000)
        iops.append(job["write"]["iops"])
    cells = [spread(x)[0] for x in (w50, s50, s99, tot, iops)]
    fio[layout] = spread(tot)[1]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
device = fio.get("fallocate")
floor = fio.get("zerofill")
lines.append("")
lines.append(f"Device p50 used for the targets: {device and round(device)} µs (fio's default layout, as "
             f"perf/fio.sh measures it); the zero-filled floor: {floor and round(floor)} µs.\n")
stage_names = ["total", "queue", "storage", "write_wait", "write", "fdatasync", "notify", "send"]
summary = {}
for rate in rates:
    lines.append(f"## {rate:,} records/s (1 KiB, 8 partitions, linger 0, acks=1, --shards 1)\n")
    lines.append("End to end, bench produce (CO-corrected, µs; median [min–max] of rounds). Send lag: "
                 "a request's first record, intended time to send; round trip: send to response read:\n")
    lines.append("| arm | achieved rec/s | p50 | p99 | p99.9 | max | send lag p50 / p99 | round trip p50 / p99 | client CPU % | load avg (1 min) |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for arm in arms:
        b = [load(f"{res}/bench-{arm}-{rate}-{r}.json") for r in range(1, int(rounds) + 1)]
        b = [x for x in b if x]
        la = []
        for r in range(1, int(rounds) + 1):
            try:
                la.append(float(open(f"{res}/load-{arm}-{rate}-{r}.txt").read().split()[0]))
            except Exception:
                pass
        g = lambda *k: [x.get(k[0], {}).get(k[1]) if len(k) == 2 else x.get(k[0]) for x in b]
        p50 = spread(g("latency_us", "p50"))
        p99 = spread(g("latency_us", "p99"))
        summary[(rate, arm)] = {"p50": p50[1], "p99": p99[1]}
        lines.append(f"| {arm} | {spread(g('records_per_s'))[0]} | {p50[0]} | {p99[0]} | "
                     f"{spread(g('latency_us', 'p999'))[0]} | {spread(g('latency_us', 'max'))[0]} | "
                     f"{pair(b, 'send_lag_us')} | {pair(b, 'round_trip_us')} | "
                     f"{spread(g('cpu_pct_of_core'))[0]} | {spread(la)[0]} |")
    lines.append("")
    lines.append("Broker stage histograms, Produce (µs, p50 / p99 / max; p50 and p99 the median of "
                 "rounds, max the largest of them: a device stall shows there). storage = append "
                 "+ wait for the flush policy, per request partition; write_wait/write/fdatasync per "
                 "write job; notify per waiting append:\n")
    lines.append("| arm | " + " | ".join(stage_names) + " |")
    lines.append("|---|" + "---|" * len(stage_names))
    for arm in arms:
        cells = []
        for st in stage_names:
            p50s, p99s, maxes = [], [], []
            for r in range(1, int(rounds) + 1):
                v = load(f"{res}/stages-{arm}-{rate}-{r}.json")
                # `total` (frame read → response written) is the API's own histogram.
                totals = [dict(a, stage="total") for a in (v or {}).get("apis", []) if a["api"] == "Produce"]
                for s in totals + (v or {}).get("produce_stages", []):
                    if s["stage"] == st:
                        p50s.append(s["p50_us"]); p99s.append(s["p99_us"])
                        maxes.append(s.get("max_us", 0))
            if p50s:
                cells.append(f"{statistics.median(p50s):.0f} / {statistics.median(p99s):.0f}"
                             f" / {max(maxes):.0f}")
                if st in ("write", "fdatasync"):
                    summary.setdefault((rate, arm, "ws"), 0)
                    summary[(rate, arm, "ws")] += statistics.median(p50s)
            else:
                cells.append("n/a")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    lines.append("")
lines.append("## Targets (issue 20)\n")
lines.append("| target | arm | measured | limit | met |")
lines.append("|---|---|---|---|---|")
def target(name, arm, value, limit):
    met = "n/a" if value is None or limit is None else ("yes" if value <= limit else "no")
    v = "n/a" if value is None else f"{value:.0f} µs"
    l = "n/a" if limit is None else f"{limit:.0f} µs"
    lines.append(f"| {name} | {arm} | {v} | {l} | {met} |")
for arm in [a for a in arms if a != "flush1000"]:
    r0 = rates[0]
    ws = summary.get((r0, arm, "ws"))
    target(f"write+fdatasync p50 ≤ 2× device p50 ({r0:,}/s)", arm, ws, device and 2 * device)
    ref = summary.get((r0, "flush1000"), {}).get("p50")
    target(f"e2e p50 ≤ flush.ms=1000 p50 + 2× device ({r0:,}/s)", arm,
           summary.get((r0, arm), {}).get("p50"), ref and device and ref + 2 * device)
    for rate in rates:
        target(f"e2e p99 ≤ 1 ms ({rate:,}/s)", arm, summary.get((rate, arm), {}).get("p99"), 1000)
head = f"""# Durable acknowledgement latency — {os.path.basename(out)[:-3]}

Commit `{commit}`; `perf/durable.sh --rates {','.join(map(str, rates))} --rounds {rounds} --duration {dur} --warmup {warm}` ({elapsed} s).
Broker `shardlog serve --shards 1 --spin-before-park-us 0` on cpu 1, a fresh data dir per run;
`shardlog bench produce` on cpu 0. Arms interleaved per round ({', '.join(arms)}), fio in every round.
Stage histograms include the warm-up (a fresh broker per run).
"""
text = head + "\n" + "\n".join(lines) + "\n"
os.makedirs(os.path.dirname(out), exist_ok=True)
open(out, "w").write(text)
print(text)
PY
log "done in $ELAPSED s: $OUT"
