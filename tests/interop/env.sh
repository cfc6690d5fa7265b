# Sourced by the test scripts (and .ci/run): puts the interop virtual environment that
# tests/interop/install.sh creates first on PATH, so `python3` everywhere (shell scripts,
# `cargo test`'s metrics check, driver.py's client programs) is the one with the pinned
# clients, whatever the machine's own Python has or lacks. KAFKA_CACHE_DIR moves it.
# shellcheck shell=bash
_interop_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
INTEROP_CACHE_DIR="${KAFKA_CACHE_DIR:-$_interop_repo/.interop-cache}"
INTEROP_VENV="$INTEROP_CACHE_DIR/venv"
if [[ -x "$INTEROP_VENV/bin/python3" && ":$PATH:" != *":$INTEROP_VENV/bin:"* ]]; then
  export PATH="$INTEROP_VENV/bin:$PATH"
fi
unset _interop_repo
