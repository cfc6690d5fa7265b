#!/usr/bin/env bash
# Issue 43 side by side: three Shardlog nodes (`--shards 1`, each pinned to a core) and then
# three Apache Kafka KRaft nodes (combined broker+controller, 1 GiB heap, pinned the same
# way) on this host, one cluster at a time, each driven by the same client and script
# (perf/scale/scale_client.py, confluent-kafka): TOPICS topics x 3 partitions at RF 3 created
# in batches of 100, time to a full ISR, a full Metadata request, leaders and ISRs over a
# quiet window, one acks=all record to every partition, RSS per node.
#
#   perf/scale/vs_kafka.sh [TOPICS] [QUIET_S] [DATA_ROOT]     (defaults 1000, 60, a temp dir)
#
# Ports 31400-31499. Writes perf/results/<date>-scale-vs-kafka-<TOPICS>.md (JSON figures of
# both, the host's load average before and after: other sessions share the machine).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
TOPICS="${1:-1000}"
QUIET="${2:-60}"
ROOT="${3:-}"
SHARDLOG="${SHARDLOG:-$REPO/target/release/shardlog}"
[[ -x "$SHARDLOG" ]] || cargo build --release -q --bin shardlog
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh"
KAFKA_SH="$REPO/perf/kafka/kafka.sh"
CP="$("$KAFKA_SH" classpath)"
KVER="$("$KAFKA_SH" version)"
KAFKA_HOME="$REPO/.interop-cache/kafka-$KVER"
CORES="$(nproc)"
TMP="$(mktemp -d ${ROOT:+-p "$ROOT"})"
OUT="$REPO/perf/results/$(date -u +%F)-scale-vs-kafka-$TOPICS.md"
COMMIT="$(git rev-parse --short HEAD)"
PIDS=()
log() { echo "[vs_kafka $(date +%H:%M:%S)] $*" >&2; }
stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 60); do
    alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.5
  done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  PIDS=()
}
trap 'stop_all; rm -rf "$TMP"' EXIT
wait_port() { for _ in $(seq 600); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"

# ---- Shardlog ------------------------------------------------------------------------------
CID="$("$SHARDLOG" format --print-random-uuid)"
VOTERS="1@127.0.0.1:31411,2@127.0.0.1:31412,3@127.0.0.1:31413"
for id in 1 2 3; do
  "$SHARDLOG" format --cluster-id "$CID" --node-id "$id" --data-dir "$TMP/s$id" >/dev/null
  "$SHARDLOG" serve --node-id "$id" --data-dir "$TMP/s$id" --listen "127.0.0.1:$((31400 + id))" \
    --admin-listen 127.0.0.1:0 --controller-quorum-voters "$VOTERS" \
    --controller-listen "127.0.0.1:$((31410 + id))" --shards 1 --cpus "$((id % CORES))" \
    --spin-before-park-us 0 --log-level warn 2>"$TMP/s$id.log" &
  PIDS+=($!)
done
for p in 31401 31402 31403; do wait_port "$p" || { log "port $p never opened"; exit 1; }; done
sleep 3
log "Shardlog up"
SPIDS="$(IFS=,; echo "${PIDS[*]}")"
python3 perf/scale/scale_client.py --bootstrap 127.0.0.1:31401,127.0.0.1:31402,127.0.0.1:31403 \
  --topics "$TOPICS" --quiet-s "$QUIET" --pids "$SPIDS" >"$TMP/shardlog.json"
STALLS="$(cat "$TMP"/s?.log | grep -c 'event loop stalled' || true)"
LONGEST="$(cat "$TMP"/s?.log | sed -n 's/.*stalled for \([0-9]*\) ms.*/\1/p' | sort -n | tail -1)"
stop_all
rm -rf "$TMP"/s?

# ---- Kafka ---------------------------------------------------------------------------------
# shellcheck source=perf/kafka/cluster.sh
. "$REPO/perf/kafka/cluster.sh"
kafka_cluster_start "$TMP" 31420 1g
for p in 31421 31422 31423; do wait_port "$p" || { log "port $p never opened"; exit 1; }; done
sleep 8
log "Kafka $KVER up"
KPIDS="$(IFS=,; echo "${PIDS[*]}")"
python3 perf/scale/scale_client.py --bootstrap 127.0.0.1:31421,127.0.0.1:31422,127.0.0.1:31423 \
  --topics "$TOPICS" --quiet-s "$QUIET" --pids "$KPIDS" >"$TMP/kafka.json"
stop_all

{
  echo "# Scale side by side: $TOPICS topics x 3 partitions, RF 3, three nodes ($(date -u +%F))"
  echo
  echo "\`perf/scale/vs_kafka.sh $TOPICS $QUIET\` at $COMMIT; Kafka $KVER (1 GiB heap);"
  echo "one cluster at a time, same client (confluent-kafka $(python3 -c 'import confluent_kafka as c; print(c.version()[0], "on librdkafka", c.libversion()[0])'))."
  echo "Load average before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "- Shardlog: \`$(cat "$TMP/shardlog.json")\`"
  echo "  event-loop stalls > 100 ms (all nodes): $STALLS, longest ${LONGEST:-0} ms"
  echo "- Kafka: \`$(cat "$TMP/kafka.json")\`"
} >"$OUT"
cat "$OUT"
