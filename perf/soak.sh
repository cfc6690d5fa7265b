#!/usr/bin/env bash
# The one-hour soak of issue 19 (not in CI): mixed load on one broker with a SIGKILL every
# ten minutes, then checks for lost acknowledged records, RSS/open-file growth within each
# process lifetime, and unexpected ERROR lines. See perf/soak.py for what runs and checks.
#
#   perf/soak.sh                      # one hour, result in perf/results/<date>-soak.md
#   SOAK_DURATION_S=600 SOAK_KILL_EVERY_S=180 perf/soak.sh   # a short rehearsal
#
# Environment: SHARDLOG (binary; default target/release/shardlog, built if missing),
# PYTHON (default .interop-cache/venv/bin/python, created by tests/interop/install.sh),
# SOAK_DIR (work dir, default a temp dir; removed unless SOAK_KEEP=1), SOAK_CLIENT_DEBUG=1
# (librdkafka eos,msg debug log of each verified producer to SOAK_DIR/rdkafka-<codec>.log).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARDLOG=${SHARDLOG:-target/release/shardlog}
PYTHON=${PYTHON:-.interop-cache/venv/bin/python}
if [ ! -x "$SHARDLOG" ]; then cargo build --release --bin shardlog; fi
if [ ! -x "$PYTHON" ]; then bash tests/interop/install.sh; fi
"$PYTHON" -c 'import confluent_kafka' 2>/dev/null || {
  echo "soak: $PYTHON has no confluent_kafka; run tests/interop/install.sh" >&2; exit 2; }
DIR=${SOAK_DIR:-$(mktemp -d /tmp/shardlog-soak.XXXXXX)}
mkdir -p "$DIR"
DURATION=${SOAK_DURATION_S:-3600}
KILL_EVERY=${SOAK_KILL_EVERY_S:-600}
status=0
"$PYTHON" perf/soak.py --binary "$SHARDLOG" --out "$DIR" --duration-s "$DURATION" \
  --kill-every-s "$KILL_EVERY" | tee "$DIR/soak.out" || status=$?
out=perf/results/$(date -u +%Y-%m-%d)-soak.md
{
  echo "# Soak: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)"
  echo
  echo "Duration ${DURATION} s, SIGKILL every ${KILL_EVERY} s, broker \`--shards 2\`, machine: $(nproc) cores,"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "Result: $([ $status = 0 ] && echo PASS || echo FAIL) (exit $status)."
  echo
  echo '```json'
  cat "$DIR/result.json" 2>/dev/null || echo '{"error": "no result.json"}'
  echo '```'
  echo
  echo "Progress log:"
  echo '```'
  grep '^\[soak' "$DIR/soak.out" || true
  echo '```'
} > "$out"
echo "soak: wrote $out"
[ "${SOAK_KEEP:-0}" = 1 ] || rm -rf "$DIR"
exit $status
