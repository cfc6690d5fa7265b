#!/usr/bin/env bash
# Kafka's own tools against a three-node Shardlog cluster (issue 13): three combined
# broker+controller processes on 127.0.0.1, each with its own data dir, Kafka port, controller
# port and core; `kafka-topics.sh --create/--describe` (TopicCommand) with replication factor 3
# and `kafka-metadata-quorum.sh describe --status/--replication` (MetadataQuorumCommand).
# Prerequisites: tests/interop/install.sh (Kafka jars). Bounded in time.
# Usage: tests/cluster/run.sh [BASE_PORT]   (default 19400: Kafka 19401-3, controllers 19411-3)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh"
BASE="${1:-19400}"
BIN="$REPO/target/debug/shardlog"
cd "$REPO"
cargo build -q --bin shardlog
ROOT="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$ROOT"
}
trap cleanup EXIT
CLUSTER_ID="$("$BIN" format --print-random-uuid)"
VOTERS="1@127.0.0.1:$((BASE + 11)),2@127.0.0.1:$((BASE + 12)),3@127.0.0.1:$((BASE + 13))"
CORES="$(nproc)"
for id in 1 2 3; do
  "$BIN" format --cluster-id "$CLUSTER_ID" --node-id "$id" --data-dir "$ROOT/node-$id" >/dev/null
  "$BIN" serve --node-id "$id" --data-dir "$ROOT/node-$id" \
    --listen "127.0.0.1:$((BASE + id))" --admin-listen 127.0.0.1:0 \
    --controller-quorum-voters "$VOTERS" --controller-listen "127.0.0.1:$((BASE + 10 + id))" \
    --shards 1 --cpus "$((id % CORES))" --spin-before-park-us 0 --log-level warn \
    2>"$ROOT/node-$id.log" &
  PIDS+=($!)
done
for id in 1 2 3; do
  for _ in $(seq 300); do (echo >/dev/tcp/127.0.0.1/$((BASE + id))) 2>/dev/null && break; sleep 0.1; done
done
KAFKA_CLASSPATH="$("$REPO/perf/kafka/kafka.sh" classpath)"
export KAFKA_CLASSPATH
status=0
if ! timeout 540 python3 "$HERE/kafka_tools_check.py" \
  "127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2)),127.0.0.1:$((BASE + 3))"; then
  status=1
  for id in 1 2 3; do echo "--- node $id log (last 30 lines)"; tail -n 30 "$ROOT/node-$id.log"; done
fi
exit $status
