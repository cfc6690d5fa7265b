#!/usr/bin/env bash
# The replication throttle's effect on real processes (issue 16): three Shardlog brokers
# (combined broker+controller, `--shards N` each); a one-partition topic on broker 1 alone
# is filled with SIZE MiB, then Kafka's `kafka-reassign-partitions.sh --execute` adds broker
# 2 as a replica, once with `--throttle RATE` (leader/follower.replication.throttled.rate
# on the brokers, *.replication.throttled.replicas on the topic) and once without, each on
# a fresh topic. Every second the new replica's `shardlog_replication_bytes_in` (admin
# /metrics, summed over its shards) and the partition's ISR are sampled, until broker 2 is
# in the ISR; then `--verify` (which clears the throttles). Reported per run: catch-up time,
# mean rate over the whole catch-up, the steady rate (after the first 12 s: Kafka's rate
# window lets about 10 s of the quota through as a first burst), and the peak 1 s rate.
#
#   perf/replication/throttle.sh [--size-mib 200] [--rate 2097152] [--shards 2] [--out FILE]
#
# Bounded (not in CI): each catch-up is given at most 4 × SIZE / RATE + 120 s.
# Ports 32711-32733 (Kafka 327[1]1-3, controllers 327[2]1-3, admin 327[3]1-3).
# Environment: RUNS ("throttled unthrottled": which runs), SHARDLOG (default
# target/debug/shardlog; built when missing); the Kafka
# jars and the interop venv (tests/interop/install.sh).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
SIZE_MIB=200
RATE=2097152
SHARDS=2
OUT="$REPO/perf/results/$(date -u +%F)-replication-throttle.md"
while (($#)); do
  case "$1" in
    --size-mib) SIZE_MIB="$2"; shift ;;
    --rate) RATE="$2"; shift ;;
    --shards) SHARDS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "throttle.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
SHARDLOG="${SHARDLOG:-$REPO/target/debug/shardlog}"
[[ -x "$SHARDLOG" ]] || cargo build -q --bin shardlog
KAFKA_SH="$REPO/perf/kafka/kafka.sh"
PY="$REPO/.interop-cache/venv/bin/python"
[[ -x "$PY" ]] || { echo "throttle.sh: no interop venv (tests/interop/install.sh)" >&2; exit 1; }
TMP="$(mktemp -d)"
PIDS=()
log() { echo "[throttle $(date +%H:%M:%S)] $*" >&2; }
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 2
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
wait_port() { for _ in $(seq 600); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"

CID="$("$SHARDLOG" format --print-random-uuid)"
VOTERS="1@127.0.0.1:32721,2@127.0.0.1:32722,3@127.0.0.1:32723"
for id in 1 2 3; do
  "$SHARDLOG" format --cluster-id "$CID" --node-id "$id" --data-dir "$TMP/s$id" >/dev/null
  "$SHARDLOG" serve --node-id "$id" --data-dir "$TMP/s$id" --listen "127.0.0.1:$((32710 + id))" \
    --admin-listen "127.0.0.1:$((32730 + id))" --controller-quorum-voters "$VOTERS" \
    --controller-listen "127.0.0.1:$((32720 + id))" --shards "$SHARDS" \
    --shard-balance-enable false --spin-before-park-us 0 --log-level warn 2>"$TMP/s$id.log" &
  PIDS+=($!)
done
BOOT="127.0.0.1:32711,127.0.0.1:32712,127.0.0.1:32713"
for p in 32711 32712 32713 32731 32732 32733; do wait_port "$p" || { log "port $p never opened"; exit 1; }; done
sleep 5 # registrations and unfencing
log "cluster up ($BOOT), $SHARDS shards per broker"

run() { # label topic throttle(0 = none)
  local label="$1" topic="$2" throttle="$3"
  "$KAFKA_SH" tool org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:32711 \
    --create --topic "$topic" --replica-assignment 1 >"$TMP/$topic.create" 2>&1
  local records=$((SIZE_MIB * 16))
  log "$label: filling $topic with $SIZE_MIB MiB on broker 1"
  if ! "$SHARDLOG" bench produce --bootstrap 127.0.0.1:32711 --topic "$topic" \
    --records "$records" --record-size 64KiB --acks 1 --quiet >"$TMP/$topic.fill" 2>&1; then
    log "$label: the fill failed, run skipped: $(tail -n 3 "$TMP/$topic.fill")"
    return 0
  fi
  echo "{\"version\":1,\"partitions\":[{\"topic\":\"$topic\",\"partition\":0,\"replicas\":[1,2]}]}" \
    >"$TMP/$topic.json"
  local extra=()
  [[ "$throttle" != 0 ]] && extra=(--throttle "$throttle")
  local limit=$((4 * SIZE_MIB * 1048576 / (throttle == 0 ? 1048576 : throttle) + 120))
  "$PY" - "$BOOT" "$topic" "$limit" "$TMP/$topic.samples" <<'EOF' &
import json, sys, time, urllib.request
from confluent_kafka.admin import AdminClient
boot, topic, limit, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
admin = AdminClient({"bootstrap.servers": boot})
def scrape(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name):
            total += float(line.rsplit(" ", 1)[1])
    return total
t0 = time.time()
samples = []
isr = []
while time.time() - t0 < limit:
    try:
        isr = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs
        samples.append({"t": round(time.time() - t0, 3),
                        "bytes_in": scrape(32732, "shardlog_replication_bytes_in_total"),
                        "throttled_leader": scrape(32731, 'shardlog_replication_throttled_bytes_total{side="leader"}'),
                        "throttled_follower": scrape(32732, 'shardlog_replication_throttled_bytes_total{side="follower"}'),
                        "isr": sorted(isr)})
    except Exception as err:  # a loaded host: a slow answer is skipped, not fatal
        print(f"sample skipped: {err}", file=sys.stderr)
    if 2 in isr:
        break
    time.sleep(max(0.0, 1.0 - (time.time() - t0) % 1.0))
json.dump(samples, open(out, "w"))
EOF
  local poller=$!
  sleep 0.5
  log "$label: reassigning $topic-0 {1} -> {1,2} ${extra[*]:-(unthrottled)}"
  "$KAFKA_SH" tool org.apache.kafka.tools.reassign.ReassignPartitionsCommand \
    --bootstrap-server 127.0.0.1:32711 --reassignment-json-file "$TMP/$topic.json" --execute \
    "${extra[@]+"${extra[@]}"}" >"$TMP/$topic.execute" 2>&1
  wait "$poller" || true
  "$KAFKA_SH" tool org.apache.kafka.tools.reassign.ReassignPartitionsCommand \
    --bootstrap-server 127.0.0.1:32711 --reassignment-json-file "$TMP/$topic.json" --verify \
    >"$TMP/$topic.verify" 2>&1 || true
  "$PY" - "$TMP/$topic.samples" "$label" "$throttle" "$SIZE_MIB" >>"$TMP/rows" <<'EOF'
import json, sys
samples, label, throttle, size = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), sys.argv[4]
mib = 1048576.0
first, last = samples[0], samples[-1]
done = 2 in last["isr"]
moved = last["bytes_in"] - first["bytes_in"]
span = max(last["t"] - first["t"], 1e-9)
steady = [s for s in samples if s["t"] >= 12.0]
steady_rate = (steady[-1]["bytes_in"] - steady[0]["bytes_in"]) / max(steady[-1]["t"] - steady[0]["t"], 1e-9) / mib if len(steady) > 2 else float("nan")
peak = max(((b["bytes_in"] - a["bytes_in"]) / max(b["t"] - a["t"], 1e-9) for a, b in zip(samples, samples[1:])), default=0.0) / mib
print(json.dumps({"label": label, "throttle_mib_s": throttle / mib if throttle else None, "size_mib": float(size),
                  "caught_up": done, "catch_up_s": round(last["t"], 1), "moved_mib": round(moved / mib, 1),
                  "mean_mib_s": round(moved / span / mib, 2), "steady_mib_s": round(steady_rate, 2),
                  "peak_mib_s": round(peak, 2),
                  "throttled_leader_mib": round((last["throttled_leader"] - first["throttled_leader"]) / mib, 1),
                  "throttled_follower_mib": round((last["throttled_follower"] - first["throttled_follower"]) / mib, 1)}))
EOF
  log "$label: $(tail -n 1 "$TMP/rows")"
}

touch "$TMP/rows"
for r in ${RUNS:-throttled unthrottled}; do
  case "$r" in
    throttled) run throttled thr-a "$RATE" ;;
    unthrottled) run unthrottled thr-b 0 ;;
    *) log "unknown run $r" ;;
  esac
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"
BUILD="debug build ($SHARDLOG)"
[[ "$SHARDLOG" == */release/* ]] && BUILD="release build"
mkdir -p "$(dirname "$OUT")"
{
  echo "| run | throttle MiB/s | caught up | catch-up s | moved MiB | mean MiB/s | steady MiB/s (t ≥ 12 s) | peak 1 s MiB/s | throttled leader/follower MiB |"
  echo "|---|---|---|---|---|---|---|---|---|"
  "$PY" - "$TMP/rows" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    cells = [r["label"], r["throttle_mib_s"] or "-", r["caught_up"], r["catch_up_s"], r["moved_mib"],
             r["mean_mib_s"], r["steady_mib_s"], r["peak_mib_s"],
             f'{r["throttled_leader_mib"]} / {r["throttled_follower_mib"]}']
    print("| " + " | ".join(str(c) for c in cells) + " |")
EOF
  echo
  echo "$SIZE_MIB MiB, $SHARDS shards per broker, $BUILD, commit $(git rev-parse --short HEAD), load average before $LOAD_BEFORE, after $LOAD_AFTER."
} >"$OUT.part"
cat "$OUT.part"
log "table written to $OUT.part (the results file is edited by hand around it)"
