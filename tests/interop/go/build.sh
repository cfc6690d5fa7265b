#!/usr/bin/env bash
# Builds the Go client programs of the interoperability suite (franz-go, sarama) into
# $INTEROP_CACHE_DIR/go-bin (env.sh; <repo>/.interop-cache/go-bin by default, gitignored).
# Modules come from the Go module proxy, checked against go.sum (-mod=readonly: go.mod and
# go.sum pin every version and are never rewritten). `go build` is incremental: a second run
# costs a second or two; a first one on empty Go caches ~80 s on 2 cores.
#
#   go/build.sh              build (install.sh)
#   go/build.sh --offline    build from the module cache only, GOPROXY=off (run.sh)
#   go/build.sh --versions   print the module versions compiled into the binaries
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/interop/env.sh
source "$HERE/../env.sh"
BIN="$INTEROP_CACHE_DIR/go-bin"
CLIENTS=(franz-go sarama)
# Go's own installer puts it in /usr/local/go without touching PATH (.ci/fresh-check's clean
# environment, a shell that never read /etc/profile.d): look there too.
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then export PATH="/usr/local/go/bin:$PATH"; fi
command -v go >/dev/null || { echo "go not found: install Go >= 1.26 (franz-go and sarama are default clients)" >&2; exit 1; }

case "${1:-}" in
  --versions)
    # What `go version -m` reads from the binaries, not what go.mod asks for.
    for client in "${CLIENTS[@]}"; do
      go version -m "$BIN/$client" | awk -v c="$client" '
        NR == 1 { gov = $2 }
        $1 == "dep" && $2 ~ /^github.com\/(twmb\/franz-go|IBM\/sarama)/ { mods = mods " " $2 "@" $3 }
        END { print c ":" mods " (" gov ")" }'
    done
    exit 0 ;;
  --offline) export GOPROXY=off ;;
  "") ;;
  *) echo "build.sh: unknown option $1" >&2; exit 2 ;;
esac
# -buildvcs=false: no VCS stamping (a clone whose .git belongs to another user would fail it);
# GOTOOLCHAIN=local: never download a toolchain, fail instead if go.mod wants a newer Go.
export GOFLAGS="-mod=readonly -trimpath -buildvcs=false" GOTOOLCHAIN=local
mkdir -p "$BIN"
cd "$HERE"
for client in "${CLIENTS[@]}"; do
  go build -o "$BIN/$client" "./cmd/$client"
done
echo "built ${CLIENTS[*]} in $BIN with $(go version | cut -d' ' -f3)"
