# Sourced by the side-by-side perf scripts (perf/replication/rf3.sh, perf/scale/vs_kafka.sh):
# a three-node Apache Kafka KRaft cluster started the same way for every comparison.
# Needs CP (perf/kafka/kafka.sh classpath) and KAFKA_HOME; appends the java pids to PIDS.

# kafka_cluster_start DIR BASE HEAP [PROPERTY=VALUE ...]: combined broker+controller nodes
# 1..3, node i serving PLAINTEXT on 127.0.0.1:BASE+i and CONTROLLER on BASE+10+i, its files
# under DIR/k<i>, pinned to core i % nproc, with HEAP (e.g. 512m, 1g) and the extra
# properties given.
kafka_cluster_start() {
  local tmp="$1" base="$2" heap="$3"
  shift 3
  local voters="1@127.0.0.1:$((base + 11)),2@127.0.0.1:$((base + 12)),3@127.0.0.1:$((base + 13))"
  local cid id d cores
  cid="$(java -Xmx128m -cp "$CP" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  cores="$(nproc)"
  for id in 1 2 3; do
    d="$tmp/k$id"
    mkdir -p "$d"
    {
      cat <<PROPS
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$((base + id)),CONTROLLER://127.0.0.1:$((base + 10 + id))
advertised.listeners=PLAINTEXT://127.0.0.1:$((base + id))
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$d/data
offsets.topic.replication.factor=3
PROPS
      [ "$#" -gt 0 ] && printf '%s\n' "$@"
    } >"$d/server.properties"
    cat >"$d/log4j2.properties" <<LOG
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $d/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = FILE
LOG
    java -Xmx256m -cp "$CP" -Dlog4j2.configurationFile="$KAFKA_HOME/tools-log4j2.properties" \
      kafka.tools.StorageTool format --cluster-id="$cid" -c "$d/server.properties" >"$d/format.log" 2>&1
    taskset -c "$((id % cores))" java "-Xms$heap" "-Xmx$heap" -server -XX:+UseG1GC \
      -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
      -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$d/log4j2.properties" -cp "$CP" \
      kafka.Kafka "$d/server.properties" >"$d/stdout.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
}
