#!/usr/bin/env bash
# RF 3 produce performance (issue 15): three Shardlog brokers vs three Apache Kafka 4.1
# brokers (KRaft, combined broker+controller, three voters) on this host, both clusters up
# for the whole run, loaded in turn, interleaved A/B/A/B; plus Shardlog RF 1 on the same
# three brokers. Same client for all: `shardlog bench produce`, closed loop, 1 KiB records,
# 3 partitions, acks=all, min.insync.replicas=2 (RF 3 topics).
#
#   perf/replication/rf3.sh [--rounds N] [--duration S] [--warmup S] [--out FILE]
#
# Brokers: node i on core i % cores (`--shards 1 --cpus`, Kafka under taskset), Kafka heap
# 512 MiB per broker (three JVMs on one host). Ports 31200-31299 (Shardlog 31201-3 and
# 31211-3, Kafka 31221-3 and 31231-3). Writes perf/results/<date>-replication-rf3.md with
# the median and the spread (min-max) of each configuration over the rounds, and the host's
# load average before and after (other sessions share the machine).
# Environment: SHARDLOG (default target/release/shardlog; built when missing), SHARDLOG_BUILD
# (the description written for a binary copied elsewhere).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
ROUNDS=3
DUR=15
WARM=3
OUT="$REPO/perf/results/$(date -u +%F)-replication-rf3.md"
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --duration) DUR="$2"; shift ;;
    --warmup) WARM="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rf3.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
SHARDLOG="${SHARDLOG:-$REPO/target/release/shardlog}"
[[ -x "$SHARDLOG" ]] || cargo build --release -q --bin shardlog
KAFKA_SH="$REPO/perf/kafka/kafka.sh"
CP="$("$KAFKA_SH" classpath)"
KVER="$("$KAFKA_SH" version)"
KAFKA_HOME="$REPO/.interop-cache/kafka-$KVER"
CORES="$(nproc)"
TMP="$(mktemp -d)"
PIDS=()
log() { echo "[rf3 $(date +%H:%M:%S)] $*" >&2; }
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 2
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
wait_port() { for _ in $(seq 600); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"

# ---- Shardlog: three combined nodes -------------------------------------------------------
CID="$("$SHARDLOG" format --print-random-uuid)"
VOTERS="1@127.0.0.1:31211,2@127.0.0.1:31212,3@127.0.0.1:31213"
for id in 1 2 3; do
  "$SHARDLOG" format --cluster-id "$CID" --node-id "$id" --data-dir "$TMP/s$id" >/dev/null
  "$SHARDLOG" serve --node-id "$id" --data-dir "$TMP/s$id" --listen "127.0.0.1:$((31200 + id))" \
    --admin-listen 127.0.0.1:0 --controller-quorum-voters "$VOTERS" \
    --controller-listen "127.0.0.1:$((31210 + id))" --shards 1 --cpus "$((id % CORES))" \
    --spin-before-park-us 0 --log-level warn 2>"$TMP/s$id.log" &
  PIDS+=($!)
done
SBOOT="127.0.0.1:31201,127.0.0.1:31202,127.0.0.1:31203"

# ---- Kafka: three KRaft combined nodes ----------------------------------------------------
# shellcheck source=perf/kafka/cluster.sh
. "$REPO/perf/kafka/cluster.sh"
kafka_cluster_start "$TMP" 31220 512m transaction.state.log.replication.factor=3 \
  transaction.state.log.min.isr=2 group.initial.rebalance.delay.ms=0
KBOOT="127.0.0.1:31221,127.0.0.1:31222,127.0.0.1:31223"
for p in 31201 31202 31203 31221 31222 31223; do wait_port "$p" || { log "port $p never opened"; exit 1; }; done
sleep 5 # registrations and unfencing on both clusters
log "clusters up (Shardlog $SBOOT, Kafka $KBOOT)"

bench() { # label bootstrap topic rf json
  local extra=()
  [[ "$4" == 3 ]] && extra=(--topic-config min.insync.replicas=2)
  local b
  b="$(echo "$2" | cut -d, -f1)"
  timeout $((DUR + WARM + 120)) "$SHARDLOG" bench produce --bootstrap "$b" --topic "$3" \
    --partitions 3 --replication-factor "$4" "${extra[@]}" --acks -1 --record-size 1024 \
    --duration "$DUR" --warmup "$WARM" --quiet --label "$1" --json "$5" >"$5.txt" 2>&1 \
    || log "$1 failed: $(tail -n 2 "$5.txt")"
}

mkdir -p "$TMP/res"
for r in $(seq "$ROUNDS"); do
  for cfg in shardlog-rf3 kafka-rf3 shardlog-rf1; do
    case "$cfg" in
      shardlog-rf3) bench "$cfg" "$SBOOT" rf3 3 "$TMP/res/$cfg-$r.json" ;;
      kafka-rf3) bench "$cfg" "$KBOOT" rf3 3 "$TMP/res/$cfg-$r.json" ;;
      shardlog-rf1) bench "$cfg" "$SBOOT" rf1 1 "$TMP/res/$cfg-$r.json" ;;
    esac
    log "round $r $cfg: $(python3 -c "import json;d=json.load(open('$TMP/res/$cfg-$r.json'));print(int(d['records_per_s']),'rec/s p99',d['latency_us']['p99'],'us')" 2>/dev/null || echo failed)"
  done
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

mkdir -p "$(dirname "$OUT")"
BUILD="debug build ($SHARDLOG)"
[[ "$SHARDLOG" == */release/* ]] && BUILD="release build"
# SHARDLOG_BUILD: how to describe a binary copied elsewhere (e.g. "release build of abc123").
BUILD="${SHARDLOG_BUILD:-$BUILD}"
python3 - "$TMP/res" "$ROUNDS" "$DUR" "$WARM" "$LOAD_BEFORE" "$LOAD_AFTER" "$(git rev-parse --short HEAD)" "$BUILD" >"$OUT" <<'EOF'
import json, os, statistics, sys
res, rounds, dur, warm, lb, la, commit, build = sys.argv[1:]
rows = {}
for cfg in ("shardlog-rf3", "kafka-rf3", "shardlog-rf1"):
    for r in range(1, int(rounds) + 1):
        p = os.path.join(res, f"{cfg}-{r}.json")
        if os.path.exists(p):
            rows.setdefault(cfg, []).append(json.load(open(p)))
print(f"# RF 3 produce: Shardlog vs Apache Kafka 4.1, and Shardlog RF 1 vs RF 3 (commit {commit})\n")
print(f"Three brokers each, on one {os.cpu_count()}-core host shared with other sessions (load average "
      f"{lb} before, {la} after: other sessions were compiling). Both clusters up for the whole run and "
      f"loaded in turn, interleaved over {rounds} rounds (Shardlog RF 3, Kafka RF 3, Shardlog RF 1). "
      f"Client: `shardlog bench produce`, closed loop, 1 KiB records, 3 partitions, acks=all, "
      f"{dur} s measured after {warm} s warm-up; RF 3 topics with min.insync.replicas=2. Shardlog "
      f"{build}, `--shards 1` per broker, node i on core i % cores; Kafka heap 512 MiB, "
      "`taskset` the same cores, Kafka's default durability (no fsync per batch).\n")
print("| configuration | rounds | records/s median (min-max) | p50 ms | p99 ms | p99.99 ms | errors |")
print("|---|---|---|---|---|---|---|")
def med(xs):
    return statistics.median(xs) if xs else float("nan")
for cfg, rs in rows.items():
    rps = [d["records_per_s"] for d in rs]
    lat = lambda k: [d["latency_us"][k] / 1000 for d in rs]
    def cell(k):
        xs = lat(k)
        return f"{med(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"
    errs = sum(sum(v for v in (d.get("errors") or {}).values() if isinstance(v, int)) if isinstance(d.get("errors"), dict) else 0 for d in rs)
    print(f"| {cfg} | {len(rs)} | {med(rps):,.0f} ({min(rps):,.0f}-{max(rps):,.0f}) | {cell('p50')} | {cell('p99')} | {cell('p9999')} | {errs} |")
print("\nPer round (records/s): " + "; ".join(f"{cfg} " + ", ".join(f"{d['records_per_s']:,.0f}" for d in rs) for cfg, rs in rows.items()))
EOF
log "wrote $OUT"
cat "$OUT"
