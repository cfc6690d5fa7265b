"""Clients infer the broker's version from its ApiVersions ranges: kafka-python must see a
Kafka 4.1 broker (it inferred 3.8 while Fetch stopped at v12 and Produce at v11).

Usage: inferred_version.py BOOTSTRAP. Bounded: the client gives up after its request timeout (30 s).
"""
import sys

from kafka import KafkaConsumer

BS = sys.argv[1]


def main():
    c = KafkaConsumer(bootstrap_servers=BS, request_timeout_ms=30_000)
    version = c.config["api_version"]
    c.close()
    if tuple(version[:2]) < (4, 1):
        raise SystemExit(f"FAIL: kafka-python inferred broker version {version}, want >= (4, 1)")
    print(f"ok: kafka-python inferred broker version {version}")


if __name__ == "__main__":
    main()
