#!/usr/bin/env bash
# Interleaved before/after produce throughput on one node (issue 33's performance constraint).
# Usage: OLD=path/to/shardlog NEW=path/to/shardlog perf/ab_produce.sh  (results in /tmp/ab;
# one node on cpu 1, the load generator on cpu 0, 15 s per run after 3 s warm-up, port 34250).
set -u
OLD=${OLD:?the binary before the change}
NEW=${NEW:?the binary after the change}
OUT=/tmp/ab; rm -rf $OUT; mkdir -p $OUT
run() { # label bin rep acks
  local label=$1 bin=$2 rep=$3 acks=$4 d; d=$(mktemp -d)
  taskset -c 1 $bin serve --data-dir $d --listen 127.0.0.1:34250 --admin-listen 127.0.0.1:0 --shards 1 --cpus 1 --log-level warn 2>$OUT/serve-$label-$rep.log &
  local pid=$!
  for i in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/34250) 2>/dev/null && break; sleep 0.2; done
  taskset -c 0 $NEW bench produce -b 127.0.0.1:34250 --topic t --partitions 4 --duration 15s --warmup 3s \
    --acks $acks --record-size 1KiB --connections 4 --json $OUT/$label-acks$acks-$rep.json --quiet > $OUT/$label-acks$acks-$rep.txt 2>&1
  kill $pid; wait $pid 2>/dev/null; rm -rf $d
}
for rep in 1 2 3; do
  for acks in -1 1; do run old $OLD $rep $acks; run new $NEW $rep $acks; done
done
echo done
