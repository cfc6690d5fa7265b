#!/usr/bin/env bash
# Where a broker's live heap grows within one lifetime (issue 19): the soak's load
# (perf/soak.py, no kills) on a release broker built with jemalloc's heap profiler, which
# dumps a sampled heap profile every 1 GiB allocated; jeprof then gives the sampled live heap
# over time and, by call stack, what was live at the last dump and not at the first dump
# after the warm-up.
#
#   perf/heap_profile.sh [SECONDS] [WARMUP_SECONDS]     (defaults 600 and 240)
#
# Writes the run's directory (profiles, broker log, soak output, growth.txt) and prints
# growth.txt. Not in CI. Ports 29493-29494. Needs perl and binutils (jeprof's addr2line).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION_S=${1:-600}
WARMUP_S=${2:-240}
PYTHON=${PYTHON:-.interop-cache/venv/bin/python}
[ -x "$PYTHON" ] || bash tests/interop/install.sh
nice cargo build --release --features heap-profile --bin shardlog
DIR=$(mktemp -d /tmp/shardlog-heap.XXXXXX)
mkdir -p "$DIR/prof"
# A copy: a build during the run must not change the binary jeprof symbolizes.
cp target/release/shardlog "$DIR/shardlog"
JEPROF=$(ls target/release/build/tikv-jemalloc-sys-*/out/build/bin/jeprof | head -n 1)
# One sample per 128 KiB allocated on average (lg_prof_sample 17): the estimate of a site's
# live bytes is unbiased, and the profiler's cost stays a few % at this load.
export _RJEM_MALLOC_CONF="prof:true,prof_active:true,lg_prof_sample:17,lg_prof_interval:30,prof_prefix:$DIR/prof/jeprof"
start=$(date +%s)
"$PYTHON" perf/soak.py --binary "$DIR/shardlog" --out "$DIR" --duration-s "$DURATION_S" \
  --kill-every-s 1000000 --port 29493 >"$DIR/soak.out" 2>&1 || true
unset _RJEM_MALLOC_CONF
# The broker is the process with the most dumps (`shardlog bench` runs dump a few each).
pid=$(ls "$DIR/prof" | sed -E 's/^jeprof\.([0-9]+)\..*/\1/' | sort | uniq -c | sort -rn | awk 'NR==1 {print $2}')
mapfile -t dumps < <(ls -tr "$DIR/prof"/jeprof."$pid".*.heap)
first=""
for d in "${dumps[@]}"; do
  if (($(stat -c %Y "$d") - start >= WARMUP_S)); then first=$d; break; fi
done
last=${dumps[-1]}
{
  echo "heap growth of broker pid $pid: $(basename "$first") (t=$(($(stat -c %Y "$first") - start)) s)"
  echo "  -> $(basename "$last") (t=$(($(stat -c %Y "$last") - start)) s), ${#dumps[@]} dumps"
  echo
  echo "== sampled live heap over time (every 20th dump)"
  for ((i = 0; i < ${#dumps[@]}; i += 20)); do
    d=${dumps[$i]}
    echo "t=$(($(stat -c %Y "$d") - start)) s $(perl "$JEPROF" --text "$DIR/shardlog" "$d" 2>/dev/null | grep -m1 Total)"
  done
  echo
  echo "== growth since the first dump after warm-up, by the innermost shardlog frames (MB)"
  perl "$JEPROF" --collapsed --base="$first" "$DIR/shardlog" "$last" 2>/dev/null |
    "$PYTHON" -c '
import collections, sys
growth = collections.Counter()
for line in sys.stdin:
    stack, _, value = line.rstrip().rpartition(" ")
    try:
        value = float(value)
    except ValueError:
        continue
    frames = [f for f in stack.split(";") if f.startswith(("shardlog::", "<shardlog"))]
    growth[" <- ".join(reversed(frames[-3:])) if frames else stack.split(";")[-1][:120]] += value
print(f"total {sum(growth.values()) / 1e6:+.2f}")
for where, value in sorted(growth.items(), key=lambda kv: -abs(kv[1]))[:15]:
    print(f"{value / 1e6:+8.2f}  {where[:240]}")
'
} >"$DIR/growth.txt"
cat "$DIR/growth.txt"
echo "heap_profile: everything in $DIR"
