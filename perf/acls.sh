#!/usr/bin/env bash
# Produce and fetch throughput with Kafka's StandardAuthorizer and 10,000 ACLs (half LITERAL,
# half PREFIXED, for other principals and topics, plus the load generator's own READ, WRITE
# and CREATE on its topic) versus no authorizer, alternated A/B/A/B on one fresh broker each
# (`--shards 1`, broker on cpu 1, load generator on cpu 0; issue 35's measurement, never
# asserted). The load generator connects on PLAINTEXT as User:ANONYMOUS, which is not a super
# user, so every request goes through the ACL check (its connection's cache after the first).
#
#   perf/acls.sh [ROUNDS] [SECONDS]      (default 2 rounds of 10 s each)
#
# Ports 26450-26451. Environment: SHARDLOG (default target/release/shardlog); python3 with
# confluent-kafka (tests/interop/env.sh) creates the ACLs. Prints one line per run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=tests/interop/env.sh
source "$ROOT/tests/interop/env.sh"
ROUNDS="${1:-2}"; SECS="${2:-10}"
BIN="${SHARDLOG:-$ROOT/target/release/shardlog}"
PORT=26450
JAAS='org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'

create_acls() { # 9,997 ACLs of others + 3 of the load generator's = 10,000
  python3 - "$PORT" <<'PY'
import sys
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)
admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{int(sys.argv[1]) + 1}",
                     "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.username": "admin", "sasl.password": "admin-secret"})
A, T = AclPermissionType.ALLOW, ResourceType.TOPIC
acls = [AclBinding(T, f"t{i}", ResourcePatternType.LITERAL, f"User:u{i}", "*",
                   AclOperation.READ if i % 2 else AclOperation.WRITE, A) for i in range(4997)]
acls += [AclBinding(T, f"p{i}-", ResourcePatternType.PREFIXED, f"User:u{i}", "*",
                    AclOperation.WRITE, A) for i in range(5000)]
acls += [AclBinding(T, "bench", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", op, A)
         for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE)]
for i in range(0, len(acls), 1000):
    for f in admin.create_acls(acls[i:i + 1000]).values():
        f.result(60)
print(f"{len(acls)} ACLs created", file=sys.stderr)
PY
}

run_one() { # $1 = none|acls; prints produce and fetch MiB/s
  local data; data="$(mktemp -d)"
  local auth=""
  if [[ "$1" == acls ]]; then
    auth='"authorizer.class.name" = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"super.users" = "User:admin"'
  fi
  cat >"$data/broker.toml" <<TOML
listeners = "PLAINTEXT://127.0.0.1:$PORT,SASL_PLAINTEXT://127.0.0.1:$((PORT + 1))"
"listener.name.sasl_plaintext.plain.sasl.jaas.config" = '$JAAS'
$auth
TOML
  taskset -c 1 "$BIN" serve --config "$data/broker.toml" --admin-listen 127.0.0.1:0 \
    --data-dir "$data/d" --shards 1 --log-level error --spin-before-park-us 0 >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
  [[ "$1" == acls ]] && create_acls
  taskset -c 0 "$BIN" bench produce -b "127.0.0.1:$PORT" --topic bench --partitions 4 \
    --duration "${SECS}s" --warmup 2s --record-size 1KiB --connections 2 \
    --json "$data/produce.json" --quiet >/dev/null 2>&1
  taskset -c 0 "$BIN" bench consume -b "127.0.0.1:$PORT" --topic bench --to-end \
    --json "$data/consume.json" --quiet >/dev/null 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); c=json.load(open(sys.argv[2])); print("produce %.1f MiB/s p99 %s us, fetch %.1f MiB/s" % (p["mib_per_s"], p["latency_us"]["p99"], c["mib_per_s"]))' "$data/produce.json" "$data/consume.json"
  rm -rf "$data"
}
for r in $(seq "$ROUNDS"); do
  for mode in none acls; do
    echo "round $r $mode: $(run_one "$mode")"
  done
done
