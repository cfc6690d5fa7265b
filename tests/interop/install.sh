#!/usr/bin/env bash
# Installs what the interoperability suite needs, idempotently, on a fresh machine:
# Debian's kcat, confluent-kafka and kafka-python from PyPI (pinned to the validated
# versions, in a virtual environment of the suite's own: see env.sh), and the Maven
# artifacts of the pinned Apache Kafka (CLI tools, via perf/kafka/kafka.sh fetch) and of the Java client program (an online build that fills
# ~/.m2, so run.sh can build it offline with `mvn -o`); kafkajs with npm (pinned by
# js/package-lock.json); the Go programs of franz-go and sarama (go/build.sh: modules from the
# Go module proxy, pinned by go/go.mod and go/go.sum, binaries in $INTEROP_CACHE_DIR/go-bin).
# aiokafka is one of the pip packages. These are also everything tests/groups/run.sh needs.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PY_PACKAGES=(confluent-kafka==2.16.1 kafka-python==3.0.12 aiokafka==0.14.0 prometheus-client==0.26.0)
PIP_VERSION=25.3
# shellcheck source=tests/interop/env.sh
source "$HERE/env.sh"

step() { echo "== install: $*"; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

step "kcat (apt)"
if command -v kcat >/dev/null; then
  echo "kcat present: $(command -v kcat)"
else
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi

step "python clients (pip, in $INTEROP_VENV): ${PY_PACKAGES[*]}"
# A virtual environment of our own: the machine's pip may be old (23.2 lacks some global
# options), its site-packages may hold other versions, and a distribution Python refuses
# installs outside a venv (PEP 668). pip inside the venv is brought to a known version first.
if [[ ! -x "$INTEROP_VENV/bin/python3" ]]; then
  python3 -m venv "$INTEROP_VENV" || {
    echo "python3 -m venv failed: install python3-venv (Debian) or a Python with venv" >&2
    exit 1
  }
fi
VPY="$INTEROP_VENV/bin/python3"
if "$VPY" - "${PY_PACKAGES[@]}" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  echo "already installed"
else
  export PIP_ROOT_USER_ACTION=ignore # an env var, not a flag: every pip version accepts it
  "$VPY" -m pip install -q --disable-pip-version-check "pip==$PIP_VERSION"
  "$VPY" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
fi

step "Apache Kafka $("$REPO/perf/kafka/kafka.sh" version) jars (Maven)"
"$REPO/perf/kafka/kafka.sh" fetch

step "Java client program dependencies (Maven, online)"
mvn -q -B -Dstyle.color=never -f "$HERE/java/pom.xml" compile

KAFKAJS_VERSION="$(sed -n 's/.*"kafkajs": "\(.*\)".*/\1/p' "$HERE/js/package.json")"
step "kafkajs $KAFKAJS_VERSION (npm ci)"
if grep -qs "\"version\": \"$KAFKAJS_VERSION\"" "$HERE/js/node_modules/kafkajs/package.json"; then
  echo "already installed"
else
  command -v npm >/dev/null || { echo "npm not found: install Node.js (kafkajs is a default client)" >&2; exit 1; }
  (cd "$HERE/js" && npm ci --no-audit --no-fund --silent)
fi

step "Go client programs: franz-go, sarama (go build; modules pinned by go/go.sum)"
bash "$HERE/go/build.sh"

step "versions"
echo "kcat: $(kcat -V 2>&1 | grep -m 1 -i "^version" || true)"
"$VPY" - "${PY_PACKAGES[@]}" <<'PY'
import sys
from importlib.metadata import version
print(f"python: {sys.version.split()[0]} ({sys.prefix}), pip {version('pip')}")
for spec in sys.argv[1:]:
    name = spec.split("==")[0]
    print(f"{name}: {version(name)}")
PY
echo "kafkajs: $KAFKAJS_VERSION (node $(node -v))"
bash "$HERE/go/build.sh" --versions
step "done"
