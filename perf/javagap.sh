#!/usr/bin/env bash
# Kafka's Java producer against Kafka and against Shardlog (issue 20, "ahead of Kafka with
# every client"): ProducerPerformance W1 (closed loop) and W2 (a fixed rate), 1 KiB records,
# 8 partitions, acks=1, linger 0, idempotence off (perf/run.sh's settings), interleaved
# per round: Kafka, Shardlog without preallocation (SHARDLOG_PREALLOCATE_BYTES=0),
# Shardlog as built. The Shardlog runs also record the broker's Produce stage
# percentiles (GET /v1/shards), which show where a request's time goes.
#
#   perf/javagap.sh [--rounds 3] [--records 300000] [--rate 40000] [--out FILE]
#                   [--arms kafka,growth,prealloc]   (also: flush1000 = Shardlog, topics
#                   with flush.ms=1000, acknowledged after the O_DIRECT write)
#
# Brokers on cpu 1 (both stay up; one is loaded at a time), the client on cpu 0. Ports
# 36192 (Kafka), 36193/36194 (Shardlog Kafka API/admin), Kafka's controller on 36195.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS=3; RECORDS=300000; RATE=40000; OUT=""; ARMS=kafka,growth,prealloc
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --records) RECORDS="$2"; shift ;;
    --rate) RATE="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --arms) ARMS="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "javagap.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
SHARDLOG="${SHARDLOG:-$ROOT/target/release/shardlog}"
KAFKA_SH="${KAFKA_SH:-$ROOT/perf/kafka/kafka.sh}"
KPORT=36192; SPORT=36193; SADMIN=36194; KCTRL=36195
TMP="$(mktemp -d /tmp/shardlog-javagap.XXXXXX)"
SPID=""
log() { echo "[javagap $(date +%H:%M:%S)] $*" >&2; }
stop_shardlog() {
  if [[ -n "$SPID" ]]; then
    kill "$SPID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SPID" 2>/dev/null || true
    wait "$SPID" 2>/dev/null || true
  fi
  SPID=""
}
cleanup() {
  stop_shardlog
  "$KAFKA_SH" stop --dir "$TMP/kafka" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
RES="$TMP/res"; mkdir -p "$RES"

start_shardlog() { # prealloc ("" = as built)
  rm -rf "$TMP/shardlog"; mkdir -p "$TMP/shardlog"
  env ${1:+SHARDLOG_PREALLOCATE_BYTES=$1} taskset -c 1 "$SHARDLOG" serve --shards 1 \
    --spin-before-park-us 0 --listen "127.0.0.1:$SPORT" --admin-listen "127.0.0.1:$SADMIN" \
    --data-dir "$TMP/shardlog/data" >"$TMP/shardlog/server.log" 2>&1 &
  SPID=$!
  for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$SPORT") 2>/dev/null && return 0; sleep 0.1; done
  log "shardlog did not start"; return 1
}

pp() { # out, port, topic, records, rate [topic config k=v]
  "$SHARDLOG" topics --bootstrap "127.0.0.1:$2" create "$3" --partitions 8 ${6:+--config "$6"} \
    >/dev/null 2>&1 || true
  taskset -c 0 "$KAFKA_SH" tool org.apache.kafka.tools.ProducerPerformance --topic "$3" \
    --num-records "$4" --record-size 1024 --throughput "$5" \
    --producer-props "bootstrap.servers=127.0.0.1:$2" acks=1 linger.ms=0 enable.idempotence=false \
    2>"$1.err" | tail -1 >"$1" || echo failed >"$1"
}

stages() { # out
  python3 - "$SADMIN" "$1" <<'PY' || true
import json, sys, urllib.request
v = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/shards", timeout=5))
json.dump(v, open(sys.argv[2], "w"))
PY
}

log "starting Kafka on cpu 1"
"$KAFKA_SH" start --port "$KPORT" --controller-port "$KCTRL" --dir "$TMP/kafka" --cpu 1 >/dev/null
for r in $(seq 1 "$ROUNDS"); do
  for arm in ${ARMS//,/ }; do
    port=$KPORT
    tcfg=""
    [[ "$arm" == flush1000 ]] && tcfg="flush.ms=1000"
    if [[ "$arm" != kafka ]]; then
      start_shardlog "$([[ $arm == growth ]] && echo 0 || true)"
      port=$SPORT
    fi
    cut -d' ' -f1 /proc/loadavg >"$RES/load-$arm-$r.txt"
    log "round $r: $arm W1 (closed loop, $RECORDS records)"
    pp "$RES/w1-$arm-$r.txt" "$port" "w1r$r" "$RECORDS" -1 "$tcfg"
    log "round $r: $arm W2 ($RATE rec/s)"
    pp "$RES/w2-$arm-$r.txt" "$port" "w2r$r" $((RATE * 10)) "$RATE" "$tcfg"
    if [[ "$arm" != kafka ]]; then stages "$RES/stages-$arm-$r.json"; stop_shardlog; fi
  done
done
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo nocommit)"
OUT="${OUT:-$ROOT/perf/results/$(date -u +%Y-%m-%d)-javagap-$COMMIT.md}"
python3 - "$RES" "$OUT" "$COMMIT" "$ROUNDS" "$RECORDS" "$RATE" "$ARMS" <<'PY'
import glob, json, os, re, statistics, sys
res, out, commit, rounds, records, rate, arms = sys.argv[1:8]
def pp(path):
    try:
        line = open(path).read()
    except Exception:
        return None
    m = re.search(r"([\d.]+) records/sec.*?([\d.]+) ms avg latency.*?([\d.]+) ms max latency, "
                  r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th", line)
    return m and {"rps": float(m[1]), "avg": float(m[2]), "p50": int(m[4]), "p99": int(m[6])}
def cell(xs, f="{:,.0f}"):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    return f.format(statistics.median(xs)) + (f" [{f.format(min(xs))}–{f.format(max(xs))}]" if len(xs) > 1 else "")
arms = arms.split(",")
lines = [f"# Java client (ProducerPerformance) vs Kafka — {os.path.basename(out)[:-3]}\n",
         f"Commit `{commit}`; `perf/javagap.sh --rounds {rounds} --records {records} --rate {rate}`. "
         "Brokers on cpu 1 (Shardlog `--shards 1 --spin-before-park-us 0`, fresh per run; Kafka one "
         "JVM for the whole run), ProducerPerformance on cpu 0; 1 KiB, 8 partitions, acks=1, linger 0, "
         "idempotence off. Median [min–max] of the rounds, interleaved in the order of the arms.\n",
         "| workload | arm | records/s | avg ms | p50 ms | p99 ms | load avg |", "|---|---|---|---|---|---|---|"]
for w in ("w1", "w2"):
    for arm in arms:
        rs = [pp(f"{res}/{w}-{arm}-{r}.txt") for r in range(1, int(rounds) + 1)]
        rs = [x for x in rs if x]
        la = []
        for r in range(1, int(rounds) + 1):
            try:
                la.append(float(open(f"{res}/load-{arm}-{r}.txt").read()))
            except Exception:
                pass
        lines.append(f"| {w.upper()} | {arm} | {cell([x['rps'] for x in rs])} | {cell([x['avg'] for x in rs], '{:.2f}')} | "
                     f"{cell([x['p50'] for x in rs])} | {cell([x['p99'] for x in rs])} | {cell(la, '{:.1f}')} |")
lines += ["", "Shardlog Produce stages over both workloads of a run (µs p50 / p99, median of rounds):", "",
          "| arm | " + " | ".join(["total", "queue", "storage", "write_wait", "write", "fdatasync", "notify", "send"]) + " |",
          "|---|" + "---|" * 8]
for arm in [a for a in arms if a != "kafka"]:
    cells = []
    for st in ["total", "queue", "storage", "write_wait", "write", "fdatasync", "notify", "send"]:
        p50, p99 = [], []
        for r in range(1, int(rounds) + 1):
            try:
                v = json.load(open(f"{res}/stages-{arm}-{r}.json"))
            except Exception:
                continue
            if st == "total":
                for a in v.get("apis", []):
                    if a["api"] == "Produce":
                        p50.append(a["p50_us"]); p99.append(a["p99_us"])
            for s in v.get("produce_stages", []):
                if s["stage"] == st:
                    p50.append(s["p50_us"]); p99.append(s["p99_us"])
        cells.append(f"{statistics.median(p50):.0f} / {statistics.median(p99):.0f}" if p50 else "n/a")
    lines.append(f"| {arm} | " + " | ".join(cells) + " |")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
PY
