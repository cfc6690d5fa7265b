#!/usr/bin/env bash
# Log-cleaner throughput and its effect on produce latency on the same shard.
#
#   perf/cleaner.sh [--quick] [--records N] [--rate R] [--throttles "0 104857600"]
#
# For each cleaner I/O limit T (0 = unlimited, else --log-cleaner-io-max-bytes-per-second):
# start `shardlog serve --shards 1` on cpu 1 (one shard: the cleaner and the produce path
# share it), fill topic `cmp` (4 partitions, cleanup.policy=delete so nothing cleans yet,
# segment.bytes 64 MiB) with N keyed 1 KiB records over 10,000 keys, then run an open-loop
# produce load of R records/s on a second topic `load` twice: once idle (baseline), once
# right after `cmp` is switched to cleanup.policy=compact (the cleaner starts within
# --log-cleaner-backoff-ms=200). Reports the load's p50/p99/p99.9 (coordinated-omission
# corrected, from `shardlog bench`), the cleaner's MiB/s read+written and bytes before/after
# from the broker's "cleaned log" lines, and how much of the load window the cleaner ran.
# Bounded: about 3 minutes per throttle value (--quick: about half). Ports 49170-49171.
# Results: perf/results/cleaner-<date>-<commit>.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/tests/interop/env.sh" # confluent-kafka from the interop venv
cd "$ROOT"
RECORDS=2500000; RATE=20000; DUR=10; THROTTLES="0 104857600"
while (($#)); do
  case "$1" in
    --quick) RECORDS=1000000; DUR=6 ;;
    --records) RECORDS="$2"; shift ;;
    --rate) RATE="$2"; shift ;;
    --throttles) THROTTLES="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cleaner.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
log() { echo "[cleaner $(date +%H:%M:%S)] $*" >&2; }
PORT=49170; ADMIN=49171
BIN="$ROOT/target/release/shardlog"
[[ "${CARGO_BUILD:-1}" == 1 ]] && cargo build --release --bin shardlog -q
TMP="$(mktemp -d /tmp/shardlog-cleaner.XXXXXX)"
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo nocommit)"
MD="$ROOT/perf/results/cleaner-$(date -u +%Y-%m-%d)-$COMMIT.md"
BROKER=""
stop() { [[ -n "$BROKER" ]] && { kill "$BROKER" 2>/dev/null || true; wait "$BROKER" 2>/dev/null || true; BROKER=""; }; }
trap 'stop; rm -rf "$TMP"' EXIT

bench() { # TOPIC JSON args...
  local topic="$1" json="$2"; shift 2
  timeout 600 taskset -c 0 "$BIN" bench produce --bootstrap "127.0.0.1:$PORT" --topic "$topic" \
    --record-size 1024 --quiet --json "$json" "$@" >/dev/null
}
pct() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['latency_us']; print('%.2f / %.2f / %.2f' % (s['p50']/1e3, s['p99']/1e3, s['p999']/1e3))" "$1"; }
alter() { # TOPIC KEY VALUE
  python3 - "127.0.0.1:$PORT" "$@" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigEntry, AlterConfigOpType
a = AdminClient({"bootstrap.servers": sys.argv[1]})
r = ConfigResource("topic", sys.argv[2], incremental_configs=[
    ConfigEntry(sys.argv[3], sys.argv[4], incremental_operation=AlterConfigOpType.SET)])
for f in a.incremental_alter_configs([r]).values():
    f.result(timeout=30)
PY
}

{
  echo "# Log cleaner: throughput and produce latency on the same shard ($(date -u +%F), commit $COMMIT)"
  echo
  echo "\`perf/cleaner.sh --records $RECORDS --rate $RATE\`: broker \`--shards 1\` on cpu 1, load generator on cpu 0;"
  echo "$RECORDS keyed 1 KiB records over 10,000 keys in 4 partitions of \`cmp\` (64 MiB segments), then"
  echo "an open-loop load of $RATE rec/s on topic \`load\` for $DUR s, idle and while \`cmp\` is cleaned."
  echo "Latencies are ms, corrected for coordinated omission. Cleaner MiB/s counts bytes read + written."
  echo
  echo "| cleaner limit | load p50 / p99 / p99.9, idle | same, while cleaning | cleaner MiB/s | cmp bytes before → after | cleaning time |"
  echo "|---|---|---|---|---|---|"
} >"$TMP/report.md"

for T in $THROTTLES; do
  rm -rf "$TMP/data"
  extra=()
  ((T > 0)) && extra=(--log-cleaner-io-max-bytes-per-second "$T")
  taskset -c 1 "$BIN" serve --shards 1 --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN" \
    --data-dir "$TMP/data" --log-cleaner-backoff-ms 200 --log-level info "${extra[@]}" \
    >"$TMP/server.log" 2>&1 &
  BROKER=$!
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
  log "limit $T: filling cmp with $RECORDS records"
  bench cmp "$TMP/fill.json" --partitions 4 --keys 10000 --key-size 16 --records "$RECORDS" \
    --topic-config cleanup.policy=delete --topic-config segment.bytes=67108864 --acks 1
  bench load "$TMP/warm.json" --partitions 1 --rate "$RATE" --duration 3
  log "baseline load"
  bench load "$TMP/idle.json" --rate "$RATE" --duration "$DUR"
  log "switching cmp to compact; load while cleaning"
  start_ns=$(date +%s%N)
  alter cmp cleanup.policy compact
  bench load "$TMP/busy.json" --rate "$RATE" --duration "$DUR"
  end_ns=$(date +%s%N)
  for _ in $(seq 300); do
    [[ $(grep -c "cleaned log" "$TMP/server.log" || true) -ge 4 ]] && break
    sleep 1
  done
  stats=$(python3 - "$TMP/server.log" "$start_ns" "$end_ns" <<'PY'
import re, sys, datetime
lines = [l for l in open(sys.argv[1]) if "cleaned log" in l and "cmp-" in l]
start, end = int(sys.argv[2]) / 1e9, int(sys.argv[3]) / 1e9
before = after = 0; rates = []; last = start
for l in lines:
    ts = datetime.datetime.strptime(l.split()[0][:26], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
    last = max(last, ts)
    before += int(re.search(r"bytes_before=(\d+)", l).group(1))
    after += int(re.search(r"bytes_after=(\d+)", l).group(1))
    rates.append(float(re.search(r"io_mib_per_s=([\d.]+)", l).group(1)))
mean = sum(rates) / len(rates) if rates else 0
overlap = max(0.0, min(last, end) - start) / (end - start)
print(f"{mean:.0f} | {before/2**20:.0f} MiB → {after/2**20:.1f} MiB | {last-start:.1f} s ({overlap*100:.0f}% of the load window)")
PY
)
  label=$([[ $T == 0 ]] && echo "unlimited" || echo "$((T / 1048576)) MiB/s")
  echo "| $label | $(pct "$TMP/idle.json") | $(pct "$TMP/busy.json") | $stats |" >>"$TMP/report.md"
  log "limit $T: $stats"
  stop
done
cp "$TMP/report.md" "$MD"
cat "$MD"
