#!/usr/bin/env bash
# The disk's O_DIRECT sequential-write ceiling, for comparison with benches/storage_append.rs
# (and the write+fdatasync ceiling for benches/storage_group_commit.rs).
# Usage: perf/fio.sh [dir]   (default: $SHARDLOG_BENCH_DIR or /tmp, the benches' default)
# Needs fio: installed with apt-get when missing (as root), else it stops with a message. Writes 1 GiB per job into a temp dir it removes after.
set -euo pipefail
# shellcheck source=perf/ensure_tools.sh
source "$(dirname "${BASH_SOURCE[0]}")/ensure_tools.sh"
ensure_tool fio || exit 2
ensure_tool python3 || exit 2
dir="${1:-${SHARDLOG_BENCH_DIR:-/tmp}}"
work="$(mktemp -d "$dir/fio.XXXXXX")"
trap 'rm -rf "$work"' EXIT
run() { # name, extra fio args...
  local name="$1"; shift
  fio --name="$name" --directory="$work" --ioengine=io_uring --direct=1 --rw=write \
      --size=1G --runtime=10 --group_reporting --output-format=json "$@" |
    python3 -c 'import json,sys; w=json.load(sys.stdin)["jobs"][0]["write"]; \
      print("%-30s %9.1f MiB/s %9.0f IOPS  clat p50 %7.1f us" % (sys.argv[1], w["bw_bytes"]/2**20, \
      w["iops"], w["clat_ns"]["percentile"]["50.000000"]/1000))' "$name"
}
echo "fio $(fio --version) on $(df --output=source "$dir" | tail -1) ($dir)"
run seq-write-1m-qd8 --bs=1M --iodepth=8
run seq-write-1m-qd1 --bs=1M --iodepth=1
run seq-write-4m-qd1 --bs=4M --iodepth=1
run seq-write-64k-qd1-fdatasync --bs=64k --iodepth=1 --fdatasync=1
run seq-write-4k-qd1-fdatasync --bs=4k --iodepth=1 --fdatasync=1 --size=64M
