#!/usr/bin/env bash
# Kafka-conformance checks with real clients, each starting its own broker on 127.0.0.1
# (they restart it or need fresh state): KIP-74 large batches against small fetch limits,
# cold and warm; KIP-467 per-record produce errors. Every check is bounded.
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
exit $status
