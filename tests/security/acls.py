"""Kafka ACLs with real clients (issue 35): see acls.sh. Usage: acls.py PORT WORKDIR TARGET.

Every expectation here holds against Apache Kafka 4.1 with StandardAuthorizer too
(`acls.sh --kafka`), so the codes are Kafka's, not ours.
"""
import os
import subprocess
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)

PORT, WORK, TARGET = int(sys.argv[1]), sys.argv[2], sys.argv[3]
BOOT = f"127.0.0.1:{PORT}"
CP = os.environ["KAFKA_CLASSPATH"]
TOPIC_DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = KafkaError.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = KafkaError.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def conf(user, **extra):
    c = {"bootstrap.servers": BOOT, "security.protocol": "SASL_PLAINTEXT",
         "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}
    c.update(extra)
    return c


def admin_props():
    path = os.path.join(WORK, "admin.properties")
    with open(path, "w") as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                "required username=\"admin\" password=\"admin-secret\";\n")
    return path


def acl_command(*args):
    """kafka-acls.sh: Kafka 4.1's org.apache.kafka.tools.AclCommand, as the super user."""
    cmd = ["java", "-Xmx256m", "-cp", CP, "org.apache.kafka.tools.AclCommand",
           "--bootstrap-server", BOOT, "--command-config", admin_props(), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"AclCommand {args} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def produce(user, topic, **extra):
    """The delivery error code of one record (None: delivered)."""
    outcome = []
    p = Producer(conf(user, **{"message.timeout.ms": 10000}, **extra))
    p.produce(topic, value=b"v", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(15)
    assert outcome, f"{user} → {topic}: no delivery report"
    return None if outcome[0] is None else outcome[0].code()


def consume(user, topic, group, want):
    """Polls a group consumer until `want` records arrive (returns None) or an error does."""
    c = Consumer(conf(user, **{"group.id": group, "auto.offset.reset": "earliest",
                               "enable.auto.commit": True}))
    c.subscribe([topic])
    got, deadline = 0, time.time() + 30
    try:
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return m.error().code()
            got += 1
            if got >= want:
                c.commit(asynchronous=False)
                return None
        raise SystemExit(f"{user}: consumed {got} of {want} from {topic} in group {group}")
    finally:
        c.close()


def error_of(future):
    try:
        future.result(15)
        return None
    except KafkaException as e:
        return e.args[0].code()


def expect(got, want, what):
    assert got == want, f"{what}: got {got}, want {want}"


def kp_describe_acls(user):
    """kafka-python's DescribeAcls of alice's ACLs as `user`: their count, or the error code."""
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType,
                             ACLResourcePatternType, KafkaAdminClient, ResourcePatternFilter)
    from kafka.admin import ResourceType as KpResourceType
    kp = KafkaAdminClient(bootstrap_servers=BOOT, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="PLAIN", sasl_plain_username=user,
                          sasl_plain_password=f"{user}-secret", request_timeout_ms=15000)
    flt = ACLFilter(principal="User:alice", host="*", operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                           ACLResourcePatternType.ANY))
    try:
        acls, error = kp.describe_acls(flt)
        return len(acls) if error.errno == 0 else error.errno
    except Exception as e:  # kafka.errors.KafkaError subclasses carry the code
        if getattr(e, "errno", None) is None:
            raise
        return e.errno
    finally:
        kp.close()


def every_acl():
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                            AclOperation.ANY, AclPermissionType.ANY)


def setup():
    admin = AdminClient(conf("admin"))
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("orders", "pay-eu", "secret")]
                                 ).values():
        f.result(20)
    assert produce("admin", "orders") is None, "the super user writes"
    print(f"ok   [{TARGET}] the super user creates topics and writes without ACLs")


def refused_without_acls():
    assert "User:alice" not in acl_command("--list"), "no ACLs yet"
    expect(produce("alice", "orders"), TOPIC_DENIED, "produce")
    expect(consume("alice", "orders", "g1", 1), GROUP_DENIED, "group")
    alice = AdminClient(conf("alice"))
    # librdkafka reports DescribeAcls' top-level error as an empty answer (Kafka's too);
    # kafka-python raises the error code.
    expect(alice.describe_acls(every_acl()).result(15), [], "librdkafka DescribeAcls")
    expect(kp_describe_acls("alice"), CLUSTER_DENIED, "kafka-python DescribeAcls")
    created = alice.create_topics([NewTopic("alice-own", 1, 1)])
    expect(error_of(created["alice-own"]), TOPIC_DENIED, "CreateTopics")
    assert "orders" not in alice.list_topics(timeout=15).topics, "no DESCRIBE: not listed"
    txn = Producer(conf("alice", **{"transactional.id": "tx-alice"}))
    try:
        txn.init_transactions(15)
        raise SystemExit("init_transactions without ACLs succeeded")
    except KafkaException as e:
        expect(e.args[0].code(), TXN_DENIED, "init_transactions")
    print(f"ok   [{TARGET}] without ACLs: produce 29, group 30, DescribeAcls 31, "
          "CreateTopics 29, InitProducerId(txn) 53, topics hidden")


def grant():
    alice = "User:alice"
    acl_command("--add", "--allow-principal", alice, "--producer", "--topic", "orders")
    acl_command("--add", "--allow-principal", alice, "--consumer", "--topic", "orders",
                "--group", "g1")
    acl_command("--add", "--allow-principal", alice, "--producer", "--topic", "pay-",
                "--resource-pattern-type", "prefixed")
    acl_command("--add", "--allow-principal", alice, "--producer", "--topic", "orders",
                "--transactional-id", "tx-alice")
    listed = acl_command("--list")
    for want in ("name=orders, patternType=LITERAL", "name=pay-, patternType=PREFIXED",
                 "resourceType=GROUP, name=g1", "resourceType=TRANSACTIONAL_ID, name=tx-alice",
                 "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW",
                 "operation=READ"):
        assert want in listed, f"--list lacks {want!r}:\n{listed}"
    print(f"ok   [{TARGET}] kafka-acls.sh --add --producer/--consumer (literal, prefixed), --list")


def works_with_acls():
    expect(produce("alice", "orders"), None, "produce")
    expect(produce("alice", "pay-eu"), None, "produce through the PREFIXED pay- ACL")
    expect(produce("alice", "secret"), TOPIC_DENIED, "produce elsewhere")
    expect(consume("alice", "orders", "g1", 2), None, "group g1")
    expect(consume("alice", "orders", "g2", 1), GROUP_DENIED, "group g2 (READ on g1 only)")
    txn = Producer(conf("alice", **{"transactional.id": "tx-alice"}))
    txn.init_transactions(15)
    txn.begin_transaction()
    txn.produce("orders", value=b"in-txn")
    txn.commit_transaction(15)
    alice = AdminClient(conf("alice"))
    topics = alice.list_topics(timeout=15).topics
    assert "orders" in topics and "secret" not in topics, sorted(topics)
    print(f"ok   [{TARGET}] with Kafka's documented ACLs: produce, prefixed produce, group "
          "consume, transactional commit; other topics and groups still refused")


def admin_apis_list_them():
    admin = AdminClient(conf("admin"))  # kept: a dropped client fails its futures
    bindings = admin.describe_acls(every_acl()).result(15)
    alice_ops = {(b.restype, b.name, b.operation) for b in bindings if b.principal == "User:alice"}
    assert (ResourceType.GROUP, "g1", AclOperation.READ) in alice_ops, alice_ops
    assert (ResourceType.TOPIC, "pay-", AclOperation.WRITE) in alice_ops, alice_ops
    expect(kp_describe_acls("admin"), len(alice_ops), "kafka-python DescribeAcls")
    print(f"ok   [{TARGET}] librdkafka and kafka-python DescribeAcls list alice's "
          f"{len(alice_ops)} ACLs")


def remove_group_acl():
    acl_command("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
                "--group", "g1")
    assert "resourceType=GROUP, name=g1" not in acl_command("--list")
    expect(consume("alice", "orders", "g1", 1), GROUP_DENIED, "group after --remove")
    print(f"ok   [{TARGET}] kafka-acls.sh --remove: the group is refused again")


setup()
refused_without_acls()
grant()
works_with_acls()
admin_apis_list_them()
remove_group_acl()
print(f"acls [{TARGET}]: all checks passed")
