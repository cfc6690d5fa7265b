#!/usr/bin/env bash
# TLS and SASL with real clients (issue 34) against a freshly started broker with five
# listeners on 127.0.0.1: PLAINTEXT (PORT), SSL with mutual TLS (PORT+1), SASL_SSL with
# PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (PORT+2), certificates from `shardlog certs`;
# SASL_PLAINTEXT (PORT+3) with OAUTHBEARER (signed tokens, a JWKS file of an RSA key made
# here) and SCRAM-SHA-512 with connections.max.reauth.ms=3000 (KIP-368); DEV (PORT+4,
# SASL_PLAINTEXT) with Kafka's unsecured OAUTHBEARER validator.
# Kafka's ConfigCommand (kafka-configs.sh) creates SCRAM users; confluent-kafka produces and
# consumes over SSL (principal User:CN=alice), SASL_SSL SCRAM-SHA-512 and SASL_SSL PLAIN; the
# Java console producer and consumer over SASL_SSL SCRAM-SHA-512; a wrong password fails
# while another client carries on; a plaintext client on the TLS port is closed.
# OAUTHBEARER: confluent-kafka with an oauth_cb signing 10-second tokens (it refreshes them and
# re-authenticates while producing for 12 s); the Java console clients with the unsecured
# login module; the Java console clients with SCRAM re-authenticating every ~3 s for 10 s.
# Prerequisites: tests/interop/install.sh (confluent-kafka, Kafka jars), openssl. Bounded:
# < 4.5 min (about 1.5 min on a quiet machine).
# Usage: tests/security/run.sh [PORT]   (default 26290)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=tests/interop/env.sh
source "$REPO/tests/interop/env.sh" # python3 = the interop venv, once installed
PORT="${1:-26290}"
BIN="$REPO/target/debug/shardlog"
cd "$REPO"
cargo build -q --bin shardlog
WORK="$(mktemp -d)"
"$BIN" certs --out "$WORK/certs" --client alice >/dev/null
# The identity provider's signing key, and its public half as the JWKS the broker reads.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/idp-key.pem" 2>/dev/null
python3 - "$(openssl rsa -in "$WORK/idp-key.pem" -noout -modulus | cut -d= -f2)" >"$WORK/jwks.json" <<'PY'
import base64, json, sys
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
key = {"kty": "RSA", "kid": "idp-1", "use": "sig", "alg": "RS256", "e": "AQAB",
       "n": b64(bytes.fromhex(sys.argv[1]))}
print(json.dumps({"keys": [key]}))
PY
cat >"$WORK/broker.toml" <<TOML
listeners = "PLAINTEXT://127.0.0.1:$PORT,SSL://127.0.0.1:$((PORT + 1)),SASL_SSL://127.0.0.1:$((PORT + 2)),SASL_PLAINTEXT://127.0.0.1:$((PORT + 3)),DEV://127.0.0.1:$((PORT + 4))"
"listener.security.protocol.map" = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,DEV:SASL_PLAINTEXT"
"ssl.keystore.location" = "$WORK/certs/broker.pem"
"ssl.truststore.location" = "$WORK/certs/ca.pem"
"listener.name.ssl.ssl.client.auth" = "required"
"listener.name.sasl_ssl.plain.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="carol-secret";'
"listener.name.sasl_plaintext.sasl.enabled.mechanisms" = "OAUTHBEARER,SCRAM-SHA-512"
"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class" = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url" = "file://$WORK/jwks.json"
"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.audience" = "shardlog"
"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer" = "https://idp.test"
"listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms" = 3000
"listener.name.dev.sasl.enabled.mechanisms" = "OAUTHBEARER"
"listener.name.dev.oauthbearer.sasl.jaas.config" = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;'
TOML
"$BIN" serve --config "$WORK/broker.toml" --admin-listen 127.0.0.1:0 --data-dir "$WORK/data" \
  --shards 2 --log-level info 2>"$WORK/broker.log" &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$((PORT + 4))") 2>/dev/null && break; sleep 0.1; done
KAFKA_CLASSPATH="$("$REPO/perf/kafka/kafka.sh" classpath)"
export KAFKA_CLASSPATH
if ! timeout 240 python3 "$HERE/check.py" "$PORT" "$WORK"; then
  echo "== broker log (last 40 lines)"
  tail -n 40 "$WORK/broker.log"
  exit 1
fi
