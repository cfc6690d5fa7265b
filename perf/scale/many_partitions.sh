#!/usr/bin/env bash
# Issue 43: many idle partitions at RF 3 on three local nodes (`--shards 1
# --spin-before-park-us 0` each, from tests/common/cluster.rs): time to create TOPICS topics x 3
# partitions through CreateTopics in batches of 100, time until every partition is led with a
# full ISR, ISR shrinks/expansions over a quiet window, the longest event-loop stall per node.
# Runs the multi-process test tests/processes/cluster_scale_isr.rs on a release build and keeps
# its figures ([scale] lines) and the brokers' WARN lines under perf/results/scale-<commit>/.
#
#   perf/scale/many_partitions.sh [TOPICS] [QUIET_S]     (defaults 3334 = 10,002 partitions, 60)
set -euo pipefail
cd "$(dirname "$0")/../.."
topics="${1:-3334}"
quiet="${2:-60}"
commit="$(git rev-parse --short HEAD)"
out="perf/results/scale-$commit"
mkdir -p "$out"
log="$out/run-$topics-topics.log"
SHARDLOG_SCALE_TEST=1 SHARDLOG_SCALE_TOPICS="$topics" SHARDLOG_SCALE_QUIET_S="$quiet" \
  cargo test --release --test processes cluster_scale_isr -- --nocapture >"$log.full" 2>&1 || true
grep -v '^\[broker\]' "$log.full" | grep '\[scale\]\|test result\|panicked' >"$log" || true
grep '^\[broker\]' "$log.full" | grep -E ' WARN | ERROR ' | grep -v 'nofile\|memlock' \
  >"$out/warn-$topics-topics.log" || true
echo "stalls > 100 ms: $(grep -c 'event loop stalled' "$out/warn-$topics-topics.log" || true)" >>"$log"
echo "AlterPartition sent: $(grep -c 'INFO AlterPartition partition=' "$log.full" || true)" >>"$log"
echo "AlterPartition refused or failed: $(grep -c 'AlterPartition refused\|AlterPartition failed' "$log.full" || true)" >>"$log"
rm -f "$log.full"
cat "$log"
