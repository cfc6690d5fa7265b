#!/usr/bin/env bash
# Admin-API checks of issue 3 with real clients (confluent-kafka and the Java Admin and
# consumer) against a freshly started broker on 127.0.0.1: CreatePartitions,
# DescribeCluster, DescribeConfigs, InitProducerId, OffsetForLeaderEpoch.
# Prerequisites: tests/interop/install.sh (confluent-kafka, Kafka jars). Bounded in time.
# Usage: tests/admin/run.sh [PORT]   (default 19290)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PORT="${1:-19290}"
BIN="$REPO/target/debug/shardlog"
cd "$REPO"
cargo build -q --bin shardlog
DATA="$(mktemp -d)"
"$BIN" serve --listen "127.0.0.1:$PORT" --admin-listen 127.0.0.1:0 --data-dir "$DATA" \
  --shards 2 --log-level warn &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
status=0
run() { echo "== $1"; shift; if ! timeout 180 "$@"; then echo "FAILED"; status=1; fi; }
run "confluent-kafka admin" python3 "$HERE/admin_check.py" "127.0.0.1:$PORT"
run "java admin + OffsetForLeaderEpoch" java -Xmx256m -cp "$("$REPO/perf/kafka/kafka.sh" classpath)" \
  "$HERE/java/EpochCheck.java" "127.0.0.1:$PORT"
exit $status
