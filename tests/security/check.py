"""TLS and SASL with real clients (issue 34): see run.sh. Usage: check.py PORT WORKDIR."""
import base64
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

PORT = int(sys.argv[1])
WORK = sys.argv[2]
CERTS = os.path.join(WORK, "certs")
PLAINTEXT, SSL, SASL_SSL, SASL_PLAINTEXT, DEV = (f"127.0.0.1:{PORT + i}" for i in range(5))
CP = os.environ["KAFKA_CLASSPATH"]
N = 30


def java(main, *args, stdin=None, timeout=90):
    cmd = ["java", "-Xmx256m", "-cp", CP, main, *args]
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{main} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def ssl_conf():
    return {"bootstrap.servers": SSL, "security.protocol": "SSL",
            "ssl.ca.location": f"{CERTS}/ca.pem",
            "ssl.certificate.location": f"{CERTS}/client-alice-cert.pem",
            "ssl.key.location": f"{CERTS}/client-alice-key.pem"}


def sasl_conf(mechanism, user, password):
    return {"bootstrap.servers": SASL_SSL, "security.protocol": "SASL_SSL",
            "ssl.ca.location": f"{CERTS}/ca.pem", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def roundtrip(name, conf):
    """Creates a topic, produces N keyed records, consumes them back in order per key."""
    topic = f"sec-{name}"
    admin = AdminClient(conf)
    brokers = admin.list_topics(timeout=15).brokers
    endpoints = {(b.host, b.port) for b in brokers.values()}
    want = {("127.0.0.1", int(conf["bootstrap.servers"].rsplit(":", 1)[1]))}
    assert endpoints == want, f"{name}: Metadata endpoints {endpoints}, want {want}"
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    producer = Producer(dict(conf, **{"message.timeout.ms": 15000}))
    for i in range(N):
        producer.produce(topic, key=f"k{i % 5}", value=f"v{i}")
    assert producer.flush(20) == 0, f"{name}: records not delivered"
    consumer = Consumer(dict(conf, **{"group.id": f"g-{name}", "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got, deadline = [], time.time() + 30
    while len(got) < N and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.key().decode(), m.value().decode()))
    consumer.close()
    assert len(got) == N, f"{name}: consumed {len(got)} of {N}"
    for k in range(5):
        values = [v for key, v in got if key == f"k{k}"]
        assert values == [f"v{i}" for i in range(k, N, 5)], f"{name}: order of k{k}: {values}"
    print(f"ok   confluent-kafka {name}: {N} records produced and consumed")


def broker_log():
    with open(os.path.join(WORK, "broker.log")) as f:
        return f.read()


def logged(needle, seconds=5):
    """Whether the broker logs `needle` within `seconds` (it may close a connection a moment
    before it writes the line saying why)."""
    deadline = time.time() + seconds
    while needle not in broker_log():
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_token(sub, lifetime_s):
    """An RS256 JWT from the identity provider's key (run.sh made it, the broker has its
    public half in the JWKS), signed with openssl."""
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": "idp-1"}
    claims = {"sub": sub, "iat": now, "exp": now + lifetime_s, "aud": "shardlog",
              "iss": "https://idp.test", "scope": "kafka"}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", f"{WORK}/idp-key.pem"],
                               input=signing_input.encode(), capture_output=True,
                               check=True).stdout
    return f"{signing_input}.{b64(signature)}", now + lifetime_s


def oauth_signed_confluent():
    """confluent-kafka's oauth_cb hands out 10-second tokens: the broker caps each session at
    its token's exp (session_lifetime_ms), librdkafka fetches a new token (at 80% of its
    lifetime) and re-authenticates in band while a producer runs for 12 s, and nothing is
    lost."""
    calls = []

    def oauth_cb(_config):
        calls.append(time.time())
        token, expiry = signed_token("carol", 10)
        return token, expiry, "carol", {"traceId": "check-py"}

    conf = {"bootstrap.servers": SASL_PLAINTEXT, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb}
    roundtrip("oauthbearer-signed", conf)
    before = broker_log().count("re-authentication succeeded shard")
    delivered, errors = [], []
    producer = Producer(dict(conf, **{"message.timeout.ms": 15000}))
    deadline = time.time() + 12
    while time.time() < deadline:
        producer.produce("sec-oauth-long", value=b"x",
                         on_delivery=lambda e, m: (errors if e else delivered).append(e))
        producer.poll(0.05)
    assert producer.flush(15) == 0 and not errors, f"oauth producer: {errors[:3]}"
    log = broker_log()
    reauths = [line for line in log.splitlines() if "re-authentication succeeded" in line
               and "User:carol" in line and "OAUTHBEARER" in line]
    assert len(calls) >= 3, f"oauth_cb called {len(calls)} times"
    assert reauths and log.count("re-authentication succeeded shard") > before, "no re-auth"
    # A connection opened with a token about to expire gets a session that ends with it
    # (Kafka's rule) and may be closed by the broker, then reopened by the client: counted,
    # not failed, since librdkafka's choice of token decides it.
    expired = log.count("SASL session of User:carol expired")
    print(f"ok   confluent-kafka OAUTHBEARER signed tokens: roundtrip, then {len(delivered)} "
          f"records over 12 s with {len(calls)} tokens, {len(reauths)} re-authentications, "
          f"{expired} sessions ended by their token")


def java_props(name, mechanism, jaas):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                f"sasl.jaas.config={jaas}\n")
    return path


def oauth_unsecured_java():
    """Kafka's Java console clients with the unsecured OAUTHBEARER login module (DEV)."""
    props = java_props("dev.properties", "OAUTHBEARER",
                       "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                       "required unsecuredLoginStringClaim_sub=\"dave\";")
    lines = "".join(f"dev-{i}\n" for i in range(10))
    java("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", DEV,
         "--topic", "sec-dev", "--producer.config", props, stdin=lines)
    out = java("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", DEV,
               "--topic", "sec-dev", "--from-beginning", "--max-messages", "10",
               "--timeout-ms", "30000", "--consumer.config", props)
    assert out.split() == [f"dev-{i}" for i in range(10)], out
    assert logged("principal=User:dave")
    print("ok   Java console producer and consumer over OAUTHBEARER (unsecured login module)")


def reauth_java_scram():
    """KIP-368 with the Java clients: SCRAM sessions of 3 s (connections.max.reauth.ms), a
    console consumer and producer running ~10 s with records trickling; they re-authenticate
    on their open connections and nothing is lost or closed."""
    props = java_props("reauth.properties", "SCRAM-SHA-512",
                       "org.apache.kafka.common.security.scram.ScramLoginModule required "
                       "username=\"alice\" password=\"alice-secret\";")
    cmd = ["java", "-Xmx256m", "-cp", CP]
    before = broker_log().count("SASL re-authentication succeeded")
    consumer = subprocess.Popen(
        cmd + ["org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
               SASL_PLAINTEXT, "--topic", "sec-reauth", "--from-beginning", "--max-messages",
               "40", "--timeout-ms", "60000", "--consumer.config", props],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    producer = subprocess.Popen(
        cmd + ["org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", SASL_PLAINTEXT,
               "--topic", "sec-reauth", "--producer.config", props],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got = []
    reader = threading.Thread(target=lambda: got.extend(line.strip() for line in consumer.stdout))
    reader.start()
    # The first record goes through both JVMs before the clock starts (a loaded machine may
    # take many seconds to start a JVM), then one every 0.25 s for 10 s.
    producer.stdin.write("reauth-0\n")
    producer.stdin.flush()
    deadline = time.time() + 90
    while not got and time.time() < deadline and consumer.poll() is None:
        time.sleep(0.1)
    assert got == ["reauth-0"], f"the first record did not arrive: {got}"
    for i in range(1, 40):
        time.sleep(0.25)
        producer.stdin.write(f"reauth-{i}\n")
        producer.stdin.flush()
    producer.stdin.close()
    assert producer.wait(60) == 0, producer.stderr.read()[-2000:]
    assert consumer.wait(60) == 0, consumer.stderr.read()[-2000:]
    reader.join(10)
    assert got == [f"reauth-{i}" for i in range(40)], got
    log = broker_log()
    reauths = [line for line in log.splitlines()
               if "SASL re-authentication succeeded" in line and "SCRAM-SHA-512" in line]
    assert len(reauths) >= 4 and log.count("SASL re-authentication succeeded") > before, reauths
    assert "SASL session of User:alice expired" not in log, "a session ran out"
    print(f"ok   Java console clients with SCRAM over 10 s of 3 s sessions: "
          f"{len(reauths)} re-authentications, 40 records in order")


def scram_users():
    common = ["--bootstrap-server", PLAINTEXT, "--entity-type", "users"]
    java("kafka.admin.ConfigCommand", *common, "--entity-name", "alice", "--alter",
         "--add-config",
         "SCRAM-SHA-512=[iterations=8192,password=alice-secret],SCRAM-SHA-256=[password=alice-secret]")
    java("kafka.admin.ConfigCommand", *common, "--entity-name", "bob", "--alter",
         "--add-config", "SCRAM-SHA-256=[password=bob-secret],SCRAM-SHA-512=[password=bob-secret]")
    java("kafka.admin.ConfigCommand", *common, "--entity-name", "bob", "--alter",
         "--delete-config", "SCRAM-SHA-256")
    out = java("kafka.admin.ConfigCommand", *common, "--describe")
    alice = next(line for line in out.splitlines() if "'alice'" in line)
    bob = next(line for line in out.splitlines() if "'bob'" in line)
    assert "SCRAM-SHA-256=iterations=4096" in alice and "SCRAM-SHA-512=iterations=8192" in alice, out
    assert "SCRAM-SHA-256" not in bob and "SCRAM-SHA-512=iterations=4096" in bob, out
    print("ok   kafka-configs.sh: SCRAM users created, described, a mechanism deleted")


def java_clients():
    props = os.path.join(WORK, "client.properties")
    with open(props, "w") as f:
        f.write("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                "required username=\"alice\" password=\"alice-secret\";\n"
                f"ssl.truststore.type=PEM\nssl.truststore.location={CERTS}/ca.pem\n")
    lines = "".join(f"java-{i}\n" for i in range(10))
    java("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", SASL_SSL,
         "--topic", "sec-java", "--producer.config", props, stdin=lines)
    out = java("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", SASL_SSL,
               "--topic", "sec-java", "--from-beginning", "--max-messages", "10",
               "--timeout-ms", "30000", "--consumer.config", props)
    assert out.split() == [f"java-{i}" for i in range(10)], out
    print("ok   Java console producer and consumer over SASL_SSL SCRAM-SHA-512")


def kcat_scram():
    """Debian's kcat (librdkafka 2.0, which repeats the client nonce in SCRAM's last message)."""
    common = ["kcat", "-b", SASL_SSL, "-X", "security.protocol=SASL_SSL",
              "-X", f"ssl.ca.location={CERTS}/ca.pem", "-X", "sasl.mechanism=SCRAM-SHA-512",
              "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-t", "sec-kcat"]
    lines = "".join(f"kcat-{i}\n" for i in range(10))
    subprocess.run(common + ["-P"], input=lines, text=True, check=True, timeout=30)
    out = subprocess.run(common + ["-C", "-e", "-o", "beginning"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    assert sorted(out.split()) == sorted(f"kcat-{i}" for i in range(10)), out
    print("ok   kcat over SASL_SSL SCRAM-SHA-512")


def wrong_password_while_others_carry_on():
    stop, delivered, errors = threading.Event(), [], []
    good = Producer(dict(sasl_conf("SCRAM-SHA-512", "alice", "alice-secret"),
                         **{"message.timeout.ms": 15000}))

    def keep_producing():
        while not stop.is_set():
            good.produce("sec-bystander", value=b"x",
                         on_delivery=lambda e, m: (errors if e else delivered).append(e))
            good.poll(0.05)
        good.flush(15)

    t = threading.Thread(target=keep_producing)
    t.start()
    for mechanism in ("SCRAM-SHA-512", "PLAIN"):
        bad = AdminClient(dict(sasl_conf(mechanism, "alice", "wrong"), **{"log_level": 0}))
        try:
            bad.list_topics(timeout=3)
            raise SystemExit(f"{mechanism}: a wrong password was accepted")
        except KafkaException:
            pass
    stop.set()
    t.join()
    assert not errors and len(delivered) > 10, f"bystander: {len(delivered)} ok, {errors[:3]}"
    assert "Authentication failed" in broker_log()
    print(f"ok   wrong passwords refused; a bystander delivered {len(delivered)} records")


def plaintext_on_tls_port():
    s = socket.create_connection(("127.0.0.1", PORT + 1), timeout=20)
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    s.sendall(struct.pack(">i", len(body)) + body)
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    # Nothing Kafka-shaped: at most a TLS alert record (content type 21), then the close.
    assert data == b"" or data[0] == 21, data
    assert logged("TLS handshake failed")
    print("ok   a plaintext client on the TLS port is closed")


scram_users()
roundtrip("ssl-mtls", ssl_conf())
assert "principal=User:CN=alice" in broker_log(), "mutual-TLS principal not logged"
roundtrip("scram-sha-512", sasl_conf("SCRAM-SHA-512", "alice", "alice-secret"))
roundtrip("scram-sha-256", sasl_conf("SCRAM-SHA-256", "alice", "alice-secret"))
roundtrip("plain", sasl_conf("PLAIN", "carol", "carol-secret"))
java_clients()
kcat_scram()
wrong_password_while_others_carry_on()
plaintext_on_tls_port()
oauth_signed_confluent()
oauth_unsecured_java()
reauth_java_scram()
print("security: all checks passed")
