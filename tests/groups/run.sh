#!/usr/bin/env bash
# Real-client consumer-group tests against a freshly started broker on 127.0.0.1:
# confluent-kafka (three consumers), kafka-python + Kafka's ConsumerGroupCommand (lag,
# reset, delete), Java kafka-clients (cooperative-sticky, static membership), and the
# kafkajs (producer + group consumers), the restart test (SIGTERM/SIGKILL; starts its own
# broker) and the fresh-broker coordinator test (issue 12; starts its own broker). Every
# test is bounded.
# Usage: tests/groups/run.sh [PORT]   (default 21170; restart test uses PORT+1, the
# fresh-broker test PORT+2). Below Linux's ephemeral range (32768-60999): CI runs this
# beside the cargo tests, and a client socket of theirs once held PORT+2.
# Prerequisites (all from tests/interop/install.sh): confluent-kafka and kafka-python (pip),
# the pinned Kafka jars (perf/kafka/kafka.sh fetch: Java classpath and ConsumerGroupCommand),
# kafkajs (npm ci in tests/interop/js). A missing one fails its test; nothing is skipped.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh" # python3 = the interop venv, once installed
PORT="${1:-21170}"
BIN="$REPO/target/debug/shardlog"
cd "$REPO"
cargo build -q --bin shardlog
DATA="$(mktemp -d)"
"$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA" --shards 2 --log-level warn &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
status=0
run() { echo "== $1"; shift; if ! timeout 300 "$@"; then echo "FAILED"; status=1; fi; }
run "confluent-kafka: three consumers" python3 "$HERE/three_consumers.py" "127.0.0.1:$PORT"
run "kafka-python + ConsumerGroupCommand" python3 "$HERE/kafka_python_and_tools.py" "127.0.0.1:$PORT" "$BIN"
run "java kafka-clients" java -Xmx256m -cp "$("$REPO/perf/kafka/kafka.sh" classpath)" \
  "$HERE/java/GroupCheck.java" "127.0.0.1:$PORT"
# kafkajs comes from the interop suite's pinned install (tests/interop/install.sh: npm ci).
KJS="$REPO/tests/interop/js/node_modules"
if [[ -d "$KJS/kafkajs" ]]; then
  run "kafkajs" env NODE_PATH="$KJS" KAFKAJS_NO_PARTITIONER_WARNING=1 \
    node "$HERE/kafkajs_group.js" "127.0.0.1:$PORT"
else
  echo "== kafkajs: not installed ($KJS/kafkajs missing: run tests/interop/install.sh)"
  echo "FAILED"
  status=1
fi
run "restart (SIGTERM, SIGKILL)" python3 "$HERE/restart.py" "$BIN" "$((PORT + 1))"
run "fresh broker: no NOT_COORDINATOR" python3 "$HERE/fresh_coordinator.py" "$BIN" "$((PORT + 2))"
exit $status
