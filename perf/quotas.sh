#!/usr/bin/env bash
# Throughput of a closed-loop producer with client quotas configured but not hit (a
# `<default>` client-id producer_byte_rate of 100 GiB/s, so every request resolves and
# records against a quota) versus no quota at all, alternated A/B/A/B on one fresh broker
# each (`--shards 1`, broker on cpu 1, load generator on cpu 0), and the per-request cost of
# the accounting (criterion bench `quota_record`, run separately: `cargo bench --bench
# quota_record`).
#
#   perf/quotas.sh [ROUNDS] [SECONDS]      (default 2 rounds of 10 s each)
#
# Ports 27500-27509. Environment: SHARDLOG (default target/release/shardlog).
# Prints one line per run and the medians.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${1:-2}"; SECS="${2:-10}"
BIN="${SHARDLOG:-$ROOT/target/release/shardlog}"
PORT=27500
run_one() { # $1 = none|configured; prints MiB/s
  local data; data="$(mktemp -d)"
  taskset -c 1 "$BIN" serve --listen "127.0.0.1:$PORT" --admin-listen 127.0.0.1:0 \
    --data-dir "$data" --shards 1 --log-level error --spin-before-park-us 0 >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
  if [[ "$1" == configured ]]; then
    "$BIN" quotas alter --client-default --add producer_byte_rate=100GiB \
      -b "127.0.0.1:$PORT" >/dev/null
  fi
  taskset -c 0 "$BIN" bench produce -b "127.0.0.1:$PORT" --topic q --partitions 4 \
    --duration "${SECS}s" --warmup 2s --record-size 1KiB --connections 2 \
    --json "$data/bench.json" --quiet >/dev/null 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f MiB/s, p99 %s us" % (d["mib_per_s"], d["latency_us"]["p99"]))' "$data/bench.json"
  rm -rf "$data"
}
for r in $(seq "$ROUNDS"); do
  for mode in none configured; do
    echo "round $r $mode: $(run_one "$mode")"
  done
done
