#!/usr/bin/env bash
# Transactional vs idempotent producer on Shardlog and on Apache Kafka 4.1 (issue 17's
# measurement): one broker each on this host, both up for the whole run, loaded in turn
# (Shardlog, Kafka, Shardlog, ...), each round running perf/txn_bench.py's three modes
# (idempotent; a transaction committed every 100 ms; every 1,000 records) with
# confluent-kafka. Not in CI.
#
#   perf/txn_vs_kafka.sh [--rounds N] [--records N] [--out FILE]
#
# Environment: SHARDLOG (default target/release/shardlog; built when missing),
# SHARDLOG_BUILD (its description in the result), PYTHON (default the interop venv).
# Ports 31300-31319. Shardlog `--shards 2` with its default durability (fsync per batch);
# Kafka with its defaults (no fsync per batch), heap 1 GiB.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
ROUNDS=2
RECORDS=100000
OUT="$REPO/perf/results/$(date -u +%F)-txn-vs-kafka.md"
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --records) RECORDS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "txn_vs_kafka.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
SHARDLOG="${SHARDLOG:-$REPO/target/release/shardlog}"
[[ -x "$SHARDLOG" ]] || cargo build --release -q --bin shardlog
BUILD="${SHARDLOG_BUILD:-$SHARDLOG}"
PYTHON="${PYTHON:-$REPO/.interop-cache/venv/bin/python}"
TMP="$(mktemp -d)"
SPID=""
cleanup() {
  [[ -n "$SPID" ]] && kill "$SPID" 2>/dev/null || true
  "$REPO/perf/kafka/kafka.sh" stop --dir "$TMP/k" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
"$SHARDLOG" serve --listen 127.0.0.1:31311 --admin-listen 127.0.0.1:0 --data-dir "$TMP/s" \
  --shards 2 --log-level warn 2>"$TMP/s.log" &
SPID=$!
"$REPO/perf/kafka/kafka.sh" start --port 31301 --controller-port 31302 --dir "$TMP/k" \
  --heap 1g >/dev/null
for _ in $(seq 300); do (echo >/dev/tcp/127.0.0.1/31311) 2>/dev/null && break; sleep 0.2; done
{
  echo "# Transactional producer: Shardlog vs Apache Kafka $("$REPO/perf/kafka/kafka.sh" version) ($(date -u +%FT%H:%MZ))"
  echo
  echo "One broker each on one $(nproc)-core host shared with other sessions (load average"
  echo "$LOAD_BEFORE before). Shardlog: $BUILD, \`--shards 2\`, fsync per batch (its default);"
  echo "Kafka: defaults (no fsync per batch), heap 1 GiB. Client: confluent-kafka"
  echo "(\`perf/txn_bench.py\`), $RECORDS records of 1 KiB per mode, 3 partitions, acks=all,"
  echo "idempotence on, linger 5 ms; $ROUNDS rounds, brokers loaded in turn."
  echo
  echo '```'
  for r in $(seq "$ROUNDS"); do
    for b in shardlog:127.0.0.1:31311 kafka:127.0.0.1:31301; do
      name="${b%%:*}"
      addr="${b#*:}"
      "$PYTHON" "$REPO/perf/txn_bench.py" "$addr" "$RECORDS" 1024 2>/dev/null |
        sed "s/^/round $r $name  /"
    done
  done
  echo '```'
  echo
  echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
} | tee "$OUT"
