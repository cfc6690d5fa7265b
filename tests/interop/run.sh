#!/usr/bin/env bash
# Entry point of the interoperability suite (see README.md).
#
#   tests/interop/run.sh                         build Shardlog, start it, run the suite, stop it
#   tests/interop/run.sh --bootstrap HOST:PORT   run the suite against a running broker
#   tests/interop/run.sh --kafka                 start the pinned Apache Kafka and run against it
#   ... [--clients a,b] [--records N] [--workdir DIR]   passed to driver.py
#   INTEROP_PORTS="19200 19249" tests/interop/run.sh    pick the broker port from this range
#
# Shardlog is built in debug mode: `cargo test` (run just before in CI) has already built the
# debug binary, so this costs no extra compile on a 2-core machine, whereas a release build
# with thin LTO takes minutes; 10,000 records per client is a correctness load, not a speed one.
# Install the clients first with tests/interop/install.sh.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh" # python3 = the interop venv, once installed
KAFKA_SH="$REPO/perf/kafka/kafka.sh"
# The first free port of this range (INTEROP_PORTS="FIRST LAST" overrides it) is the broker's.
read -r -a PORT_RANGE <<<"${INTEROP_PORTS:-19150 19199}"
READY_TIMEOUT_S=60

bootstrap="" target="shardlog" driver_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bootstrap) bootstrap="$2"; target="existing"; shift 2 ;;
    --kafka) target="kafka"; shift ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) driver_args+=("$1"); shift ;;
  esac
done

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p
  for ((p = PORT_RANGE[0]; p <= PORT_RANGE[1]; p++)); do
    port_in_use "$p" || { echo "$p"; return 0; }
  done
  echo "no free port in ${PORT_RANGE[*]}" >&2
  return 1
}

tmp="$(mktemp -d /tmp/shardlog-interop-run.XXXXXX)"
broker_pid=""
cleanup() {
  local rc=$?
  if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
    echo "== interop: stopping shardlog (pid $broker_pid)"
    kill -TERM "$broker_pid" 2>/dev/null || true
    for _ in $(seq 1 80); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$broker_pid" 2>/dev/null || true
  fi
  if [[ "$target" == "kafka" ]]; then "$KAFKA_SH" stop --dir "$tmp/kafka" || true; fi
  if [[ $rc -ne 0 && -f "$tmp/shardlog.log" ]]; then
    echo "== interop: last warnings/errors of the broker log:"
    grep -E "WARN|ERROR|panic" "$tmp/shardlog.log" | tail -n 20 || true
  fi
  if [[ $rc -eq 0 ]]; then rm -rf "$tmp"; else echo "== interop: logs kept in $tmp"; fi
  exit $rc
}
trap cleanup EXIT INT TERM

start_shardlog() {
  echo "== interop: cargo build --bin shardlog (debug)"
  (cd "$REPO" && cargo build --bin shardlog)
  local port; port="$(free_port)"
  "$REPO/target/debug/shardlog" serve --listen "127.0.0.1:$port" --data-dir "$tmp/data" \
    --shards 2 >"$tmp/shardlog.log" 2>&1 &
  broker_pid=$!
  local waited=0
  until port_in_use "$port"; do
    if ! kill -0 "$broker_pid" 2>/dev/null; then
      tail -n 40 "$tmp/shardlog.log" >&2
      echo "== interop: shardlog exited during start-up (log above)" >&2
      exit 1
    fi
    ((waited++ < READY_TIMEOUT_S * 4)) || { echo "shardlog not listening after ${READY_TIMEOUT_S}s" >&2; exit 1; }
    sleep 0.25
  done
  bootstrap="127.0.0.1:$port"
  echo "== interop: shardlog pid $broker_pid on $bootstrap, log $tmp/shardlog.log"
}

case "$target" in
  shardlog) start_shardlog ;;
  kafka)
    port="$(free_port)"
    "$KAFKA_SH" start --port "$port" --dir "$tmp/kafka" --controller-port "$(( port == PORT_RANGE[1] ? port - 1 : port + 1 ))" >/dev/null
    bootstrap="127.0.0.1:$port" ;;
esac

echo "== interop: building the Java client program (mvn -o)"
mvn -q -o -B -Dstyle.color=never -f "$HERE/java/pom.xml" compile \
  || echo "== interop: Java build failed (run tests/interop/install.sh); java-clients will fail" >&2

# Offline, like mvn -o: install.sh filled the module cache; this picks up edits of go/.
echo "== interop: building the Go client programs (go build, offline)"
bash "$HERE/go/build.sh" --offline \
  || echo "== interop: Go build failed (run tests/interop/install.sh); franz-go and sarama will fail" >&2

echo "== interop: self-tests of the checks"
(cd "$HERE" && python3 -m unittest -q test_scenario)

echo "== interop: suite against $target broker $bootstrap"
cd "$HERE"
python3 driver.py --bootstrap "$bootstrap" "${driver_args[@]+"${driver_args[@]}"}"
