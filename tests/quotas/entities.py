"""User and user+client-id quotas (issue 18, KIP-55) with Kafka's own ConfigCommand.

- `--entity-type users --entity-name alice --add-config producer_byte_rate=...`,
  `--entity-type users --entity-default --entity-type clients --entity-name c1`,
  `--entity-type users --entity-default` and `--entity-type users --entity-name alice
  --entity-type clients --entity-default` are set, each `--describe` shows its value, a
  `--describe --entity-type users` lists the user entities, `--delete-config` removes one.
- The quota reaches the request path through the connection's principal (User:ANONYMOUS
  without authentication): with `users/ANONYMOUS/clients/qe-slow` set, a confluent-kafka
  producer with client.id qe-slow is throttled (librdkafka's `throttle` statistics) while
  client.id qe-free is not (user ANONYMOUS has no quota of its own).

Usage: KAFKA_CLASSPATH=... python3 entities.py BOOTSTRAP SHARDS. Prints PASS or exits non-zero.
"""
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quota_check import check, configs, produce  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

RATE = 200_000


def alter_and_describe(bs, entity, config, shown):
    code, out = configs(bs, "--alter", *entity, "--add-config", config)
    check(code == 0, f"alter {' '.join(entity)}: {out.strip()[-300:]!r}")
    code, out = configs(bs, "--describe", *entity)
    check(code == 0 and shown in out, f"describe {' '.join(entity)} shows {shown}: {out!r}")


def main():
    bs, _shards = sys.argv[1], int(sys.argv[2])
    alice = ["--entity-type", "users", "--entity-name", "alice"]
    dflt_c1 = ["--entity-type", "users", "--entity-default", "--entity-type", "clients",
               "--entity-name", "c1"]
    user_dflt = ["--entity-type", "users", "--entity-default"]
    alice_dflt = ["--entity-type", "users", "--entity-name", "alice", "--entity-type",
                  "clients", "--entity-default"]
    alter_and_describe(bs, alice, "producer_byte_rate=1048576", "producer_byte_rate=1048576")
    alter_and_describe(bs, dflt_c1, "consumer_byte_rate=2048", "consumer_byte_rate=2048")
    alter_and_describe(bs, user_dflt, "producer_byte_rate=4096", "producer_byte_rate=4096")
    alter_and_describe(bs, alice_dflt, "producer_byte_rate=8192", "producer_byte_rate=8192")
    code, out = configs(bs, "--describe", "--entity-type", "users")
    check(code == 0 and "'alice'" in out and "1048576" in out and "4096" in out,
          f"describe all users: {out!r}")
    code, out = configs(bs, "--describe", *alice)
    check(code == 0 and "8192" not in out, f"users/alice alone (strict): {out!r}")
    code, out = configs(bs, "--alter", *alice, "--delete-config", "producer_byte_rate")
    check(code == 0, f"delete-config: {out!r}")
    code, out = configs(bs, "--describe", *alice)
    check(code == 0 and "1048576" not in out, f"deleted from users/alice: {out!r}")
    # Leave no user default behind: it would hold every client below.
    for entity, key in [(user_dflt, "producer_byte_rate"), (alice_dflt, "producer_byte_rate"),
                        (dflt_c1, "consumer_byte_rate")]:
        code, out = configs(bs, "--alter", *entity, "--delete-config", key)
        check(code == 0, f"delete {' '.join(entity)}: {out!r}")

    anon_slow = ["--entity-type", "users", "--entity-name", "ANONYMOUS", "--entity-type",
                 "clients", "--entity-name", "qe-slow"]
    alter_and_describe(bs, anon_slow, f"producer_byte_rate={RATE}", f"producer_byte_rate={RATE}")
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"qe-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    time.sleep(0.5)
    rate, throttle = produce(bs, topic, "qe-slow", 6)
    print(f"     qe-slow (users/ANONYMOUS/clients/qe-slow): {rate:.0f} B/s, "
          f"throttle max {throttle} ms", flush=True)
    check(throttle > 0, "the user+client-id quota throttles the connection's principal")
    check(rate < RATE * 2, f"rate {rate:.0f} B/s held near the quota")
    rate, throttle = produce(bs, topic, "qe-free", 3)
    print(f"     qe-free: {rate:.0f} B/s, throttle max {throttle} ms", flush=True)
    check(throttle == 0, "another client id of the same user is not throttled")
    print("PASS")


if __name__ == "__main__":
    main()
