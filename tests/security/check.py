"""TLS and SASL with real clients (issue 34): see run.sh. Usage: check.py PORT WORKDIR."""
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
PLAINTEXT, SSL, SASL_SSL = (f"127.0.0.1:{PORT + i}" for i in range(3))
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
    assert "TLS handshake failed" in broker_log()
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
print("security: all checks passed")
