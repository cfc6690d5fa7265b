#!/usr/bin/env bash
# Kafka-conformance checks with real clients, each starting its own broker on 127.0.0.1
# (they restart it or need fresh state): KIP-74 large batches against small fetch limits,
# cold and warm; then, on one shared broker, the broker version clients infer and KIP-467
# per-record produce errors. Every check is bounded.
# Prerequisites: tests/interop/install.sh (confluent-kafka, kafka-python, Kafka's jars).
# Usage: tests/conformance/run.sh [PORT]   (default 19410; checks use PORT, PORT+1, ...)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh" # python3 = the interop venv, once installed
PORT="${1:-19410}"
BIN="$REPO/target/debug/shardlog"
cd "$REPO"
cargo build -q --bin shardlog
status=0
run() { echo "== $1"; shift; if ! timeout 300 "$@"; then echo "FAILED"; status=1; fi; }
run "KIP-74: large batches, small fetch limits (confluent-kafka, kafka-python)" \
  python3 "$HERE/large_batches.py" "$BIN" "$PORT"
# The checks below share one broker.
DATA="$(mktemp -d)"
"$BIN" serve --listen "127.0.0.1:$((PORT + 1))" --data-dir "$DATA" --shards 2 --log-level warn &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$((PORT + 1))") 2>/dev/null && break; sleep 0.1; done
BS="127.0.0.1:$((PORT + 1))"
run "API versions at Kafka 4.1's level (kafka-python's inferred version)" \
  python3 "$HERE/inferred_version.py" "$BS"
run "KIP-467: per-record produce errors (confluent-kafka)" python3 "$HERE/record_errors.py" "$BS"
run "KIP-467: per-record produce errors (Java producer)" java -Xmx256m \
  -cp "$("$REPO/perf/kafka/kafka.sh" classpath)" "$HERE/java/RecordErrorsCheck.java" "$BS"
exit $status
