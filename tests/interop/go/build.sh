#!/usr/bin/env bash
# Builds the Go client programs of the interoperability suite (franz-go, sarama) into
# $INTEROP_CACHE_DIR/go-bin (env.sh; <repo>/.interop-cache/go-bin by default, gitignored).
# Modules come from the Go module proxy, checked against go.sum (-mod=readonly: go.mod and
# go.sum pin every version and are never rewritten). `build.sh --offline` builds from the
# module cache only (GOPROXY=off), as run.sh does after install.sh filled it. `go build` is
# incremental, so a second run costs a second or two.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/interop/env.sh
source "$HERE/../env.sh"
BIN="$INTEROP_CACHE_DIR/go-bin"
if [[ "${1:-}" == "--offline" ]]; then export GOPROXY=off; fi
command -v go >/dev/null || { echo "go not found: install Go (franz-go and sarama are default clients)" >&2; exit 1; }
export GOFLAGS="-mod=readonly -trimpath" GOTOOLCHAIN=local
mkdir -p "$BIN"
cd "$HERE"
for client in franz-go sarama; do
  go build -o "$BIN/$client" "./cmd/$client"
done
echo "built $BIN/{franz-go,sarama} with $(go version | cut -d' ' -f3)"
