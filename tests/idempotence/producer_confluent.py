"""The confluent-kafka (librdkafka) side of tests/idempotence: enable.idempotence=true,
acks=all, 5 in flight, retrying until message.timeout.ms. Sends "rdkafka-<n>" (key
"k<n % 97>") until the file STOP exists, then flushes, printing "ACK <partition> <offset>
<value>" per acknowledged record ("ERR <value> <error>" per failed one) and "DONE <n>".
Usage: producer_confluent.py BOOTSTRAP TOPIC STOP"""
import os
import sys
import time

from confluent_kafka import Producer


def main():
    bs, topic, stop = sys.argv[1:4]
    p = Producer({
        "bootstrap.servers": bs,
        "enable.idempotence": True,
        "acks": "all",
        "max.in.flight.requests.per.connection": 5,
        "linger.ms": 5,
        "batch.size": 4096,
        "message.timeout.ms": 600000,
        "request.timeout.ms": 5000,
        "retry.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 5000,
    })

    def report(err, msg):
        value = msg.value().decode()
        if err is not None:
            print(f"ERR {value} {err}", flush=True)
        else:
            print(f"ACK {msg.partition()} {msg.offset()} {value}", flush=True)

    n = 0
    while not os.path.exists(stop):
        try:
            p.produce(topic, key=f"k{n % 97}", value=f"rdkafka-{n}", on_delivery=report)
        except BufferError:
            p.poll(0.1)
            continue
        n += 1
        p.poll(0)
        if n % 20 == 0:
            time.sleep(0.01)
    left = p.flush(600)
    print(f"DONE {n} unflushed={left}", flush=True)


if __name__ == "__main__":
    main()
