#!/usr/bin/env bash
# ensure_tool NAME [PACKAGE]: makes the command NAME available, installing the Debian PACKAGE
# (default NAME) with apt-get when it is missing and we may (root, apt-get present). Prints
# what it did on stderr; returns non-zero with a clear message when the tool stays missing,
# so a caller can stop (or record "not measured") instead of failing later on empty output.
# Sourced by perf/fio.sh and perf/run.sh.
ensure_tool() {
  local name="$1" pkg="${2:-$1}"
  command -v "$name" >/dev/null 2>&1 && return 0
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "perf: $name not found; installing the $pkg package with apt-get" >&2
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null 2>&1; }; then
      command -v "$name" >/dev/null 2>&1 && return 0
    fi
  fi
  echo "perf: $name is not installed and could not be installed (install it: apt-get install $pkg)" >&2
  return 1
}
