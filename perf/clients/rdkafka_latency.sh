#!/usr/bin/env bash
# Prints the path of perf/clients/rdkafka_latency (an open-loop produce-latency client on
# librdkafka's C API), compiling it first when the cached binary is missing or older than
# its source. It links the librdkafka that perf/clients/rdkafka_performance.sh builds
# (librdkafka.a and rdkafka.h from the rdkafka-sys crate's sources), so that script runs
# first. Cached in $RDKAFKA_PERF_CACHE (default <repo>/.interop-cache). Exits non-zero with a
# message naming what failed, so perf/run.sh records "not measured" instead of a wrong figure.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SRC="$ROOT/perf/clients/rdkafka_latency.c"
PERF_BIN="$("$ROOT/perf/clients/rdkafka_performance.sh")" \
  || { echo "rdkafka_latency: librdkafka could not be built (see rdkafka_performance.sh)" >&2; exit 1; }
LIB="$(cd "$(dirname "$PERF_BIN")/.." && pwd)"   # .../librdkafka
BIN="$LIB/examples/rdkafka_latency"
if [[ -x "$BIN" && "$BIN" -nt "$SRC" ]]; then echo "$BIN"; exit 0; fi
# The libraries librdkafka was configured with (Makefile.config's LIBS), as its examples link.
LIBS="$(sed -n 's/^LIBS+\{0,1\}=//p' "$LIB/Makefile.config" | tr '\n' ' ')"
# shellcheck disable=SC2086 # LIBS is a list of linker flags
cc -O2 -Wall -Wno-ignored-qualifiers -I"$LIB/src" "$SRC" -o "$BIN" "$LIB/src/librdkafka.a" $LIBS \
  >"$LIB/rdkafka_latency-build.log" 2>&1 \
  || { echo "rdkafka_latency: compile failed, see $LIB/rdkafka_latency-build.log" >&2; exit 1; }
echo "$BIN"
