#!/usr/bin/env bash
# Produce and consume throughput and latency over PLAINTEXT, SSL (TLS 1.3) and SASL_SSL
# (SCRAM-SHA-512) against one broker, with the bundled load generator (issue 34's measure).
#
#   perf/tls.sh [--duration S] [--record-size BYTES] [--binary PATH]
#
# One release broker (`--shards 1` on cpu 1, three listeners on one port block) and the
# bench client on cpu 0 (design.md §7's split). For each protocol, in turn on the same broker:
# a closed-loop produce of S seconds (1 KiB records, acks=1, 4 connections) into a fresh
# topic of 4 partitions, then a consume of what it wrote. Prints the SUMMARY lines and writes
# perf/results/tls-<date>-<commit>.md. Ports 26660-26663. Never asserted anywhere: figures
# for the issue's "TLS >= 75% of plaintext" goal, measured, not enforced.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DUR=15; SIZE=1024; BIN="$ROOT/target/release/shardlog"
while (($#)); do
  case "$1" in
    --duration) DUR="$2"; shift ;;
    --record-size) SIZE="$2"; shift ;;
    --binary) BIN="$2"; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tls.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$BIN" ]] || { echo "tls.sh: build it first: cargo build --release --bin shardlog" >&2; exit 2; }
WORK="$(mktemp -d)"
PID=""
cleanup() { [[ -n "$PID" ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
P=26660
"$BIN" certs --out "$WORK/certs" >/dev/null
cat >"$WORK/broker.toml" <<EOF
listeners = "PLAINTEXT://127.0.0.1:$P,SSL://127.0.0.1:$((P + 1)),SASL_SSL://127.0.0.1:$((P + 2))"
"ssl.keystore.location" = "$WORK/certs/broker.pem"
"listener.name.sasl_ssl.sasl.enabled.mechanisms" = "SCRAM-SHA-512"
EOF
taskset -c 1 "$BIN" serve --config "$WORK/broker.toml" --data-dir "$WORK/data" --shards 1 \
  --cpus 1 --admin-listen "127.0.0.1:$((P + 3))" >"$WORK/broker.log" 2>&1 &
PID=$!
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$((P + 2))) 2>/dev/null && break; sleep 0.1; done
# The SCRAM user, over PLAINTEXT (AlterUserScramCredentials with Kafka's own tool).
CP="$(bash perf/kafka/kafka.sh classpath 2>/dev/null || true)"
java -cp "$CP" kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$P" --alter \
  --entity-type users --entity-name bench --add-config 'SCRAM-SHA-512=[password=bench-secret]' \
  >/dev/null
declare -A FLAGS=(
  [PLAINTEXT]="-b 127.0.0.1:$P"
  [SSL]="-b 127.0.0.1:$((P + 1)) --security-protocol SSL --ssl-ca $WORK/certs/ca.pem"
  [SASL_SSL]="-b 127.0.0.1:$((P + 2)) --security-protocol SASL_SSL --ssl-ca $WORK/certs/ca.pem --sasl-mechanism SCRAM-SHA-512 --sasl-username bench --sasl-password bench-secret"
)
OUT="$WORK/summary.txt"
for proto in PLAINTEXT SSL SASL_SSL; do
  topic="tls-$(echo "$proto" | tr 'A-Z_' 'a-z-')"
  # shellcheck disable=SC2086
  p=$(taskset -c 0 "$BIN" bench produce ${FLAGS[$proto]} --topic "$topic" --partitions 4 \
    --record-size "$SIZE" --connections 4 --duration "${DUR}s" --acks 1 --quiet | grep '^SUMMARY')
  n=$(sed -n 's/.* records=\([0-9]*\) .*/\1/p' <<<"$p")
  # shellcheck disable=SC2086
  c=$(taskset -c 0 "$BIN" bench consume ${FLAGS[$proto]} --topic "$topic" --from earliest \
    --records "$n" --duration 60s --quiet | grep '^SUMMARY')
  echo "$proto $p" | tee -a "$OUT"
  echo "$proto $c" | tee -a "$OUT"
done
COMMIT="$(git rev-parse --short HEAD)"
RES="perf/results/tls-$(date +%Y-%m-%d)-$COMMIT.md"
{
  echo "# TLS and SASL_SSL against PLAINTEXT, shardlog bench ($(date -u +%FT%TZ), commit $COMMIT)"
  echo
  echo "Command: \`perf/tls.sh --duration $DUR --record-size $SIZE\`. Machine: $(nproc) cores,"
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs). Broker: one shard on cpu 1;"
  echo "bench on cpu 0. TLS 1.3 (rustls' default suite order), SCRAM-SHA-512 per connection."
  echo
  echo '```'
  cat "$OUT"
  echo '```'
} >"$RES"
echo "wrote $RES"
