#!/usr/bin/env bash
# Client quotas of issue 18 with real clients against a freshly started broker on 127.0.0.1:
# Kafka's ConfigCommand (kafka-configs.sh) sets and describes client-id quotas (one client
# and the <default> entity) and deletes one; a confluent-kafka producer with a
# producer_byte_rate is throttled (librdkafka's `throttle` statistics) and held near its
# share by the broker's muting, while another client id is not; the Java producer's
# produce-throttle-time metrics show the throttling (java/ThrottleCheck.java).
# tests/quotas/entities.py does the same for user and user+client-id entities.
# tests/quotas/pipelining.py (issue 32): a 1 MiB/s producer quota holds within +-10 % over
# 20 s for a pipelining confluent-kafka producer (librdkafka's defaults, acks=1, linger.ms=5,
# queue.buffering.max.kbytes=4096) and for the Java producer with its defaults.
# Prerequisites: tests/interop/install.sh (confluent-kafka, Kafka jars). Bounded: < 7 min.
# Usage: tests/quotas/run.sh [PORT]   (default 26190)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh" # python3 = the interop venv, once installed
PORT="${1:-26190}"
BIN="$REPO/target/debug/shardlog"
cd "$REPO"
cargo build -q --bin shardlog
DATA="$(mktemp -d)"
# Two 1 s quota samples so the measured rate settles within the test's few seconds.
"$BIN" serve --listen "127.0.0.1:$PORT" --admin-listen 127.0.0.1:0 --data-dir "$DATA" \
  --shards 2 --log-level warn --quota-window-num 2 --quota-window-size-seconds 1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
KAFKA_CLASSPATH="$("$REPO/perf/kafka/kafka.sh" classpath)"
export KAFKA_CLASSPATH
echo "== ConfigCommand + confluent-kafka producer throttled"
timeout 110 python3 "$HERE/quota_check.py" "127.0.0.1:$PORT" 2
echo "== ConfigCommand users / users+clients entities (KIP-55)"
timeout 170 python3 "$HERE/entities.py" "127.0.0.1:$PORT" 2
echo "== pipelining producers held to the quota: confluent-kafka and Java (issue 32)"
timeout 150 python3 "$HERE/pipelining.py" "127.0.0.1:$PORT"
