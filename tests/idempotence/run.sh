#!/usr/bin/env bash
# Idempotent producers (issue 14) with real clients: a Java producer and a confluent-kafka
# producer with enable.idempotence=true, acks=all, while the broker is SIGKILLed over and
# over; every acknowledged record must be stored exactly once, in send order per partition.
# Prerequisites: tests/interop/install.sh (confluent-kafka, Kafka's jars).
# Usage: tests/idempotence/run.sh [PORT]   (default 24410; uses PORT and PORT+1)
# IDEMPOTENCE_KILLS (default 20, the CI variant, ~1-2 min); e.g. 200 for a longer run.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh" # python3 = the interop venv, once installed
PORT="${1:-24410}"
KILLS="${IDEMPOTENCE_KILLS:-20}"
cd "$REPO"
cargo build -q --bin shardlog
CP="$("$REPO/perf/kafka/kafka.sh" classpath)"
# Bounded: 20 kills take ~1-2 min; allow 30 s per kill beyond that.
timeout $((240 + KILLS * 30)) python3 "$HERE/kill_loop.py" "$REPO/target/debug/shardlog" \
  "$PORT" "$KILLS" "$CP"
