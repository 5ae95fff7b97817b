"""The pipeline harness: the services as real processes on per-run names, for the demo, the benchmarks and tests.

The topology is declared once, here: each service's `incident-memory` subcommand, its command line built
from a run's names (topics, schema, consumer groups, app id), the flag and port it serves /healthz on, and
how it says it is ready. `Proc` is one process (start, wait until ready, kill -9, restart, stop); `Pipeline`
is one run's processes against a broker and a database. `python -m deploy.local.pipeline --check-deploy`
(from deploy/validate.sh) checks that the compose file and the k8s manifests run what the topology says.

Dev tooling: production code (services/, schemas/) never imports it; the image does not carry it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import psycopg
from confluent_kafka import Producer
from psycopg import sql

from deploy.local import loopback_http
from deploy.local.ports import LOOPBACK, free_port
from schemas import topics as schema_topics
from services.runtime.kafka import producer_config

__all__ = [
    "DEPLOYED",
    "TOPOLOGY",
    "Names",
    "Pipeline",
    "PipelineError",
    "Proc",
    "Service",
    "cli",
    "command",
    "free_port",
    "fresh_schema",
    "fresh_topics",
    "http_ok",
    "produce",
    "wait_until",
]

ROOT = Path(__file__).resolve().parents[2]


# ---- fresh names for a test or a module ---------------------------------------------------------


def delete_topics(bootstrap: str, names: Iterable[str]) -> None:
    """Delete topics and wait for the answers, best effort (a topic never created is no error). Each
    name once: a name twice fails the whole request. The client is kept until the answers come: a
    client dropped at once never sends it."""
    from confluent_kafka.admin import AdminClient

    doomed = sorted(set(names))
    if not doomed:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(doomed, operation_timeout=10).values():
        with contextlib.suppress(Exception):
            future.result(timeout=15)


@contextlib.contextmanager
def fresh_topics(kafka_bootstrap: str) -> Iterator[dict[str, str]]:
    """{events, compacted, wake, dlq} -> unique topic names, created with schemas.topics' partitions,
    deleted afterwards (best effort: keep the shared broker small)."""
    from schemas.topics import COMPACTED, DLQ, EVENTS, TOPICS, WAKE, ensure_topics

    suffix = uuid.uuid4().hex[:12]
    keys = {EVENTS: "events", COMPACTED: "compacted", WAKE: "wake", DLQ: "dlq"}
    specs = tuple(replace(spec, name=f"{spec.name}.{suffix}") for spec in TOPICS)
    ensure_topics(kafka_bootstrap, specs)
    names = {keys[spec.name]: f"{spec.name}.{suffix}" for spec in TOPICS}
    try:
        yield names
    finally:
        delete_topics(kafka_bootstrap, names.values())


@contextlib.contextmanager
def fresh_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema with every migration applied; dropped (CASCADE) afterwards."""
    from schemas.migrate import apply_migrations

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        apply_migrations(conn, schema=name)
    try:
        yield name
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes]],
    config: dict[str, Any] | None = None,
    **kw: Any,
) -> None:
    """Produce records with an idempotent producer, waiting out a full queue; all acked or an AssertionError."""
    producer = Producer(producer_config(bootstrap, **{"linger.ms": 10, **(config or {})}))
    for key, value in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value, **kw)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0, "records not delivered"


# ---- the topology ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Service:
    """One service of the pipeline as it runs anywhere: locally here, in compose, in Kubernetes."""

    name: str  # the process, the compose service and the Deployment are named so
    subcommand: str  # `incident-memory <subcommand>`
    ready_log: str | None  # run locally: ready once its log has this line (None: ready on /healthz)
    port_flag: str | None  # the flag naming the port it serves /healthz (and /metrics) on
    deploy_port: int | None  # that port in deploy/docker-compose.yml and deploy/k8s
    health_path: str = "/healthz"
    deployed: bool = True  # a Deployment and a compose service of its own


TOPOLOGY: dict[str, Service] = {
    s.name: s
    for s in (
        Service("ingest", "ingest", None, "--port", 8080),
        Service("compactor", "compactor", "streams resumed", "--metrics-port", 9101),
        Service("projector", "projector", "assigned", "--metrics-port", 9102),
        Service("agent", "agent", "agent starting", "--metrics-port", 9103),
        Service("slack", "slack", "slack poster ready", "--metrics-port", 9104),
        # spawned by the agent over stdio (its --mcp-command), never on its own
        Service("telemetry-mcp", "telemetry-mcp", None, None, None, deployed=False),
    )
}
DEPLOYED: tuple[str, ...] = tuple(name for name, s in TOPOLOGY.items() if s.deployed)
TOPIC_KEYS = {
    "events": schema_topics.EVENTS,
    "compacted": schema_topics.COMPACTED,
    "wake": schema_topics.WAKE,
    "dlq": schema_topics.DLQ,
}


def cli() -> str:
    """The `incident-memory` of this interpreter's environment (the one on PATH otherwise)."""
    local = Path(sys.executable).with_name("incident-memory")
    return str(local) if local.exists() else "incident-memory"


def command(service: str, *args: str) -> list[str]:
    """`incident-memory <subcommand> args...` for a service of the topology."""
    return [cli(), TOPOLOGY[service].subcommand, *args]


@dataclass(frozen=True)
class Names:
    """A run's names: topics, Postgres schema, and a consumer group (and faust app id) per service."""

    prefix: str
    schema: str
    topics: dict[str, str]  # events, compacted, wake, dlq (selections: optional)

    @classmethod
    def fresh(cls, prefix: str, schema: str) -> Names:
        """`<prefix>.<events|compacted|wake|dlq|selections>` topics."""
        return cls(prefix, schema, {k: f"{prefix}.{k}" for k in (*TOPIC_KEYS, "selections")})

    def group(self, service: str) -> str:
        return f"{self.prefix}.{service}"

    @property
    def selections(self) -> str:
        """The compactor's selections changelog (the compactor creates it unless it exists)."""
        return self.topics.get("selections") or f"{self.prefix}.selections"

    def topic_specs(self) -> tuple[schema_topics.TopicSpec, ...]:
        """The run's topics, with the partitions and settings of the production ones."""
        by_name = {spec.name: spec for spec in schema_topics.TOPICS}
        return tuple(replace(by_name[base], name=self.topics[k]) for k, base in TOPIC_KEYS.items())


# ---- waiting -----------------------------------------------------------------------------------


class PipelineError(AssertionError):
    """A wait timed out or a service exited under it. `summary` is one line; the message adds the log tail."""

    def __init__(self, summary: str, tail: str = "") -> None:
        super().__init__(summary + (f"\n{tail}" if tail else ""))
        self.summary = summary


def wait_until(
    condition: Callable[[], Any],
    timeout: float,
    what: str,
    every: float = 0.1,
    watch: Iterable[Proc] = (),
) -> Any:
    """Poll `condition()` until truthy and return its value. Fails at the deadline, or at once when a
    process in `watch` exits that nobody stopped (its log named, its tail attached)."""
    watched = list(watch)
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        for proc in watched:
            if proc.exited():
                value = condition()  # what it did before it exited counts
                if value:
                    return value
                err = f"\n--- its stderr ({proc.err_log})\n{proc.err_text()[-3000:]}" if proc.err_log else ""
                raise PipelineError(
                    f"{proc.name} exited with {proc.returncode} while waiting for {what}; see {proc.log}",
                    proc.tail() + err,
                )
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p.name} ({p.log})\n{p.tail(1500)}" for p in watched)
            raise PipelineError(f"timed out after {timeout:.0f}s waiting for {what}", tails)
        time.sleep(every)


def http_ok(url: str) -> Callable[[], bool]:
    """A check: `url` answers 200."""

    def check() -> bool:
        try:
            return loopback_http.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    return check


# ---- one process -------------------------------------------------------------------------------


@dataclass
class Proc:
    """One process, its output in `log` (appended across restarts). `restart()` relaunches the argv.

    It runs in a session of its own (a Ctrl-C of the caller is the caller's; its process group is it and
    every child it starts). Its stderr goes to `log` too, or to `err_log` when given (for a process whose
    stdout is read as data: a stand-in's URL on its first line, a JSON report).
    Stopped or killed through these methods, it is not "exited" for `wait_until`: only a crash is."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    ready: Callable[[], bool] | None = None
    port: int | None = None  # where it serves /healthz (and /metrics), when it does
    cwd: Path | None = None
    err_log: Path | None = None  # its stderr, apart from `log` (None: into `log`)
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0
    stopped: bool = False

    def start(self) -> Proc:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as files:
            out = files.enter_context(self.log.open("ab"))
            err: Any = subprocess.STDOUT
            if self.err_log is not None:
                self.err_log.parent.mkdir(parents=True, exist_ok=True)
                err = files.enter_context(self.err_log.open("ab"))
            self.popen = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True,
            )  # fmt: skip
        self.starts += 1
        self.stopped = False
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} never started"
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def exited(self) -> bool:
        """Ended without being stopped or killed by us."""
        return self.popen is not None and not self.stopped and self.popen.poll() is not None

    def wait_ready(self, timeout: float, every: float = 0.1) -> Proc:
        if self.ready is not None:
            wait_until(self.ready, timeout, f"{self.name} ready", every, watch=[self])
        return self

    def wait_line(self, pattern: str | re.Pattern[str], timeout: float, every: float = 0.05) -> re.Match[str]:
        """The match of `pattern` (`re.search`) in the first complete line of `log` it matches, once there
        is one: what a process prints when it is ready, e.g. a stand-in's URL with the port it bound.
        Fails at `timeout`, or at once when it exits without having printed it."""
        regex = re.compile(pattern)

        def found() -> re.Match[str] | None:
            text = self.text()
            lines = text[: text.rfind("\n") + 1].splitlines()  # a line still being written is not one yet
            return next((m for m in map(regex.search, lines) if m is not None), None)

        what = f"{self.name} to print /{regex.pattern}/"
        match: re.Match[str] = wait_until(found, timeout, what, every, watch=[self])
        return match

    def wait(self, timeout: float | None = None) -> int:
        """Wait for it to end on its own; its exit code (subprocess.TimeoutExpired at `timeout`)."""
        assert self.popen is not None, f"{self.name} never started"
        return self.popen.wait(timeout)

    def send_signal(self, sig: int, group: bool = False) -> None:
        """Send `sig`, to its whole process group when `group` (it and every child it started, at once,
        as a terminal's Ctrl-C does); it counts as stopped by us, not as a crash."""
        assert self.popen is not None, f"{self.name} never started"
        self.stopped = True
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.popen.pid, sig)  # its own session: its pid is its group's id
            else:
                self.popen.send_signal(sig)

    def kill9(self, group: bool = False) -> None:
        """SIGKILL (its whole process group when `group`), then reap it."""
        self.send_signal(signal.SIGKILL, group)
        assert self.popen is not None
        self.popen.wait(15)

    def restart(self) -> Proc:
        if self.alive():
            self.kill9()
        return self.start()

    def terminate(self) -> None:
        """SIGTERM, without waiting (`stop` waits)."""
        if self.alive():
            self.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 20.0, sig: int = signal.SIGTERM, group: bool = False) -> int | None:
        """`sig` (SIGTERM; to its whole process group when `group`), wait, then SIGKILL; the exit code."""
        if self.popen is None:
            return None
        if self.alive() or group:  # a group may outlive its leader
            self.send_signal(sig, group)
        self.stopped = True
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.send_signal(signal.SIGKILL, group)
            self.popen.wait(10)
        return self.popen.returncode

    def metric(self, name: str, **labels: str) -> float:
        """The sum of its /metrics samples called `name` that carry `labels` (0 when there is none)."""
        from prometheus_client.parser import text_string_to_metric_families

        assert self.port is not None, f"{self.name} serves no /metrics here"
        text = loopback_http.get(f"http://{LOOPBACK}:{self.port}/metrics", timeout=5).text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, n: int = 3000) -> str:
        return self.text()[-n:]

    def err_text(self) -> str:
        """Its stderr, when it goes to `err_log` ("" otherwise: it is in `log`)."""
        if self.err_log is None or not self.err_log.exists():
            return ""
        return self.err_log.read_text(errors="replace")

    def log_has(self, needle: str) -> bool:
        return needle in self.text()

    def logs(self) -> list[dict[str, Any]]:
        """Its JSON log lines (every service logs JSON), other lines skipped."""
        out = []
        for line in self.text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(line)
                if isinstance(value, dict):
                    out.append(value)
        return out


# ---- one run -----------------------------------------------------------------------------------


@dataclass
class Pipeline:
    """One run's services against a broker and a database, on its own names; logs under `root`.

    The brokers and the database come from the environment the services get (KAFKA_BOOTSTRAP_SERVERS,
    DATABASE_URL); `service_env` adds a service's own (e.g. its Kafka principal on the secured node)."""

    bootstrap: str
    dsn: str  # "": no database (DATABASE_URL as inherited)
    schema: str
    topics: dict[str, str]
    root: Path
    prefix: str | None = None  # of the groups and the app id (default: the schema)
    extra_env: dict[str, str] = field(default_factory=dict)
    drop_env: tuple[str, ...] = ()  # variables of this environment the services must not inherit
    service_env: Callable[[str], dict[str, str]] | None = None
    procs: list[Proc] = field(default_factory=list)

    @property
    def names(self) -> Names:
        return Names(self.prefix or self.schema, self.schema, self.topics)

    @property
    def env(self) -> dict[str, str]:
        db = {"DATABASE_URL": self.dsn} if self.dsn else {}
        inherited = {k: v for k, v in os.environ.items() if k not in self.drop_env}
        return {**inherited, "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap, **db, "PYTHONUNBUFFERED": "1",
                **self.extra_env}  # fmt: skip

    @property
    def group(self) -> str:
        """The projector's consumer group."""
        return self.names.group("projector")

    def provision(self, admin: str | dict[str, Any] | None = None) -> None:
        """Create the run's topics (as production's: partitions, settings) and its schema, migrated."""
        from schemas.migrate import apply_migrations

        schema_topics.ensure_topics(admin or self.bootstrap, self.names.topic_specs())
        with psycopg.connect(self.dsn) as conn:
            apply_migrations(conn, self.schema)
            conn.commit()

    def deprovision(self) -> None:
        """Delete the run's topics and drop its schema, best effort: a benchmark that leaves its topics
        behind grows the shared broker's heap (hundreds of topics made its GC pauses longer)."""
        delete_topics(self.bootstrap, [*self.topics.values(), self.names.selections])
        if self.dsn:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema)))

    def connect(self) -> psycopg.Connection:
        """An autocommit connection to the run's database, on the run's schema."""
        assert self.dsn, "this run has no database"
        return psycopg.connect(self.dsn, autocommit=True, options=f"-c search_path={self.schema}")

    def env_of(self, service: str, env: dict[str, str] | None = None) -> dict[str, str]:
        own = self.service_env(service) if self.service_env else {}
        return {**self.env, **own, **(env or {})}

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        ready: Callable[[], bool] | None = None,
        port: int | None = None,
    ) -> Proc:
        """Start `argv` as process `name` (its log `<root>/<name>.log`; a second `name` gets `-<n>`)."""
        taken = sum(1 for p in self.procs if p.name == name)
        log = self.root / (f"{name}.log" if not taken else f"{name}-{taken}.log")
        proc = Proc(name, list(argv), env if env is not None else self.env, log, ready, port)
        self.procs.append(proc)
        return proc.start()

    def service(
        self,
        service: str,
        args: Sequence[str],
        name: str | None = None,
        env: dict[str, str] | None = None,
        port: int | None = None,
    ) -> Proc:
        """Start a service of the topology with `args`; ready as the topology says."""
        spec = TOPOLOGY[service]
        if port is not None and spec.port_flag:
            args = [*args, spec.port_flag, str(port)]
        ready = http_ok(f"http://{LOOPBACK}:{port}{spec.health_path}") if port is not None else None
        proc = self.start(name or service, command(service, *args), self.env_of(service, env), ready, port)
        if spec.ready_log is not None:
            proc.ready = functools.partial(proc.log_has, spec.ready_log)
        return proc

    # -- the command lines, from the run's names --

    def ingest_args(
        self,
        *,
        secret: str | None = None,
        token: str | None = None,
        bot: str | None = None,
        alerts_topic: str | None = None,
        schema: bool = True,
        team: str | None = None,
        app: str | None = None,
    ) -> list[str]:
        n = self.names
        args = [
            "--events-topic",
            n.topics["events"],
            "--wake-topic",
            n.topics["wake"],
            "--dlq-topic",
            n.topics["dlq"],
        ]
        if schema:
            args += ["--schema", n.schema]
        for flag, value in (
            ("--signing-secret", secret),
            ("--alertmanager-token", token),
            ("--bot-user-id", bot),
            ("--team-id", team),
            ("--app-id", app),
        ):
            if value:
                args += [flag, value]
        if alerts_topic:
            args += ["--alerts-topic", alerts_topic, "--alerts-group", n.group("alerts")]
        return args

    def compactor_args(
        self,
        worker: str | None = None,
        *,
        app_id: str | None = None,
        compacted: str | None = None,
        selections: str | None = None,
    ) -> list[str]:
        n = self.names
        args = ["--app-id", app_id or n.group("compactor"), "--events-topic", n.topics["events"],
                "--compacted-topic", compacted or n.topics["compacted"], "--dlq-topic", n.topics["dlq"],
                "--selections-topic", selections or n.selections, "--workers-dir", str(self.root / "faust")]  # fmt: skip
        return args + (["--worker-name", worker] if worker else [])

    def projector_args(self, *, group: str | None = None, batch_size: int | None = None) -> list[str]:
        n = self.names
        args = ["--schema", n.schema, "--topic", n.topics["compacted"], "--dlq-topic", n.topics["dlq"],
                "--group", group or n.group("projector")]  # fmt: skip
        return args + (["--batch-size", str(batch_size)] if batch_size else [])

    def agent_args(self, *, group: str | None = None) -> list[str]:
        n = self.names
        return ["--schema", n.schema, "--events-topic", n.topics["events"], "--wake-topic", n.topics["wake"],
                "--dlq-topic", n.topics["dlq"], "--group", group or n.group("agent")]  # fmt: skip

    def slack_args(
        self, *, group: str | None = None, schema: str | None = None, default_channel: str | None = None
    ) -> list[str]:
        n = self.names
        args = ["--events-topic", n.topics["events"], "--group", group or n.group("slack"),
                "--schema", schema or n.schema]  # fmt: skip
        return args + (["--default-channel", default_channel] if default_channel else [])

    # -- the services --

    def ingest(
        self,
        port: int | None = None,
        secret: str | None = None,
        token: str | None = None,
        bot: str | None = None,
        alerts_topic: str | None = None,
        *,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
        name: str = "ingest",
        schema: bool = True,
        team: str | None = None,
        app: str | None = None,
    ) -> Proc:
        """ingest on `port` (a free one by default): ready when /healthz answers 200. `team`/`app`: the
        Slack workspace and app it records (else SLACK_TEAM_ID / SLACK_APP_ID of its environment)."""
        args = self.ingest_args(
            secret=secret, token=token, bot=bot, alerts_topic=alerts_topic, schema=schema, team=team, app=app
        )
        return self.service("ingest", [*args, *extra], name, env, port or free_port())

    def compactor(
        self,
        name: str = "compactor",
        env: dict[str, str] | None = None,
        *,
        app_id: str | None = None,
        compacted: str | None = None,
        selections: str | None = None,
        metrics_port: int | None = None,
        extra: Sequence[str] = (),
    ) -> Proc:
        args = self.compactor_args(name, app_id=app_id, compacted=compacted, selections=selections)
        return self.service("compactor", [*args, *extra], name, env, metrics_port)

    def projector(
        self,
        name: str = "projector",
        batch_size: int | None = None,
        *,
        group: str | None = None,
        metrics_port: int | None = None,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> Proc:
        args = self.projector_args(group=group, batch_size=batch_size)
        return self.service("projector", [*args, *extra], name, env, metrics_port)

    def agent(
        self,
        name: str = "agent",
        *,
        group: str | None = None,
        metrics_port: int | None = None,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> Proc:
        return self.service("agent", [*self.agent_args(group=group), *extra], name, env, metrics_port)

    def slack(
        self,
        api_url: str,
        token: str,
        name: str = "slack",
        group: str | None = None,
        schema: str | None = None,
        default_channel: str | None = None,
        *,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> Proc:
        """The Slack poster (the agent's voice) against a Slack API (a stand-in in tests and the demo)."""
        args = self.slack_args(group=group, schema=schema, default_channel=default_channel)
        api = {"SLACK_API_URL": api_url, "SLACK_BOT_TOKEN": token, **(env or {})}
        return self.service("slack", [*args, *extra], name, api)

    # -- waiting and stopping --

    def wait_until(self, condition: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
        """`wait_until`, failing early when one of this run's processes crashes."""
        return wait_until(condition, timeout, what, every, watch=self.procs)

    def wait_ready(self, *procs: Proc, timeout: float = 60.0) -> None:
        for proc in procs or tuple(self.procs):
            if proc.ready is not None:
                self.wait_until(proc.ready, timeout, f"{proc.name} ready")

    def stop_all(self, timeout: float = 20.0) -> None:
        """SIGTERM every process at once, then wait for each (SIGKILL at `timeout`)."""
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.stop(timeout)


# ---- the deploy files against the topology ------------------------------------------------------


def deploy_problems(root: Path = ROOT) -> list[str]:
    """Where deploy/docker-compose.yml or deploy/k8s/base run a service otherwise than the topology says:
    another subcommand, another /healthz port or path, or a service missing or extra."""
    import yaml

    problems: list[str] = []
    compose = yaml.safe_load((root / "deploy" / "docker-compose.yml").read_text())["services"]
    k8s: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "deploy" / "k8s" / "base").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "Deployment":
                k8s[doc["metadata"]["name"]] = doc
    for name in DEPLOYED:
        spec = TOPOLOGY[name]
        if name not in compose:
            problems.append(f"docker-compose.yml: no service {name}")
        else:
            problems += [
                f"docker-compose.yml: {p}"
                for p in _command_problems(spec, compose[name].get("command") or [])
            ]
            test = " ".join(compose[name].get("healthcheck", {}).get("test") or [])
            if f":{spec.deploy_port}{spec.health_path}" not in test:
                problems.append(
                    f"docker-compose.yml: {name}'s healthcheck is not {spec.health_path} on {spec.deploy_port}"
                )
        if name not in k8s:
            problems.append(f"k8s/base: no Deployment {name}")
            continue
        (main,) = k8s[name]["spec"]["template"]["spec"]["containers"]
        problems += [f"k8s/base: {p}" for p in _command_problems(spec, main.get("args") or [])]
        ports = {p.get("name"): p["containerPort"] for p in main.get("ports") or []}
        for probe in ("readinessProbe", "livenessProbe"):
            get = (main.get(probe) or {}).get("httpGet") or {}
            port = ports.get(get.get("port")) if isinstance(get.get("port"), str) else get.get("port")
            if get.get("path") != spec.health_path or port != spec.deploy_port:
                problems.append(
                    f"k8s/base: {name}'s {probe} is {get.get('path')} on {port}, "
                    f"not {spec.health_path} on {spec.deploy_port}"
                )
    for name in sorted(set(compose) - set(DEPLOYED) - {"kafka", "postgres", "migrate"}):
        problems.append(f"docker-compose.yml: service {name} is not in the topology")
    for name in sorted(set(k8s) - set(DEPLOYED)):
        problems.append(f"k8s/base: Deployment {name} is not in the topology")
    return problems


def _command_problems(spec: Service, argv: Sequence[str]) -> list[str]:
    if not argv or argv[0] != spec.subcommand:
        return [f"{spec.name} runs {list(argv)[:1]}, not `{spec.subcommand}`"]
    if spec.port_flag and spec.port_flag in argv:
        i = list(argv).index(spec.port_flag)
        if i + 1 < len(argv) and argv[i + 1] == str(spec.deploy_port):
            return []
    return [f"{spec.name} is not told `{spec.port_flag} {spec.deploy_port}`"] if spec.port_flag else []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deploy.local.pipeline", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--check-deploy", action="store_true", help="check deploy/ against the topology")
    args = parser.parse_args(argv)
    if not args.check_deploy:
        for spec in TOPOLOGY.values():
            where = f"{spec.health_path} on {spec.port_flag} ({spec.deploy_port})" if spec.port_flag else "-"
            print(f"{spec.name:14} incident-memory {spec.subcommand:14} health: {where}")
        return 0
    problems = deploy_problems()
    for problem in problems:
        print(f"deploy/{problem}", file=sys.stderr)
    if not problems:
        print(f"  compose and k8s/base run {', '.join(DEPLOYED)} as deploy/local/pipeline.py declares")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
