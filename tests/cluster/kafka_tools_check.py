"""Kafka's CLI tools against a three-node Shardlog cluster (issue 13), run by main class from
the pinned Kafka jars:

- `org.apache.kafka.tools.TopicCommand` (kafka-topics.sh): `--create --replication-factor 3`
  succeeds, `--describe` prints Leader, Replicas and Isr naming all three brokers, and leaders
  of a 6-partition topic are spread over the three brokers.
- `org.apache.kafka.tools.MetadataQuorumCommand` (kafka-metadata-quorum.sh):
  `describe --status` names a LeaderId among the voters, the three CurrentVoters and a
  HighWatermark; `describe --replication` lists one row per voter with its LogEndOffset.
- `--replication-factor 4` is refused with Kafka's InvalidReplicationFactorException.
- (issue 15) `--describe` goes through DescribeTopicPartitions: `Elr:` and `LastKnownElr:`
  are printed (not `N/A`, Kafka's answer without that API). After SIGKILLing broker 3:
  a min.insync.replicas=3 topic shows `Elr: 3`; `--under-replicated-partitions`,
  `--under-min-isr-partitions`, `--at-min-isr-partitions` and `--unavailable-partitions`
  list exactly the partitions Kafka's would (an RF-1 topic on broker 3 is unavailable,
  `Leader: none`).

Usage: KAFKA_CLASSPATH=... python3 kafka_tools_check.py BOOTSTRAP_LIST
Prints PASS or exits non-zero. Bounded: every tool run times out.
"""
import os
import re
import subprocess
import sys
import time
import uuid

TOOL_TIMEOUT_S = 90


def check(cond, what, detail=""):
    if not cond:
        raise SystemExit(f"FAIL: {what}\n{detail}")
    print(f"ok   {what}", flush=True)


def tool(main_class, *args):
    cmd = ["java", "-Xmx256m", "-cp", os.environ["KAFKA_CLASSPATH"], main_class, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    return done.returncode, done.stdout + done.stderr


def until(what, fn, limit_s=60):
    deadline = time.time() + limit_s
    last = None
    while time.time() < deadline:
        ok, last = fn()
        if ok:
            return last
        time.sleep(1)
    raise SystemExit(f"FAIL: {what} within {limit_s}s\n{last}")


def main():
    bs = sys.argv[1]
    first = bs.split(",")[0]

    def quorum_status():
        code, out = tool("org.apache.kafka.tools.MetadataQuorumCommand",
                         "--bootstrap-server", first, "describe", "--status")
        return code == 0 and "LeaderId" in out, out
    out = until("kafka-metadata-quorum describe --status answers", quorum_status)
    leader = int(re.search(r"LeaderId:\s+(\d+)", out).group(1))
    check(leader in (1, 2, 3), f"quorum leader {leader} is a voter", out)
    voters = re.search(r"CurrentVoters:\s+(.*)", out).group(1)
    check(all(f'"id": {i}' in voters or f'"id":{i}' in voters or re.search(rf"\b{i}\b", voters)
              for i in (1, 2, 3)), "CurrentVoters lists 1, 2 and 3", out)
    check(re.search(r"HighWatermark:\s+\d+", out) is not None, "HighWatermark printed", out)

    code, out = tool("org.apache.kafka.tools.MetadataQuorumCommand",
                     "--bootstrap-server", first, "describe", "--replication")
    check(code == 0, "describe --replication exits 0", out)
    rows = [l for l in out.splitlines() if re.match(r"^\s*\d+\s", l)]
    check(len(rows) >= 3, "one replication row per voter", out)

    def brokers_registered():
        code, out = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs,
                         "--create", "--topic", f"probe-{uuid.uuid4().hex[:6]}",
                         "--partitions", "1", "--replication-factor", "3")
        return code == 0, out
    until("three brokers registered (RF 3 accepted)", brokers_registered)

    topic = f"rf3-{uuid.uuid4().hex[:8]}"
    code, out = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs,
                     "--create", "--topic", topic, "--partitions", "6",
                     "--replication-factor", "3")
    check(code == 0, "kafka-topics --create --replication-factor 3", out)

    def described():
        code, out = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs,
                         "--describe", "--topic", topic)
        return code == 0 and out.count("Leader:") == 6, out
    out = described_out = until("kafka-topics --describe lists 6 partitions", described)
    leaders = set()
    for line in out.splitlines():
        m = re.search(r"Leader:\s*(-?\d+)\s+Replicas:\s*([\d,]+)\s+Isr:\s*([\d,]*)", line)
        if not m:
            continue
        leaders.add(int(m.group(1)))
        replicas = sorted(int(x) for x in m.group(2).split(","))
        check(replicas == [1, 2, 3], f"partition replicas {m.group(2)} are brokers 1,2,3", line)
        check(int(m.group(1)) in (1, 2, 3), f"leader {m.group(1)} is a replica", line)
        check(len(m.group(3).split(",")) >= 1, "Isr printed", line)
        check("Elr: " in line and "LastKnownElr: " in line and "N/A" not in line,
              "Elr and LastKnownElr from DescribeTopicPartitions", line)
    check(leaders == {1, 2, 3}, f"leaders spread over the three brokers: {sorted(leaders)}",
          described_out)

    code, out = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs,
                     "--create", "--topic", f"rf4-{uuid.uuid4().hex[:6]}",
                     "--partitions", "1", "--replication-factor", "4")
    check(code != 0 and "InvalidReplicationFactor" in out,
          "replication factor 4 on 3 brokers refused with InvalidReplicationFactorException", out)
    elr_after_sigkill(bs)
    print("PASS")


def pid_listening(port):
    """The pid of the process listening on 127.0.0.1:`port` (from /proc: no tools needed)."""
    inodes = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
                inodes.add(fields[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(pid)
        except OSError:
            continue
    raise SystemExit(f"FAIL: no process listens on port {port}")


def partition_lines(out):
    """{(topic, partition): line} of TopicCommand's partition lines."""
    lines = {}
    for line in out.splitlines():
        m = re.search(r"Topic:\s*(\S+)\s+Partition:\s*(\d+)", line)
        if m:
            lines[(m.group(1), int(m.group(2)))] = line
    return lines


def elr_after_sigkill(bs):
    """Issue 15: ELR and the partition filters after SIGKILLing broker 3."""
    tag = uuid.uuid4().hex[:6]
    elr, atmin, solo = f"elr-{tag}", f"atmin-{tag}", f"solo-{tag}"
    for args in (["--topic", elr, "--partitions", "3", "--replication-factor", "3",
                  "--config", "min.insync.replicas=3"],
                 ["--topic", atmin, "--partitions", "1", "--replication-factor", "3",
                  "--config", "min.insync.replicas=2"],
                 ["--topic", solo, "--replica-assignment", "3"]):
        code, out = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs,
                         "--create", *args)
        check(code == 0, f"create {args[1]}", out)
    # Every ISR full before the kill, so what follows is the kill's doing.
    pattern = f"(elr|atmin|solo)-{tag}"

    def settled(pred):
        def probe():
            code, out = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs,
                             "--describe", "--topic", pattern)
            lines = partition_lines(out)
            return code == 0 and len(lines) == 5 and all(pred(k, l) for k, l in lines.items()), out
        return probe
    full = settled(lambda k, l: re.search(r"Isr: ([\d,]+)", l) and
                   len(re.search(r"Isr: ([\d,]+)", l).group(1).split(",")) ==
                   (1 if k[0] == solo else 3))
    until("ISRs full before the kill", full)
    port = int(bs.split(",")[2].rsplit(":", 1)[1])
    os.kill(pid_listening(port), 9)
    print(f"ok   SIGKILLed broker 3 (port {port})", flush=True)
    bs = ",".join(bs.split(",")[:2])

    def after(k, l):
        if k[0] == solo:
            return "Leader: none" in l and re.search(r"Elr: 3\b", l)
        isr = re.search(r"Isr: ([\d,]*)", l).group(1).split(",")
        return "3" not in isr and (k[0] != elr or re.search(r"\tElr: 3\b", l))
    out = until("broker 3 fenced: out of every ISR, Elr: 3 below min ISR", settled(after), 90)
    print(out, flush=True)

    def listed(flag):
        code, out = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bs,
                         "--describe", "--topic", pattern, flag)
        check(code == 0, f"--describe {flag} exits 0", out)
        return sorted(partition_lines(out))
    elr_parts = [(elr, p) for p in range(3)]
    want = {
        "--under-replicated-partitions": sorted(elr_parts + [(atmin, 0), (solo, 0)]),
        "--under-min-isr-partitions": sorted(elr_parts + [(solo, 0)]),
        "--at-min-isr-partitions": [(atmin, 0)],
        "--unavailable-partitions": [(solo, 0)],
    }
    for flag, expected in want.items():
        got = listed(flag)
        check(got == expected, f"{flag} lists {expected}", str(got))


if __name__ == "__main__":
    main()
