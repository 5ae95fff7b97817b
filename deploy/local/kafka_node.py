"""The local Apache Kafka broker: one KRaft node (broker + controller) on 127.0.0.1, no Docker.

The jars come from Maven Central through `kafka/pom.xml`; the broker runs as
`java -cp 'libs/*' kafka.Kafka server.properties`, the way the distribution's
bin/kafka-server-start.sh does, with its JVM flags and a smaller heap.
The same code runs each node of the three-node cluster (deploy/local/kafka_cluster.py): a `Member`
says which node it is and which quorum it votes in; `extra` overlays any other property.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import string
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from deploy.local import procs
from deploy.local.ports import port_in_use
from services.runtime import settings
from services.runtime.errors import UserFacingError
from services.runtime.kafka_client import KafkaClient

HERE = Path(__file__).resolve().parent / "kafka"
MARKER = "kafka.Kafka"
# kafka-server-start.sh's own default (KAFKA_HEAP_OPTS). A smaller heap (it was 256-512 MB) ran G1's
# young collections every second or two under the end-to-end bench's 100 msg/s, each a 10-18 ms pause of
# every request in flight: the tail of that bench (benchmarks/bench_e2e.py reports the pauses).
HEAP = ["-Xms1g", "-Xmx1g"]
GC_LOG = "kafkaServer-gc.log"  # as kafka-server-start.sh's `-loggc`, in the broker's log dir
JVM_FLAGS = [  # from bin/kafka-run-class.sh (KAFKA_JVM_PERFORMANCE_OPTS)
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
]


@dataclass(frozen=True)
class KafkaPaths:
    root: Path

    @property
    def libs(self) -> Path:
        return self.root / "libs"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def config(self) -> Path:
        return self.root / "server.properties"

    @property
    def pid_file(self) -> Path:
        return self.root / "kafka.pid"

    @property
    def cluster_id_file(self) -> Path:
        return self.root / "cluster_id"

    @property
    def console_log(self) -> Path:
        return self.logs / "console.log"

    @property
    def gc_log(self) -> Path:
        return self.logs / GC_LOG


@dataclass(frozen=True)
class Member:
    """A node's place in its cluster. The default is the local stack's single node."""

    node_id: int = 1
    voters: str | None = None  # controller.quorum.voters; None: this node alone, on its controller port
    replication: int = 1  # of the internal topics, and default.replication.factor
    min_isr: int = 1  # min.insync.replicas, and the transaction log's

    def quorum(self, controller_port: int) -> str:
        return self.voters or f"{self.node_id}@127.0.0.1:{controller_port}"


SINGLE = Member()


def paths(state: Path | None = None) -> KafkaPaths:
    return KafkaPaths((state or settings.state_dir()) / "kafka")


def bootstrap() -> str:
    return f"127.0.0.1:{settings.LOCAL_KAFKA_PORT}"


def running_pid(p: KafkaPaths) -> int | None:
    return procs.running_pid(p.pid_file, str(p.config))


def build_classpath(p: KafkaPaths) -> bool:
    """Resolve the broker's jars into libs/, only when kafka/pom.xml changed. Returns True if it ran Maven."""
    pom = HERE / "pom.xml"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    stamp = p.libs / ".pom.sha256"
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return False
    if not shutil.which("mvn") or not shutil.which("java"):
        from deploy.local import apt

        apt.install("maven", "default-jre-headless", why="the local Kafka needs `java` (17+) and `mvn`")
    mvn = shutil.which("mvn") or "mvn"
    staging = p.root / "libs.new"
    shutil.rmtree(staging, ignore_errors=True)
    p.root.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        out = (result.stdout + result.stderr).strip().splitlines()[-20:]
        raise UserFacingError("mvn could not resolve the Kafka jars from kafka/pom.xml:\n" + "\n".join(out))
    (staging / ".pom.sha256").write_text(digest + "\n")
    shutil.rmtree(p.libs, ignore_errors=True)
    staging.rename(p.libs)
    return True


def write_config(
    p: KafkaPaths,
    port: int | None = None,
    controller_port: int | None = None,
    member: Member = SINGLE,
    extra: Mapping[str, str] | None = None,
) -> None:
    """Render server.properties from the template, then append `extra` (any properties: listeners,
    security...). Java's Properties keeps the last occurrence of a key, so `extra` wins."""
    template = string.Template((HERE / "server.properties").read_text())
    controller_port = controller_port or settings.LOCAL_KAFKA_CONTROLLER_PORT
    text = template.substitute(
        port=port or settings.LOCAL_KAFKA_PORT,
        controller_port=controller_port,
        log_dirs=p.data,
        node_id=member.node_id,
        voters=member.quorum(controller_port),
        replication=member.replication,
        min_isr=member.min_isr,
    )
    if extra:
        lines = ["", "# Overlay (write_config's `extra`): the last occurrence of a key wins."]
        lines += [f"{_escape(key, key=True)}={_escape(value)}" for key, value in extra.items()]
        text = text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"
    p.config.write_text(text)


def _escape(text: str, key: bool = False) -> str:
    """`text` as java.util.Properties.load reads it back: backslash escapes, ISO-8859-1 (\\uXXXX beyond
    ASCII), and in a key its separators and comment marks escaped too."""
    if key and not text:
        raise ValueError("an empty Kafka property name")
    out = []
    for i, ch in enumerate(text):
        code = ord(ch)
        if ch in "\\\t\n\r\f" or (key and ch in " =:#!") or (ch == " " and i == 0):
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}.get(ch, "\\" + ch))
        elif code < 0x20 or code > 0x7E:
            units = ch.encode("utf-16-be")
            out += [f"\\u{int.from_bytes(units[j : j + 2], 'big'):04x}" for j in range(0, len(units), 2)]
        else:
            out.append(ch)
    return "".join(out)


def cluster_id(p: KafkaPaths) -> str:
    """A stable cluster id (22 chars of base64url of a uuid4), kept beside the data. Never one starting with
    "-": the storage tool's argument parser would read it as an option (Kafka's own Uuid.randomUuid skips
    those too)."""
    if p.cluster_id_file.is_file():
        return p.cluster_id_file.read_text().strip()
    value = new_cluster_id()
    p.cluster_id_file.write_text(value + "\n")
    return value


def new_cluster_id() -> str:
    while True:
        value = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not value.startswith("-"):
            return value


def _java(p: KafkaPaths, main: str, *args: str, heap: list[str]) -> list[str]:
    return [
        shutil.which("java") or "java",
        *heap,
        *JVM_FLAGS,
        f"-Dlog4j2.configurationFile=file:{HERE / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={p.logs}",
        "-cp",
        f"{p.libs}/*",
        main,
        *args,
    ]


def format_storage(p: KafkaPaths, extra_args: Sequence[str] = ()) -> None:
    """Format the KRaft log dir once (static quorum voters, so no --standalone). `extra_args`: e.g.
    `--add-scram` users, which KRaft takes only here, before the first start."""
    if (p.data / "meta.properties").is_file():
        return
    argv = _java(p, "kafka.tools.StorageTool", "format", "--cluster-id", cluster_id(p), "--config", str(p.config),
                 "--ignore-formatted", *extra_args, heap=["-Xmx256m"])  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise UserFacingError(
            f"kafka StorageTool format failed: {(result.stdout + result.stderr).strip()[-2000:]}"
        )


def start(
    p: KafkaPaths,
    timeout: float = 90.0,
    port: int | None = None,
    controller_port: int | None = None,
    member: Member = SINGLE,
    extra: Mapping[str, str] | None = None,
    format_args: Sequence[str] = (),
    client: KafkaClient | None = None,
) -> int:
    """Start the broker in the background and wait until it answers metadata. Returns its pid.

    `port`/`controller_port` default to the local stack's; other values run another, independent
    node (see `start_isolated`). `client`: how to ask it for metadata (a secured node's admin)."""
    port = port or settings.LOCAL_KAFKA_PORT
    proc = launch(p, port, controller_port, member, extra, format_args)
    wait_ready(p, timeout, proc, address=f"127.0.0.1:{port}", client=client)
    return proc.pid


def launch(
    p: KafkaPaths,
    port: int | None = None,
    controller_port: int | None = None,
    member: Member = SINGLE,
    extra: Mapping[str, str] | None = None,
    format_args: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Write the config, format the storage once, spawn the broker and write its pid file; no wait.

    A node of a multi-node quorum answers only once a majority of the voters runs, so a cluster
    launches every node first and waits after (deploy/local/kafka_cluster.py)."""
    port = port or settings.LOCAL_KAFKA_PORT
    controller_port = controller_port or settings.LOCAL_KAFKA_CONTROLLER_PORT
    for port_ in (port, controller_port):
        if port_in_use(port_):
            raise UserFacingError(
                f"127.0.0.1:{port_} is in use by a process the local stack did not start; stop it, or set "
                "KAFKA_BOOTSTRAP_SERVERS to use an existing broker"
            )
    p.logs.mkdir(parents=True, exist_ok=True)
    p.data.mkdir(parents=True, exist_ok=True)
    write_config(p, port, controller_port, member, extra)
    format_storage(p, format_args)
    gc_log = f"-Xlog:gc:file={p.gc_log}:time,uptime:filecount=5,filesize=10M"  # one line per pause
    proc = procs.spawn(_java(p, MARKER, str(p.config), heap=[*HEAP, gc_log]), p.console_log, cwd=p.root)
    p.pid_file.write_text(f"{proc.pid}\n")
    return proc


def link_jars(p: KafkaPaths, jars: Path | None = None) -> None:
    """Make `p` use the jars already resolved in `jars` (the local stack's by default): a symlink,
    no Maven run."""
    shared = jars or paths().libs
    if not shared.is_dir():
        raise UserFacingError(f"no Kafka jars in {shared}: run `incident-memory up` first")
    p.root.mkdir(parents=True, exist_ok=True)
    if not p.libs.exists():
        p.libs.symlink_to(shared, target_is_directory=True)


def run_tool(
    main_class: str, *args: str, stdin: str | None = None, p: KafkaPaths | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools on the cached classpath, as its bin/*.sh script does
    (kafka-run-class.sh: the same JVM flags, -Xmx256m), and wait for it. E.g. kafka-console-producer.sh
    is `run_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", b, "--topic", t,
    stdin=lines)` (needs kafka-tools in kafka/pom.xml). The tool's log4j output goes to
    <state>/kafka/tools/logs/server.log, not the broker's log; what it prints is in stdout/stderr."""
    p = p or paths()
    tools = KafkaPaths(p.root / "tools")
    link_jars(tools, p.libs)
    argv = _java(tools, main_class, *args, heap=["-Xmx256m"])
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)


def start_isolated(root: Path, port: int, controller_port: int, timeout: float = 90.0) -> int:
    """Start (or start again, on the same data) a broker of its own under `root`, on its own ports.

    For tests that must hurt a broker (kill it, restart it) without touching the shared one: it
    reuses the local stack's jars (a symlink, no Maven run) and the same server.properties template.
    Stop it with `stop(KafkaPaths(root))`; its state is whatever `root` holds. Three of them in one
    quorum: deploy/local/kafka_cluster.isolated."""
    p = KafkaPaths(root)
    link_jars(p)
    return start(p, timeout, port=port, controller_port=controller_port)


def wait_ready(
    p: KafkaPaths,
    timeout: float,
    proc: subprocess.Popen[bytes] | None = None,
    address: str | None = None,
    client: KafkaClient | None = None,
) -> None:
    from services.runtime.checks import check_kafka

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise UserFacingError(
                f"the local Kafka broker exited with code {proc.returncode}; last lines of its log:\n"
                + procs.tail(p.logs / "server.log")
                + "\n"
                + procs.tail(p.console_log, 10)
            )
        try:
            check_kafka(client or address or bootstrap(), timeout=2.0)
            return
        except UserFacingError as exc:
            last = exc
            time.sleep(0.2)
    raise UserFacingError(
        f"the local Kafka broker did not answer within {timeout:.0f}s ({last}); last lines of its log:\n"
        + procs.tail(p.logs / "server.log")
    )


def stop(p: KafkaPaths) -> bool:
    pid = procs.read_pid(p.pid_file)
    stopped = pid is not None and procs.stop(pid, str(p.config), timeout=30.0)
    p.pid_file.unlink(missing_ok=True)
    return stopped


_PAUSE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4})\].* Pause .* (\d+\.\d+)ms$")


def gc_pauses(log_text: str, since: float, until: float) -> list[float]:
    """The broker's GC pauses (ms) that ended between `since` and `until` (unix seconds), from its GC
    log (`-Xlog:gc` with the `time` decorator: one line per pause, stamped when it ended)."""
    out = []
    for line in log_text.splitlines():
        match = _PAUSE.match(line)
        if match:
            ended = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
            if since <= ended <= until:
                out.append(float(match.group(2)))
    return out
