#!/usr/bin/env bash
# TLS and SASL with real clients (issue 34) against a freshly started broker with three
# listeners on 127.0.0.1: PLAINTEXT (PORT), SSL with mutual TLS (PORT+1) and SASL_SSL with
# PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (PORT+2), certificates from `shardlog certs`.
# Kafka's ConfigCommand (kafka-configs.sh) creates SCRAM users; confluent-kafka produces and
# consumes over SSL (principal User:CN=alice), SASL_SSL SCRAM-SHA-512 and SASL_SSL PLAIN; the
# Java console producer and consumer over SASL_SSL SCRAM-SHA-512; a wrong password fails
# while another client carries on; a plaintext client on the TLS port is closed.
# Prerequisites: tests/interop/install.sh (confluent-kafka, Kafka jars). Bounded: < 2 min.
# Usage: tests/security/run.sh [PORT]   (default 26290)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh" # python3 = the interop venv, once installed
PORT="${1:-26290}"
BIN="$REPO/target/debug/shardlog"
cd "$REPO"
cargo build -q --bin shardlog
WORK="$(mktemp -d)"
"$BIN" certs --out "$WORK/certs" --client alice >/dev/null
cat >"$WORK/broker.toml" <<TOML
listeners = "PLAINTEXT://127.0.0.1:$PORT,SSL://127.0.0.1:$((PORT + 1)),SASL_SSL://127.0.0.1:$((PORT + 2))"
"ssl.keystore.location" = "$WORK/certs/broker.pem"
"ssl.truststore.location" = "$WORK/certs/ca.pem"
"listener.name.ssl.ssl.client.auth" = "required"
"listener.name.sasl_ssl.plain.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="carol-secret";'
TOML
"$BIN" serve --config "$WORK/broker.toml" --admin-listen 127.0.0.1:0 --data-dir "$WORK/data" \
  --shards 2 --log-level info 2>"$WORK/broker.log" &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$((PORT + 2))") 2>/dev/null && break; sleep 0.1; done
KAFKA_CLASSPATH="$("$REPO/perf/kafka/kafka.sh" classpath)"
export KAFKA_CLASSPATH
if ! timeout 150 python3 "$HERE/check.py" "$PORT" "$WORK"; then
  echo "== broker log (last 40 lines)"
  tail -n 40 "$WORK/broker.log"
  exit 1
fi
