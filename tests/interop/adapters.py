"""One adapter per client of the interoperability suite.

An adapter runs its client as a subprocess (so a hung or crashing client costs one cell, not
the run) and turns the scenario steps into that client's own commands:

* ``create``: create the topic and confirm its partitions through the client's metadata view;
* ``produce``: send the records file;
* ``consume``: read every partition back from the beginning, without a consumer group, into
  the consumed file;
* ``consume_group``: read every partition back through a consumer group (subscribe, group id
  ``ctx.group``, earliest offset), commit, and fail unless the group's committed offsets then
  equal the log end offsets; into the group-consumed file;
* ``offsets``: answer ListOffsets-by-timestamp queries.

Each adapter also says how its records are built (explicit partition/timestamp or the client's
own) and how they are judged (scenario.Expectations).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import scenario as sc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KAFKA_SH = os.path.join(REPO, "perf", "kafka", "kafka.sh")
STEP_TIMEOUT_S = 180
CLI_PARALLEL_JVMS = 3


class StepError(Exception):
    """A step failed; the message is what the table's detail section shows."""


class SoftStepError(StepError):
    """A step failed but left what later steps need (e.g. the topic was created but describing
    it failed), so they still run and show what else works."""


def run(
    cmd: list[str], stdin: str | None = None, timeout_s: float = STEP_TIMEOUT_S, fail_on: str | None = None
) -> str:
    """Run a client command; its stdout on success, StepError with its output otherwise (also
    when its stderr contains `fail_on`: some tools log failed sends yet exit 0)."""
    try:
        res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise StepError(f"timed out after {timeout_s}s: {' '.join(cmd[:6])} ...\n{e.stderr or ''}") from e
    except FileNotFoundError as e:
        raise StepError(f"cannot run {cmd[0]}: {e}") from e
    if res.returncode != 0 or (fail_on is not None and fail_on in res.stderr):
        raise StepError(f"exit {res.returncode}: {' '.join(cmd[:8])} ...\n{res.stderr}{res.stdout}"[-4000:])
    return res.stdout


class Ctx:
    """Per-client run state: where the broker is, the topic, the work files."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, workdir: str):
        self.bootstrap, self.topic, self.partitions, self.workdir = bootstrap, topic, partitions, workdir
        self.records_path = os.path.join(workdir, "records.tsv")
        self.consumed_path = os.path.join(workdir, "consumed.tsv")
        self.queries_path = os.path.join(workdir, "queries.tsv")
        self.answers_path = os.path.join(workdir, "answers.tsv")
        self.group_consumed_path = os.path.join(workdir, "consumed-group.tsv")
        self.group = f"{topic}-group"
        self.produce_window_ms: tuple[int, int] | None = None


class Adapter:
    name = "?"
    explicit_partition = True
    explicit_timestamp = True
    # Producer compression codec (none|gzip|snappy|lz4|zstd), set by the driver.
    codec = "none"

    def missing(self) -> str | None:
        """Why the client cannot run here (not installed), or None."""
        return None

    def expectations(self, ctx: Ctx) -> sc.Expectations:
        return sc.Expectations(partitions=ctx.partitions, produce_window_ms=ctx.produce_window_ms)

    def create(self, ctx: Ctx) -> str: ...
    def produce(self, ctx: Ctx) -> str: ...
    def consume(self, ctx: Ctx) -> str: ...
    def consume_group(self, ctx: Ctx) -> str: ...
    def offsets(self, ctx: Ctx) -> str: ...


class ProgramAdapter(Adapter):
    """A client program speaking scenario.parse_client_args's command line (Python, Java)."""

    def __init__(self, name: str, cmd: list[str]):
        self.name, self.cmd = name, cmd

    def _run(self, step: str, ctx: Ctx, **files: str) -> str:
        args = [*self.cmd, step, "--bootstrap", ctx.bootstrap, "--topic", ctx.topic,
                "--partitions", str(ctx.partitions)]
        for k, v in files.items():
            args += [f"--{k}", v]
        return run(args)

    def create(self, ctx):
        return self._run("create", ctx)

    def produce(self, ctx):
        return self._run("produce", ctx, input=ctx.records_path, compression=self.codec)

    def consume(self, ctx):
        return self._run("consume", ctx, output=ctx.consumed_path)

    def consume_group(self, ctx):
        return self._run("consume-group", ctx, output=ctx.group_consumed_path, group=ctx.group)

    def offsets(self, ctx):
        return self._run("offsets", ctx, input=ctx.queries_path, output=ctx.answers_path)


class PythonAdapter(ProgramAdapter):
    def __init__(self, name: str, script: str, module: str):
        super().__init__(name, [sys.executable, os.path.join(HERE, script)])
        self.module = module

    def missing(self):
        res = subprocess.run([sys.executable, "-c", f"import {self.module}"], capture_output=True, text=True)
        return None if res.returncode == 0 else f"python module {self.module} not importable (run install.sh)"


class JavaAdapter(ProgramAdapter):
    JAVA_DIR = os.path.join(HERE, "java", "target")

    def __init__(self):
        cp = f"{self.JAVA_DIR}/classes:{self.JAVA_DIR}/lib/*"
        super().__init__("java-clients", ["java", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                                          "-cp", cp, "dev.shardlog.interop.InteropClient"])

    def missing(self):
        if shutil.which("java") is None:
            return "java not found"
        main = os.path.join(self.JAVA_DIR, "classes", "dev", "shardlog", "interop", "InteropClient.class")
        if os.path.exists(main):
            return None
        return "java program not built (run install.sh, then run.sh builds it)"


def kafka_tool(main_class: str, *args: str, stdin: str | None = None, fail_on: str | None = None) -> str:
    return run([KAFKA_SH, "tool", main_class, *args], stdin=stdin, fail_on=fail_on)


TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def check_group_committed(ctx: Ctx) -> str:
    """For clients without a committed() API of their own (kcat, the CLI tools): Kafka's
    ConsumerGroupCommand --describe must show, on every partition, CURRENT-OFFSET equal to
    LOG-END-OFFSET, and the log end offsets must add up to the records produced."""
    out = kafka_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", ctx.bootstrap, "--describe",
                     "--group", ctx.group)
    ends: dict[int, int] = {}
    committed: dict[int, int | None] = {}
    for line in out.splitlines():
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        cols = line.split()
        if len(cols) >= 6 and cols[0] == ctx.group and cols[1] == ctx.topic:
            p = int(cols[2])
            committed[p] = None if cols[3] == "-" else int(cols[3])
            ends[p] = int(cols[4])
    problems = sc.check_committed(ends, committed)
    produced = len(sc.read_records(ctx.records_path))
    if len(ends) != ctx.partitions:
        problems.append(f"--describe lists partitions {sorted(ends)}")
    if sum(ends.values()) != produced:
        problems.append(f"log end offsets {ends} add up to {sum(ends.values())}, not {produced}")
    if problems:
        raise StepError("ConsumerGroupCommand --describe: " + "; ".join(problems) + "\n" + out)
    return f"ConsumerGroupCommand --describe: committed = log end offsets {dict(sorted(ends.items()))}"


def create_with_topic_command(ctx: Ctx, describe: bool = True) -> str:
    kafka_tool(TOPIC_COMMAND, "--bootstrap-server", ctx.bootstrap, "--create", "--topic", ctx.topic,
               "--partitions", str(ctx.partitions), "--replication-factor", "1")
    if not describe:
        return "created"
    try:
        desc = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", ctx.bootstrap, "--describe",
                          "--topic", ctx.topic)
    except StepError as e:
        raise SoftStepError(f"created, but --describe failed: {e}") from e
    if f"PartitionCount: {ctx.partitions}" not in desc:
        raise SoftStepError(f"describe does not show {ctx.partitions} partitions:\n{desc}")
    leaders = [line for line in desc.splitlines() if "Leader: " in line and "Leader: none" not in line]
    if len(leaders) != ctx.partitions:
        raise SoftStepError(f"describe shows {len(leaders)} partitions with a leader:\n{desc}")
    return desc


class KcatAdapter(Adapter):
    """Debian's kcat (librdkafka). It has no admin commands, so the topic is created with
    Kafka's TopicCommand and kcat -L confirms it. kcat sets headers per invocation, not per
    record, and cannot set timestamps: it produces each partition in one call (-p N) with
    headers src=kcat, part=N, and the producer stamps CreateTime."""

    name = "kcat"
    explicit_timestamp = False

    def missing(self):
        return None if shutil.which("kcat") else "kcat not installed (apt-get install kcat)"

    def expectations(self, ctx):
        headers = {p: [("src", b"kcat"), ("part", str(p).encode())] for p in range(ctx.partitions)}
        return sc.Expectations(ctx.partitions, headers_override=headers,
                               produce_window_ms=ctx.produce_window_ms)

    def create(self, ctx):
        # TopicCommand --describe is the kafka-cli row's business: kcat's row checks kcat -L.
        create_with_topic_command(ctx, describe=False)
        md = json.loads(run(["kcat", "-b", ctx.bootstrap, "-L", "-J", "-t", ctx.topic, "-m", "30"]))
        topics = [t for t in md.get("topics", []) if t.get("topic") == ctx.topic]
        parts = topics[0].get("partitions", []) if topics else []
        if len(parts) != ctx.partitions or any(p.get("leader", -1) < 0 for p in parts):
            raise StepError(f"kcat -L shows {parts}")
        return f"TopicCommand created; kcat -L: {len(parts)} partitions"

    def produce(self, ctx):
        per_part: dict[int, list[str]] = defaultdict(list)
        for r in sc.read_records(ctx.records_path):
            per_part[r.partition].append(f"{r.key.decode()}\t{r.value.decode()}\n")
        for p, lines in sorted(per_part.items()):
            run(["kcat", "-b", ctx.bootstrap, "-P", "-t", ctx.topic, "-p", str(p), "-K", "\t",
                 "-X", f"compression.codec={self.codec}", "-H", "src=kcat", "-H", f"part={p}"],
                stdin="".join(lines))
        return "6 kcat -P calls"

    def consume(self, ctx):
        out = run(["kcat", "-b", ctx.bootstrap, "-C", "-t", ctx.topic, "-o", "beginning", "-e", "-J", "-q"])
        return self._write_consumed(ctx.consumed_path, out)

    def consume_group(self, ctx):
        # Balanced consumer (-G): librdkafka's subscribe with auto commit on; kcat commits the
        # stored offsets when it closes at the end (-e). ConsumerGroupCommand checks the result.
        out = run(["kcat", "-b", ctx.bootstrap, "-G", ctx.group, "-X", "auto.offset.reset=earliest",
                   "-o", "beginning", "-e", "-J", "-q", ctx.topic])
        summary = self._write_consumed(ctx.group_consumed_path, out)
        return f"{summary}; {check_group_committed(ctx)}"

    def _write_consumed(self, path: str, out: str) -> str:
        consumed = []
        for line in out.splitlines():
            m = json.loads(line)
            flat = m.get("headers") or []
            headers = [(flat[i], flat[i + 1].encode()) for i in range(0, len(flat), 2)]
            key = None if m.get("key") is None else m["key"].encode()
            value = None if m.get("payload") is None else m["payload"].encode()
            tstype = {"create": "create", "logappend": "append"}.get(m.get("tstype"), "none")
            consumed.append(sc.Consumed(m["partition"], m["offset"], m["ts"], tstype, key, value, headers))
        # kcat interleaves partitions; order within a partition is what matters.
        consumed.sort(key=lambda c: (c.partition, c.offset))
        sc.write_consumed(path, consumed)
        return f"{len(consumed)} records"

    def offsets(self, ctx):
        by_ts: dict[int, list[int]] = defaultdict(list)
        for p, ts in sc.read_queries(ctx.queries_path):
            by_ts[ts].append(p)
        answers = []
        for ts, parts in by_ts.items():
            args = ["kcat", "-b", ctx.bootstrap, "-Q"]
            for p in parts:
                args += ["-t", f"{ctx.topic}:{p}:{ts}"]
            for line in run(args).splitlines():
                # "<topic> [<p>] offset <n>"
                fields = line.split()
                if len(fields) == 4 and fields[0] == ctx.topic and fields[2] == "offset":
                    answers.append((int(fields[1].strip("[]")), ts, int(fields[3])))
        sc.write_answers(ctx.answers_path, answers)
        return f"{len(by_ts)} kcat -Q calls"


class KafkaCliAdapter(Adapter):
    """Kafka's own CLI tools from the pinned version, by main class (perf/kafka/kafka.sh tool).
    ConsoleProducer parses key and headers from each line but sets neither partition nor
    timestamp: records go where the Java default partitioner (murmur2 of the key) puts them
    and carry the producer's CreateTime."""

    name = "kafka-cli"
    explicit_partition = False
    explicit_timestamp = False

    def missing(self):
        if shutil.which("java") is None:
            return "java not found"
        res = subprocess.run([KAFKA_SH, "fetch"], capture_output=True, text=True)
        return None if res.returncode == 0 else f"kafka.sh fetch failed: {res.stderr[-500:]}"

    def expectations(self, ctx):
        return sc.Expectations(ctx.partitions, partitioning="murmur2",
                               produce_window_ms=ctx.produce_window_ms)

    def create(self, ctx):
        problems = []
        try:
            create_with_topic_command(ctx)
        except SoftStepError as e:
            problems.append(str(e))
        listing = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", ctx.bootstrap, "--list")
        if ctx.topic not in listing.split():
            problems.append(f"--list does not show {ctx.topic}:\n{listing}")
        if problems:
            raise SoftStepError("\n".join(problems))
        return "create, describe, list"

    def produce(self, ctx):
        lines = []
        for r in sc.read_records(ctx.records_path):
            headers = ",".join(f"{k}:{v.decode()}" for k, v in r.headers)
            lines.append(f"{headers}\t{r.key.decode()}\t{r.value.decode()}\n")
        out = kafka_tool(CONSOLE_PRODUCER, "--bootstrap-server", ctx.bootstrap, "--topic", ctx.topic,
                         "--property", "parse.key=true", "--property", "parse.headers=true",
                         "--producer-property", "acks=all", "--compression-codec", self.codec,
                         stdin="".join(lines),
                         fail_on="Error when sending message")
        return out[-200:]

    def end_offsets(self, ctx) -> dict[int, int]:
        out = kafka_tool(GET_OFFSET_SHELL, "--bootstrap-server", ctx.bootstrap, "--topic", ctx.topic,
                         "--time", "-1")
        ends = {}
        for line in out.splitlines():
            topic, part, off = line.rsplit(":", 2)
            if topic == ctx.topic:
                ends[int(part)] = int(off)
        return ends

    def consume(self, ctx):
        ends = self.end_offsets(ctx)

        def one_partition(p: int) -> list[sc.Consumed]:
            out = kafka_tool(
                CONSOLE_CONSUMER, "--bootstrap-server", ctx.bootstrap, "--topic", ctx.topic,
                "--partition", str(p), "--offset", "earliest", "--max-messages", str(ends[p]),
                "--timeout-ms", "30000", "--property", "print.key=true", "--property", "print.headers=true",
                "--property", "print.timestamp=true", "--property", "print.offset=true",
                "--property", "print.partition=true",
            )
            return [parse_console_line(line) for line in out.splitlines() if line]

        # One JVM per partition (--partition takes one); a few at a time hide JVM start-up.
        parts = [p for p in range(ctx.partitions) if ends.get(p, 0) > 0]
        with ThreadPoolExecutor(max_workers=CLI_PARALLEL_JVMS) as pool:
            consumed = [c for batch in pool.map(one_partition, parts) for c in batch]
        sc.write_consumed(ctx.consumed_path, consumed)
        return f"end offsets {ends}"

    def consume_group(self, ctx):
        # One JVM subscribed to the whole topic; the console consumer auto-commits, and commits
        # its position synchronously when it closes after --max-messages.
        total = len(sc.read_records(ctx.records_path))
        out = kafka_tool(
            CONSOLE_CONSUMER, "--bootstrap-server", ctx.bootstrap, "--topic", ctx.topic,
            "--group", ctx.group, "--from-beginning", "--max-messages", str(total),
            "--timeout-ms", "60000", "--property", "print.key=true", "--property", "print.headers=true",
            "--property", "print.timestamp=true", "--property", "print.offset=true",
            "--property", "print.partition=true",
        )
        consumed = [parse_console_line(line) for line in out.splitlines() if line]
        consumed.sort(key=lambda c: (c.partition, c.offset))
        sc.write_consumed(ctx.group_consumed_path, consumed)
        return f"{len(consumed)} records; {check_group_committed(ctx)}"

    def offsets(self, ctx):
        by_ts: dict[int, list[int]] = defaultdict(list)
        for p, ts in sc.read_queries(ctx.queries_path):
            by_ts[ts].append(p)

        def one_timestamp(item: tuple[int, list[int]]) -> list[tuple[int, int, int]]:
            ts, parts = item
            out = kafka_tool(GET_OFFSET_SHELL, "--bootstrap-server", ctx.bootstrap, "--topic", ctx.topic,
                             "--partitions", ",".join(map(str, parts)), "--time", str(ts))
            found = {}
            for line in out.splitlines():
                topic, part, off = line.rsplit(":", 2)
                if topic == ctx.topic and off:
                    found[int(part)] = int(off)
            # GetOffsetShell prints nothing for a partition without such an offset.
            return [(p, ts, found.get(p, -1)) for p in parts]

        with ThreadPoolExecutor(max_workers=CLI_PARALLEL_JVMS) as pool:
            answers = [a for batch in pool.map(one_timestamp, by_ts.items()) for a in batch]
        sc.write_answers(ctx.answers_path, answers)
        return f"{len(by_ts)} GetOffsetShell calls"


def parse_console_line(line: str) -> sc.Consumed:
    """ConsoleConsumer's DefaultMessageFormatter with print.{timestamp,partition,offset,headers,
    key}: ``CreateTime:<ts>\\tPartition:<p>\\tOffset:<o>\\t<h:v,h:v|NO_HEADERS>\\t<key>\\t<value>``."""
    fields = line.split("\t")
    if len(fields) != 6:
        raise StepError(f"unexpected ConsoleConsumer line: {line!r}")
    ts_field, part, off, headers, key, value = fields
    tstype_name, ts = ts_field.split(":", 1)
    tstype = {"CreateTime": "create", "LogAppendTime": "append"}.get(tstype_name, "none")
    hdrs = []
    if headers != "NO_HEADERS":
        for item in headers.split(","):
            k, v = item.split(":", 1)
            hdrs.append((k, v.encode()))
    return sc.Consumed(int(part.split(":")[1]), int(off.split(":")[1]), int(ts), tstype,
                       None if key == "null" else key.encode(),
                       None if value == "null" else value.encode(), hdrs)


class KafkajsAdapter(ProgramAdapter):
    """kafkajs (js/kafkajs_client.js). Its consumer always joins a group: ``consume`` uses a
    fresh group and never commits, ``consume_group`` the suite's group with commits. It does
    not expose the timestamp type; it compresses with none or gzip only."""

    JS_DIR = os.path.join(HERE, "js")

    def __init__(self):
        super().__init__("kafkajs", ["node", os.path.join(self.JS_DIR, "kafkajs_client.js")])

    def missing(self):
        if shutil.which("node") is None:
            return "node not found"
        if not os.path.isdir(os.path.join(self.JS_DIR, "node_modules", "kafkajs")):
            return "kafkajs not installed (run install.sh: npm ci in tests/interop/js)"
        return None

    def expectations(self, ctx):
        return sc.Expectations(ctx.partitions, produce_window_ms=ctx.produce_window_ms,
                               timestamp_type_known=False)


# Where tests/interop/go/build.sh puts the Go client programs (env.sh's cache directory).
GO_BIN_DIR = os.path.join(os.environ.get("KAFKA_CACHE_DIR") or os.path.join(REPO, ".interop-cache"), "go-bin")


class GoAdapter(ProgramAdapter):
    """A Go client program of go/ (franz-go, sarama), built by install.sh and run.sh through
    go/build.sh; same command line as the other programs."""

    def __init__(self, name: str, timestamp_type_known: bool = True):
        super().__init__(name, [os.path.join(GO_BIN_DIR, name)])
        self.timestamp_type_known = timestamp_type_known

    def missing(self):
        if os.access(self.cmd[0], os.X_OK):
            return None
        return f"{self.cmd[0]} not built (run install.sh: go/build.sh)"

    def expectations(self, ctx):
        return sc.Expectations(ctx.partitions, produce_window_ms=ctx.produce_window_ms,
                               timestamp_type_known=self.timestamp_type_known)


def all_adapters() -> dict[str, Adapter]:
    adapters = [
        KcatAdapter(),
        PythonAdapter("confluent-kafka", "py_confluent.py", "confluent_kafka"),
        PythonAdapter("kafka-python", "py_kafkapython.py", "kafka"),
        JavaAdapter(),
        KafkaCliAdapter(),
        KafkajsAdapter(),
        GoAdapter("franz-go"),
        # sarama's ConsumerMessage has no timestamp type.
        GoAdapter("sarama", timestamp_type_known=False),
        PythonAdapter("aiokafka", "py_aiokafka.py", "aiokafka"),
    ]
    return {a.name: a for a in adapters}


DEFAULT_CLIENTS = ["kcat", "confluent-kafka", "kafka-python", "java-clients", "kafka-cli", "kafkajs",
                   "franz-go", "sarama", "aiokafka"]

# `--compression mixed`: every codec once, including both snappy framings (librdkafka writes
# raw snappy, the Java client xerial-framed snappy), without extra Python codec packages
# (kafka-python needs python-snappy / lz4 / zstandard for the others; gzip is built in).
MIXED_CODECS = {
    "kcat": "snappy",
    "confluent-kafka": "zstd",
    "kafka-python": "gzip",
    "java-clients": "snappy",
    "kafka-cli": "lz4",
    "kafkajs": "gzip",
    "franz-go": "lz4",
    "sarama": "zstd",
    "aiokafka": "gzip",  # its snappy, lz4 and zstd need cramjam, which install.sh does not install
}


def now_ms() -> int:
    return int(time.time() * 1000)
