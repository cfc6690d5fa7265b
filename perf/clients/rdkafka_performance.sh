#!/usr/bin/env bash
# Prints the path of librdkafka's own load client, `rdkafka_performance` (C), building it
# first when it is not cached: the librdkafka sources that ship in the `rdkafka-sys` crate
# (crates.io, pinned below), `./configure` without TLS/SASL/zstd/curl, `make libs`, then
# the example. Cached in $RDKAFKA_PERF_CACHE (default <repo>/.interop-cache). Needs curl,
# a C compiler and make (a Rust toolchain's machine has them); exits non-zero with a message
# naming what failed, so perf/run.sh can record "not measured" instead of a wrong figure.
#
# Why the C client beside confluent-kafka: a Python application drains librdkafka's queue
# at ~600 MiB/s of 1 KiB records; a broker that delivers faster fills the 64 MiB queue and
# librdkafka then backs off for fetch.queue.backoff.ms (1,000 ms), so the Python consumer
# measures its own loop. rdkafka_performance consumes in C.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CRATE_VERSION="4.9.0+2.10.0"   # rdkafka-sys; librdkafka 2.10.0
CACHE="${RDKAFKA_PERF_CACHE:-$ROOT/.interop-cache}"
DIR="$CACHE/rdkafka-sys-$CRATE_VERSION"
BIN="$DIR/librdkafka/examples/rdkafka_performance"
if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
for t in curl cc make; do
  command -v "$t" >/dev/null 2>&1 || { echo "rdkafka_performance: $t is not installed" >&2; exit 1; }
done
mkdir -p "$CACHE"
LOG="$CACHE/rdkafka-build.log"
echo "rdkafka_performance: building librdkafka ${CRATE_VERSION#*+} from the rdkafka-sys crate (log: $LOG)" >&2
curl -sSfL --retry 3 -o "$CACHE/rdkafka-sys.crate" \
  "https://static.crates.io/crates/rdkafka-sys/rdkafka-sys-$CRATE_VERSION.crate" \
  || { echo "rdkafka_performance: cannot download rdkafka-sys $CRATE_VERSION from crates.io" >&2; exit 1; }
rm -rf "$DIR"
tar xzf "$CACHE/rdkafka-sys.crate" -C "$CACHE"
(
  cd "$DIR/librdkafka"
  ./configure --disable-ssl --disable-sasl --disable-zstd --disable-curl
  make -j"$(nproc)" libs
  make -C examples rdkafka_performance
) >"$LOG" 2>&1 || { echo "rdkafka_performance: build failed, see $LOG" >&2; exit 1; }
[[ -x "$BIN" ]] || { echo "rdkafka_performance: built, but no binary at $BIN" >&2; exit 1; }
echo "$BIN"
