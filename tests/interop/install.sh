#!/usr/bin/env bash
# Installs what the interoperability suite needs, idempotently, on a fresh machine:
# Debian's kcat, confluent-kafka and kafka-python from PyPI (pinned to the validated
# versions), and the Maven artifacts of the pinned Apache Kafka (CLI tools, via
# perf/kafka/kafka.sh fetch) and of the Java client program (an online build that fills
# ~/.m2, so run.sh can build it offline with `mvn -o`); kafkajs with npm (pinned by
# js/package-lock.json). These are also everything tests/groups/run.sh needs.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PY_PACKAGES=(confluent-kafka==2.16.1 kafka-python==3.0.12 prometheus-client==0.26.0)

step() { echo "== install: $*"; }
as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

step "kcat (apt)"
if command -v kcat >/dev/null; then
  echo "kcat present: $(command -v kcat)"
else
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi

step "python clients (pip): ${PY_PACKAGES[*]}"
if python3 - "${PY_PACKAGES[@]}" <<'PY'
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
  pip_args=(-q --disable-pip-version-check --root-user-action=ignore install "${PY_PACKAGES[@]}")
  # A distribution Python marked externally-managed (PEP 668) needs the explicit override.
  python3 -m pip "${pip_args[@]}" || python3 -m pip "${pip_args[@]}" --break-system-packages
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

step "done"
