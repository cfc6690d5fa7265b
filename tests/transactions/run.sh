#!/usr/bin/env bash
# Transactions (issue 17) with real clients: confluent-kafka's commit/abort with read_committed
# and read_uncommitted consumers, zombie fencing and the transaction timeout, then
# exactly-once consume-transform-produce loops (confluent-kafka and the Java client with
# sendOffsetsToTransaction) while the app and the broker are SIGKILLed.
# Prerequisites: tests/interop/install.sh (confluent-kafka, Kafka's jars).
# Usage: tests/transactions/run.sh [PORT]   (default 24430; uses PORT..PORT+5)
# TXN_APP_KILLS (default 4) and TXN_BROKER_KILLS (default 3) per client.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh"
PORT="${1:-24430}"
cd "$REPO"
cargo build -q --bin shardlog
CP="$("$REPO/perf/kafka/kafka.sh" classpath)"
DATA="$(mktemp -d)"
BROKER_PID=""
cleanup() {
  if [[ -n "$BROKER_PID" ]]; then kill "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true; fi
  rm -rf "$DATA"
}
trap cleanup EXIT
"$REPO/target/debug/shardlog" serve --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$((PORT + 1))" \
  --data-dir "$DATA" --shards 2 --log-level warn \
  --transaction-abort-timed-out-transaction-cleanup-interval-ms 500 2>"$DATA.log" &
BROKER_PID=$!
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
timeout 120 python3 "$HERE/smoke.py" "127.0.0.1:$PORT"
timeout 180 python3 "$HERE/fencing_timeout.py" "127.0.0.1:$PORT"
# kafka-transactions.sh list/describe against the transactions above.
timeout 120 java -cp "$CP" org.apache.kafka.tools.TransactionsCommand \
  --bootstrap-server "127.0.0.1:$PORT" list | tee "$DATA/list.txt"
grep -q "CompleteCommit" "$DATA/list.txt"
ID="$(awk 'NR > 1 && $4 == "CompleteCommit" { print $1; exit }' "$DATA/list.txt")"
timeout 120 java -cp "$CP" org.apache.kafka.tools.TransactionsCommand \
  --bootstrap-server "127.0.0.1:$PORT" describe --transactional-id "$ID"
# shardlog's own view: nothing open now, every id with --all.
"$REPO/target/debug/shardlog" transactions -b "127.0.0.1:$PORT" | tee "$DATA/open.txt"
test "$(wc -l <"$DATA/open.txt")" -eq 1
"$REPO/target/debug/shardlog" transactions --all -b "127.0.0.1:$PORT" >"$DATA/all.txt"
grep -q CompleteAbort "$DATA/all.txt"
# kafka-transactions.sh find-hanging and abort (an open transaction aborted by hand).
timeout 300 python3 "$HERE/abort_by_hand.py" "127.0.0.1:$PORT"
kill "$BROKER_PID"; wait "$BROKER_PID" 2>/dev/null || true; BROKER_PID=""
timeout 900 python3 "$HERE/eos.py" "$REPO/target/debug/shardlog" "$((PORT + 2))" \
  "${TXN_APP_KILLS:-4}" "${TXN_BROKER_KILLS:-3}" "$CP" python java
echo "transactions: ok"
