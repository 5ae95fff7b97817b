"""The local Apache Kafka broker: one KRaft node (broker + controller) on 127.0.0.1, no Docker.

The jars come from Maven Central through `kafka/pom.xml`; the broker runs as
`java -cp 'libs/*' kafka.Kafka server.properties`, the way the distribution's
bin/kafka-server-start.sh does, with its JVM flags and a smaller heap.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import socket
import string
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from deploy.local import procs
from services.runtime import settings
from services.runtime.errors import UserFacingError

HERE = Path(__file__).resolve().parent / "kafka"
MARKER = "kafka.Kafka"
HEAP = ["-Xms256m", "-Xmx512m"]
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


def write_config(p: KafkaPaths, port: int | None = None, controller_port: int | None = None) -> None:
    template = string.Template((HERE / "server.properties").read_text())
    text = template.substitute(
        port=port or settings.LOCAL_KAFKA_PORT,
        controller_port=controller_port or settings.LOCAL_KAFKA_CONTROLLER_PORT,
        log_dirs=p.data,
    )
    p.config.write_text(text)


def cluster_id(p: KafkaPaths) -> str:
    """A stable cluster id (22 chars of base64url of a uuid4), kept beside the data."""
    if p.cluster_id_file.is_file():
        return p.cluster_id_file.read_text().strip()
    value = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    p.cluster_id_file.write_text(value + "\n")
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


def format_storage(p: KafkaPaths) -> None:
    """Format the KRaft log dir once (static quorum voters, so no --standalone)."""
    if (p.data / "meta.properties").is_file():
        return
    argv = _java(p, "kafka.tools.StorageTool", "format", "--cluster-id", cluster_id(p), "--config", str(p.config),
                 "--ignore-formatted", heap=["-Xmx256m"])  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise UserFacingError(
            f"kafka StorageTool format failed: {(result.stdout + result.stderr).strip()[-2000:]}"
        )


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start(
    p: KafkaPaths, timeout: float = 90.0, port: int | None = None, controller_port: int | None = None
) -> int:
    """Start the broker in the background and wait until it answers metadata. Returns its pid.

    `port`/`controller_port` default to the local stack's; other values run another, independent
    node (see `start_isolated`)."""
    port = port or settings.LOCAL_KAFKA_PORT
    controller_port = controller_port or settings.LOCAL_KAFKA_CONTROLLER_PORT
    for port_ in (port, controller_port):
        if _port_in_use(port_):
            raise UserFacingError(
                f"127.0.0.1:{port_} is in use by a process the local stack did not start; stop it, or set "
                "KAFKA_BOOTSTRAP_SERVERS to use an existing broker"
            )
    p.logs.mkdir(parents=True, exist_ok=True)
    p.data.mkdir(parents=True, exist_ok=True)
    write_config(p, port, controller_port)
    format_storage(p)
    proc = procs.spawn(_java(p, MARKER, str(p.config), heap=HEAP), p.console_log, cwd=p.root)
    p.pid_file.write_text(f"{proc.pid}\n")
    wait_ready(p, timeout, proc, address=f"127.0.0.1:{port}")
    return proc.pid


def start_isolated(root: Path, port: int, controller_port: int, timeout: float = 90.0) -> int:
    """Start (or start again, on the same data) a broker of its own under `root`, on its own ports.

    For tests that must hurt a broker (kill it, restart it) without touching the shared one: it
    reuses the local stack's jars (a symlink, no Maven run) and the same server.properties template.
    Stop it with `stop(KafkaPaths(root))`; its state is whatever `root` holds."""
    p = KafkaPaths(root)
    shared = paths().libs
    if not shared.is_dir():
        raise UserFacingError(f"no Kafka jars in {shared}: run `incident-memory up` first")
    root.mkdir(parents=True, exist_ok=True)
    if not p.libs.exists():
        p.libs.symlink_to(shared, target_is_directory=True)
    return start(p, timeout, port=port, controller_port=controller_port)


def wait_ready(
    p: KafkaPaths, timeout: float, proc: subprocess.Popen[bytes] | None = None, address: str | None = None
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
            check_kafka(address or bootstrap(), timeout=2.0)
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
