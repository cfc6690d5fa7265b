#!/usr/bin/env bash
# The automatic shard balancer made visible: a skewed load on a `--shards 2` broker made
# even, measured before and after.
#
#   perf/shard_balance.sh [--interval-ms 10000] [--duration 60s] [--keep TMPDIR]
#
# Starts `shardlog serve --shards 2` (fresh data dir, balancer on, window --interval-ms),
# creates topic `hot` with 2 partitions (placement puts one on each shard), then moves
# hot-1 by hand onto hot-0's shard (`shardlog shards move`): all produce load of `bench
# produce --topic hot` now lands on one shard. While the bench runs (closed loop, acks=1),
# `shardlog top --plain` frames are taken in the first window ("before": skewed) and after
# the balancer's move ("after"); the bench's own 5-second intervals, the broker's
# /metrics (moves) and `shards list` are kept too. Ports 35500-35502 (helper block).
# Results: perf/results/<date>-shard-balance.md (raw frames in the appendix).
# Environment: SHARDLOG (binary, default target/debug/shardlog; say which in the results).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
INTERVAL_MS=10000; DURATION=60s; KEEP=""
while (($#)); do
  case "$1" in
    --interval-ms) INTERVAL_MS="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    --keep) KEEP="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "shard_balance.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
SHARDLOG="${SHARDLOG:-target/debug/shardlog}"
KAFKA=127.0.0.1:35500; ADMIN=127.0.0.1:35501
TMP="${KEEP:-$(mktemp -d)}"; mkdir -p "$TMP"
OUT="perf/results/$(date -u +%Y-%m-%d)-shard-balance.md"
BROKER_PID=""; BENCH_PID=""
cleanup() {
  [[ -n "$BENCH_PID" ]] && kill "$BENCH_PID" 2>/dev/null || true
  [[ -n "$BROKER_PID" ]] && kill "$BROKER_PID" 2>/dev/null && wait "$BROKER_PID" 2>/dev/null || true
  [[ -z "$KEEP" ]] && rm -rf "$TMP"
}
trap cleanup EXIT

"$SHARDLOG" serve --shards 2 --listen "$KAFKA" --admin-listen "$ADMIN" --data-dir "$TMP/data" \
  --shard-balance-interval-ms "$INTERVAL_MS" --shard-balance-margin-percent 50 \
  >"$TMP/broker.log" 2>&1 &
BROKER_PID=$!
for _ in $(seq 100); do grep -q "shardlog listening on" "$TMP/broker.log" && break; sleep 0.2; done
"$SHARDLOG" --bootstrap-server "$KAFKA" topics create hot --partitions 2 >/dev/null
s0=$("$SHARDLOG" --admin "$ADMIN" shards list | awk '$1=="hot" && $2==0 {print $3}')
"$SHARDLOG" --admin "$ADMIN" shards move hot-1 --to-shard "$s0" | tee "$TMP/manual.txt"
START=$(date +%s)
"$SHARDLOG" bench produce --bootstrap-server "$KAFKA" --topic hot --duration "$DURATION" \
  --record-size 1024 --acks 1 --connections 2 >"$TMP/bench.txt" 2>&1 &
BENCH_PID=$!
sleep 2
# Before: inside the balancer's first window (it judges only after two samples).
"$SHARDLOG" --admin "$ADMIN" top --plain --interval-ms 3000 --iterations 2 >"$TMP/before.txt"
"$SHARDLOG" --admin "$ADMIN" shards list >"$TMP/list-before.txt"
MOVED=""
for _ in $(seq $(( 3 * INTERVAL_MS / 500 + 20 ))); do
  if grep -q "shard balancer moves a partition" "$TMP/broker.log"; then MOVED=$(( $(date +%s) - START )); break; fi
  sleep 0.5
done
sleep 2
"$SHARDLOG" --admin "$ADMIN" top --plain --interval-ms 3000 --iterations 2 >"$TMP/after.txt"
"$SHARDLOG" --admin "$ADMIN" shards list >"$TMP/list-after.txt"
wait "$BENCH_PID" || true; BENCH_PID=""
curl -s "http://$ADMIN/metrics" | grep -E "^shardlog_shard_moves" >"$TMP/moves.txt" || true
{
  echo "# Shard balance: a skewed load on \`--shards 2\` made even ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD))"
  echo
  echo "Script: \`perf/shard_balance.sh --interval-ms $INTERVAL_MS --duration $DURATION\`; binary \`$SHARDLOG\`."
  echo "Host: $(nproc) cores shared with other sessions (figures are indicative, not a benchmark)."
  echo
  echo "Balancer moved a partition ${MOVED:-never} s after the load started."
  echo
  echo "## Before (both hot partitions on shard $s0; second frame)"
  echo '```'; awk 'BEGIN{RS="";ORS="\n\n"} NR>=3' "$TMP/before.txt"; cat "$TMP/list-before.txt"; echo '```'
  echo "## After the balancer's move (second frame)"
  echo '```'; awk 'BEGIN{RS="";ORS="\n\n"} NR>=3' "$TMP/after.txt"; cat "$TMP/list-after.txt"; echo '```'
  echo "## Moves"
  echo '```'; cat "$TMP/manual.txt" "$TMP/moves.txt"; grep -E "moved partition between shards" "$TMP/broker.log" | sed 's/^.*INFO //'; echo '```'
  echo "## Bench (closed loop, acks=1, 1 KiB records, 2 connections)"
  echo '```'; tail -n 40 "$TMP/bench.txt"; echo '```'
} >"$OUT"
echo "wrote $OUT"
