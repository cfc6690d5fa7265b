#!/usr/bin/env bash
# Admin-API checks of issues 3 and 6 with real clients (confluent-kafka, the Java Admin and
# consumer, Kafka's CLI tools) against a freshly started broker on 127.0.0.1:
# CreatePartitions, DescribeCluster, DescribeConfigs, InitProducerId, OffsetForLeaderEpoch;
# DeleteRecords (AdminClient and DeleteRecordsCommand), ConfigCommand, time and size
# retention observed in the data directory (retention checks every 500 ms).
# Prerequisites: tests/interop/install.sh (confluent-kafka, Kafka jars). Bounded in time.
# Usage: tests/admin/run.sh [PORT]   (default 19290)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh" # python3 = the interop venv, once installed
PORT="${1:-19290}"
BIN="$REPO/target/debug/shardlog"
cd "$REPO"
cargo build -q --bin shardlog
DATA="$(mktemp -d)"
# --node-id 1: ConfigCommand's broker check describes "--entity-name 1", as Kafka's docs do.
"$BIN" serve --listen "127.0.0.1:$PORT" --admin-listen 127.0.0.1:0 --data-dir "$DATA" \
  --shards 2 --log-level warn --log-retention-check-interval-ms 500 \
  --log-cleaner-backoff-ms 500 --node-id 1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
status=0
run() { echo "== $1"; shift; if ! timeout 180 "$@"; then echo "FAILED"; status=1; fi; }
run "confluent-kafka admin" python3 "$HERE/admin_check.py" "127.0.0.1:$PORT"
KAFKA_CLASSPATH="$("$REPO/perf/kafka/kafka.sh" classpath)" || status=1
export KAFKA_CLASSPATH
run "java admin + OffsetForLeaderEpoch" java -Xmx256m -cp "$KAFKA_CLASSPATH" \
  "$HERE/java/EpochCheck.java" "127.0.0.1:$PORT"
run "confluent-kafka DeleteRecords + time/size retention" \
  python3 "$HERE/retention_check.py" "127.0.0.1:$PORT" "$DATA"
run "Kafka DeleteRecordsCommand + ConfigCommand" \
  python3 "$HERE/kafka_tools_check.py" "127.0.0.1:$PORT" "$BIN"
run "__consumer_offsets compacted by the cleaner" \
  python3 "$HERE/offsets_compaction_check.py" "127.0.0.1:$PORT" "$DATA"
exit $status
