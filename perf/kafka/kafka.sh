#!/usr/bin/env bash
# Apache Kafka launcher for perf/ and tests/interop/: a single-node KRaft broker (combined
# broker+controller) from ONE pinned Kafka version whose jars come from Maven Central.
#
#   kafka.sh fetch                      gather the jars into the cache (idempotent)
#   kafka.sh start --port P --dir D [--cpu N] [--controller-port C] [--heap SIZE]
#                  [--set key=value]... start, wait until ready, print the pid on stdout
#   kafka.sh stop --dir D               SIGTERM, wait, SIGKILL after 30 s
#   kafka.sh status --dir D             exit 0 if running
#   kafka.sh tool MainClass [args...]   run a Kafka CLI tool by main class, e.g.
#       kafka.sh tool org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:P --list
#       kafka.sh tool org.apache.kafka.tools.ProducerPerformance --topic t ...
#   kafka.sh classpath                  print the classpath (for `java -cp`)
#   kafka.sh version                    print the pinned Kafka version
#
# Why Maven: the Maven Central artifacts have no bin/*.sh wrappers, so the broker
# (kafka.Kafka), the storage formatter (kafka.tools.StorageTool) and the tools are run by
# main class; main classes were confirmed with `jar tf` on the pinned version.
#
# Environment: KAFKA_CACHE_DIR (default <repo>/.interop-cache), JAVA (default java),
# MVN (default mvn). Listeners bind 127.0.0.1 only. Human messages go to stderr; `start`
# prints only the pid on stdout so `pid=$(kafka.sh start ...)` works. Server log:
# D/server.log; config: D/server.properties; data: D/data.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$SCRIPT_DIR/pom.xml")"
CACHE_DIR="${KAFKA_CACHE_DIR:-$REPO_ROOT/.interop-cache}"
KAFKA_HOME="$CACHE_DIR/kafka-$KAFKA_VERSION"
LIB_DIR="$KAFKA_HOME/libs"
JAVA="${JAVA:-java}"
MVN="${MVN:-mvn}"
READY_TIMEOUT_S=120
STOP_TIMEOUT_S=30
# Kafka's own kafka-run-class.sh defaults, so perf compares against Kafka as shipped.
KAFKA_JVM_PERF_OPTS=(-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20
  -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent
  -XX:MaxInlineLevel=15 -Djava.awt.headless=true)

log() { echo "kafka.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Gather the jars once; a lock keeps concurrent callers (bench + interop) from racing.
fetch() {
  [[ -f "$KAFKA_HOME/.complete" ]] && return 0
  mkdir -p "$KAFKA_HOME"
  exec 9>"$KAFKA_HOME/.lock"
  flock 9
  if [[ ! -f "$KAFKA_HOME/.complete" ]]; then
    log "fetching Apache Kafka $KAFKA_VERSION jars from Maven Central into $LIB_DIR"
    rm -rf "$LIB_DIR"
    "$MVN" -q -B -Dstyle.color=never -f "$SCRIPT_DIR/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$LIB_DIR" >&2 \
      || die "maven could not fetch Kafka $KAFKA_VERSION (network or ~/.m2 problem)"
    [[ -f "$LIB_DIR/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "kafka_2.13 jar missing after fetch"
    write_tools_log4j "$KAFKA_HOME/tools-log4j2.properties"
    touch "$KAFKA_HOME/.complete"
  fi
  flock -u 9
}

# CLI tools log warnings to stderr only, so their stdout stays parseable.
write_tools_log4j() {
  cat >"$1" <<'EOF'
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
EOF
}

write_server_log4j() {
  cat >"$1" <<EOF
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $2
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = org.apache.kafka
logger.kafka.level = info
EOF
}

classpath() { echo "$LIB_DIR/*"; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Default controller port: first free one from P+100 upward, which stays inside a helper's
# port block of 100 (19092 -> 19192) and away from its low ports that brokers use.
pick_controller_port() {
  local p=$(($1 + 100))
  while port_in_use "$p"; do p=$((p + 1)); done
  echo "$p"
}

# Kafka's own generator: its ids never start with '-', which `format -t` would read as a flag.
random_cluster_id() {
  local id
  id="$("$JAVA" -Xmx128m -cp "$(classpath)" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  [[ "$id" =~ ^[A-Za-z0-9_][A-Za-z0-9_-]{21}$ ]] || die "StorageTool random-uuid gave '$id'"
  echo "$id"
}

read_pid() { [[ -f "$1/kafka.pid" ]] && cat "$1/kafka.pid" || true; }

is_running() { local pid; pid="$(read_pid "$1")"; [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; }

write_server_properties() {
  local dir="$1" port="$2" cport="$3"
  shift 3
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
  local kv
  for kv in "$@"; do echo "$kv" >>"$dir/server.properties"; done
}

start() {
  local port="" dir="" cpu="" cport="" heap="1g" sets=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --port) port="$2"; shift 2 ;;
      --dir) dir="$2"; shift 2 ;;
      --cpu) cpu="$2"; shift 2 ;;
      --controller-port) cport="$2"; shift 2 ;;
      --heap) heap="$2"; shift 2 ;;
      --set) [[ "$2" == *=* ]] || die "--set wants key=value, got '$2'"; sets+=("$2"); shift 2 ;;
      *) die "start: unknown option '$1'" ;;
    esac
  done
  [[ "$port" =~ ^[0-9]+$ ]] || die "start needs --port P"
  [[ -n "$dir" ]] || die "start needs --dir D"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  is_running "$dir" && die "a broker from $dir is already running (pid $(read_pid "$dir"))"
  port_in_use "$port" && die "port $port on 127.0.0.1 is already in use"
  [[ -n "$cport" ]] || cport="$(pick_controller_port "$port")"
  port_in_use "$cport" && die "controller port $cport is already in use"
  fetch
  local cp; cp="$(classpath)"

  write_server_properties "$dir" "$port" "$cport" "${sets[@]+"${sets[@]}"}"
  write_server_log4j "$dir/log4j2.properties" "$dir/server.log"
  if [[ ! -f "$dir/data/meta.properties" ]]; then
    local cluster_id; cluster_id="$(random_cluster_id)"
    "$JAVA" -Xmx256m -cp "$cp" -Dlog4j2.configurationFile="$KAFKA_HOME/tools-log4j2.properties" \
      kafka.tools.StorageTool format --cluster-id="$cluster_id" -c "$dir/server.properties" \
      >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "storage format failed"; }
  fi

  local prefix=()
  [[ -n "$cpu" ]] && prefix=(taskset -c "$cpu")
  : >"$dir/server.log"
  setsid "${prefix[@]+"${prefix[@]}"}" "$JAVA" "-Xms$heap" "-Xmx$heap" "${KAFKA_JVM_PERF_OPTS[@]}" \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$cp" \
    kafka.Kafka "$dir/server.properties" >"$dir/stdout.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/kafka.pid"

  local waited=0
  until grep -q "Kafka Server started" "$dir/server.log" 2>/dev/null && port_in_use "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$dir/server.log" "$dir/stdout.log" >&2 || true
      rm -f "$dir/kafka.pid"
      die "Kafka exited during start-up (logs above)"
    fi
    if ((waited >= READY_TIMEOUT_S * 4)); then
      tail -n 30 "$dir/server.log" >&2 || true
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/kafka.pid"
      die "Kafka not ready after ${READY_TIMEOUT_S}s"
    fi
    sleep 0.25
    waited=$((waited + 1))
  done
  log "Apache Kafka $KAFKA_VERSION ready on 127.0.0.1:$port (controller 127.0.0.1:$cport," \
    "cpu ${cpu:-any}, heap $heap, pid $pid, logs $dir/server.log)"
  echo "$pid"
}

stop() {
  local dir=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      *) die "stop: unknown option '$1'" ;;
    esac
  done
  [[ -n "$dir" ]] || die "stop needs --dir D"
  local pid; pid="$(read_pid "$dir")"
  if [[ -z "$pid" ]] || ! kill -0 "$pid" 2>/dev/null; then
    log "no running broker for $dir"
    rm -f "$dir/kafka.pid"
    return 0
  fi
  kill -TERM "$pid"
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((waited >= STOP_TIMEOUT_S * 4)); then
      log "pid $pid ignored SIGTERM for ${STOP_TIMEOUT_S}s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.25
    waited=$((waited + 1))
  done
  rm -f "$dir/kafka.pid"
  log "stopped pid $pid"
}

status() {
  [[ "${1:-}" == "--dir" && -n "${2:-}" ]] || die "status needs --dir D"
  if is_running "$2"; then echo "running pid $(read_pid "$2")"; else echo "stopped"; return 1; fi
}

tool() {
  [[ $# -ge 1 ]] || die "tool needs a main class"
  fetch
  local main="$1"
  shift
  exec "$JAVA" -Xmx512m -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KAFKA_HOME/tools-log4j2.properties" \
    -cp "$(classpath)" "$main" "$@"
}

cmd="${1:-}"
[[ -n "$cmd" ]] || usage
shift
case "$cmd" in
  fetch) fetch; log "Kafka $KAFKA_VERSION jars in $LIB_DIR" ;;
  start) start "$@" ;;
  stop) stop "$@" ;;
  status) status "$@" ;;
  tool) tool "$@" ;;
  classpath) fetch; classpath ;;
  version) echo "$KAFKA_VERSION" ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$cmd' (try --help)" ;;
esac
