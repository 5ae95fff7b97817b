"""Run a re-derivation: the compactor and the projector as subprocesses, side by side with the live pipeline.

They are started with the command lines production uses (`incident-memory compactor --app-id ...`,
`incident-memory projector --schema ...`), under names derived from NAME (`names.py`), so:
- resume is rerunning the same command: the topics, the compactor group's committed offsets, the
  selection changelog and the schema with its stored offsets all persist;
- more compactor workers with the same app id (`--workers N`, or the same command line in a
  Kubernetes Job) split the events topic's partitions;
- children get SIGTERM when this process dies (Linux PR_SET_PDEATHSIG), so a killed run leaves no
  orphan behind to race the resumed one.
The run ends when the compactor group has committed up to the events topic's high watermarks taken
at start, and the projector has stored offsets up to the compacted topic's end after that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from schemas import projections, topics
from schemas.migrate import apply_migrations
from services.compaction.config import SETTINGS_ENV, load_config
from services.rederive.names import Names
from services.rederive.progress import (
    Eta,
    committed,
    format_eta,
    high_watermarks,
    progress_line,
    projected,
    remaining,
)
from services.runtime.errors import UserFacingError
from services.runtime.kafka import admin_config
from services.runtime.kafka_client import KafkaClient

RUN_TABLE = projections.RUN_TABLE  # the run record the writers following a switch read
SELECTOR_CALLED = '"msg": "selector called"'
MAX_RESTARTS = 3


@dataclass(frozen=True)
class RunConfig:
    names: Names
    kafka: KafkaClient
    dsn: str
    state: Path  # logs and faust data dirs of this re-derivation
    selections_topic: str
    workers: int = 1
    selector: str | None = None
    budget: int | None = None
    batch_size: int = 2000
    progress: bool = True
    every: float = 2.0  # seconds between progress lines


@dataclass
class RunResult:
    events: int  # records of the events topic re-derived
    rows: int  # visible rows in the new schema
    seconds: float
    selector_calls: int
    restarts: int
    resumed: bool
    this_run: int = 0  # records the compactor group had not committed when this run started

    @property
    def events_per_second(self) -> float:
        return self.this_run / self.seconds if self.seconds > 0 else 0.0


def cli_argv() -> list[str]:
    """How to run the production CLI from here: `incident-memory-service` beside this interpreter, else -m."""
    script = Path(sys.executable).parent / "incident-memory-service"
    return [str(script)] if script.exists() else [sys.executable, "-m", "services.cli"]


def compactor_argv(cfg: RunConfig, worker: str) -> list[str]:
    n = cfg.names
    argv = [*cli_argv(), "compactor", "--broker", cfg.kafka.bootstrap_servers, "--app-id", n.app_id,
            "--events-topic", n.events_topic, "--compacted-topic", n.compacted_topic,
            "--dlq-topic", n.dlq_topic, "--selections-topic", cfg.selections_topic,
            "--workers-dir", str(cfg.state / "faust"), "--worker-name", worker]  # fmt: skip
    if cfg.selector:
        argv += ["--selector", cfg.selector]
    if cfg.budget is not None:
        argv += ["--budget", str(cfg.budget)]
    return argv


def projector_argv(cfg: RunConfig) -> list[str]:
    n = cfg.names
    return [*cli_argv(), "projector", "--schema", n.schema, "--topic", n.compacted_topic,
            "--dlq-topic", n.dlq_topic, "--group", n.projector_group,
            "--batch-size", str(cfg.batch_size)]  # fmt: skip


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


@dataclass
class Child:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )  # fmt: skip

    def exited(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def stop(self, timeout: float = 30.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)

    def last_lines(self, n: int = 3) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line[:200] for line in lines[-n:])


@dataclass
class Children:
    items: list[Child] = field(default_factory=list)

    def check(self) -> int:
        """Restart a child that exited (up to MAX_RESTARTS each); returns the restarts so far."""
        for child in self.items:
            code = child.exited()
            if code is not None:
                if child.restarts >= MAX_RESTARTS:
                    raise UserFacingError(
                        f"{child.name} exited with {code} {child.restarts + 1} times; see {child.log}: "
                        f"{child.last_lines(1)}"
                    )
                child.restarts += 1
                child.start()
        return sum(c.restarts for c in self.items)

    def stop(self) -> None:
        for child in self.items:
            if child.popen is not None and child.popen.poll() is None:
                child.popen.send_signal(signal.SIGTERM)
        for child in self.items:
            child.stop()


def prepare_topics(cfg: RunConfig) -> int:
    """The run's compacted and DLQ topics, created if missing; returns the events topic's partitions."""
    from confluent_kafka.admin import AdminClient

    n = cfg.names
    admin = AdminClient(admin_config(cfg.kafka))
    meta = admin.list_topics(timeout=10).topics
    source = meta.get(n.events_topic)
    if source is None or not source.partitions:
        raise UserFacingError(f"topic {n.events_topic!r} does not exist (run `incident-memory migrate`)")
    partitions = len(source.partitions)
    replication = max((len(p.replicas) for p in source.partitions.values()), default=-1)
    existing = n.compacted_topic in meta
    if existing and len(meta[n.compacted_topic].partitions) != partitions:
        raise UserFacingError(
            f"{n.compacted_topic} has {len(meta[n.compacted_topic].partitions)} partitions, "
            f"{n.events_topic} has {partitions}: drop it, or choose another NAME"
        )
    specs = (
        topics.TopicSpec(
            n.compacted_topic,
            partitions,
            {**topics.RETAIN_FOREVER, "max.message.bytes": str(topics.MAX_COMPACTED_RECORD_BYTES)},
        ),
        topics.TopicSpec(n.dlq_topic, 1),
    )
    topics.ensure_topics(admin_config(cfg.kafka), specs, replication_factor=replication)
    return partitions


def prepare(cfg: RunConfig, conn: psycopg.Connection) -> tuple[bool, int]:
    """Topics and schema of the run, created if missing. Returns (resumed, partitions of the events topic)."""
    n = cfg.names
    partitions = prepare_topics(cfg)
    resumed = run_record(conn, n.schema) is not None
    apply_migrations(conn, n.schema)

    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.{} (name text PRIMARY KEY, events_topic text NOT NULL,"
            " compacted_topic text NOT NULL, dlq_topic text NOT NULL, app_id text NOT NULL,"
            " projector_group text NOT NULL, selections_topic text NOT NULL,"
            " started_at timestamptz NOT NULL DEFAULT now(), caught_up_at timestamptz,"
            " events bigint, selector_calls bigint, seconds double precision)"
        ).format(sql.Identifier(n.schema), sql.Identifier(RUN_TABLE))
    )
    # The compactor settings and versions that make this projection: a compactor following a switch to
    # it adopts the settings, and moves only if its code makes the same versions (schemas/projections).
    settings = {k: os.environ[k] for k in SETTINGS_ENV if os.environ.get(k)}
    versions = load_config(settings).versions()
    conn.execute(
        sql.SQL(
            "ALTER TABLE {}.{} ADD COLUMN IF NOT EXISTS compactor_settings jsonb,"
            " ADD COLUMN IF NOT EXISTS compactor_versions jsonb"
        ).format(sql.Identifier(n.schema), sql.Identifier(RUN_TABLE))
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.{} (name, events_topic, compacted_topic, dlq_topic, app_id, projector_group,"
            " selections_topic, compactor_settings, compactor_versions)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING"
        ).format(sql.Identifier(n.schema), sql.Identifier(RUN_TABLE)),
        (
            n.name,
            n.events_topic,
            n.compacted_topic,
            n.dlq_topic,
            n.app_id,
            n.projector_group,
            cfg.selections_topic,
            Jsonb(settings),
            Jsonb(versions),
        ),
    )
    recorded = conn.execute(  # a record from before these columns gets them now
        sql.SQL(
            "UPDATE {}.{} SET compactor_settings = coalesce(compactor_settings, %s),"
            " compactor_versions = coalesce(compactor_versions, %s) RETURNING compactor_versions"
        ).format(sql.Identifier(n.schema), sql.Identifier(RUN_TABLE)),
        (Jsonb(settings), Jsonb(versions)),
    ).fetchone()
    if recorded is not None and recorded[0] is not None and recorded[0] != versions:
        raise UserFacingError(
            f"{n.name!r} was started with other compactor versions ({_versions(recorded[0])}) than this "
            f"run's ({_versions(versions)}): resume it with the same settings, or re-derive into a new name"
        )
    return resumed, partitions


def _versions(versions: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))


def selector_calls(state: Path) -> int:
    """Calls to the selector, over every compactor log of this re-derivation (all runs, resumed ones too)."""
    total = 0
    for log in state.glob("compactor-*.log"):
        with log.open(errors="replace") as f:
            total += sum(1 for line in f if SELECTOR_CALLED in line)
    return total


def lock(conn: psycopg.Connection, name: str) -> None:
    """One run per NAME at a time (a session advisory lock, released when this process dies)."""
    got = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (f"incident-memory rederive {name}",))
    row = got.fetchone()
    if not (row and row[0]):
        raise UserFacingError(f"a rederive into {name!r} is already running")


def rederive(cfg: RunConfig, *, follow: bool = False, say: Callable[[str], None] | None = None) -> RunResult:
    """Run the re-derivation to the events topic's current end (and on, live, with `follow`)."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    n = cfg.names
    started = time.monotonic()
    try:
        conn = psycopg.connect(cfg.dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise UserFacingError(f"cannot connect to Postgres: {' '.join(str(exc).split())}") from None
    children = Children()
    with conn:
        lock(conn, n.name)
        resumed, _partitions = prepare(cfg, conn)
        target = high_watermarks(cfg.kafka, n.events_topic)
        total = sum(target.values())
        left = remaining(target, committed(cfg.kafka, n.app_id, n.events_topic, sorted(target)))
        say(
            f"rederive {n.name}: {'resuming' if resumed else 'starting'}: {left:,} of {total:,} records of "
            f"{n.events_topic} -> {n.compacted_topic} -> schema {n.schema} "
            f"({cfg.workers} compactor worker{'s' if cfg.workers != 1 else ''}, logs in {cfg.state})"
        )
        for i in range(cfg.workers):
            children.items.append(
                Child(f"compactor w{i}", compactor_argv(cfg, f"w{i}"), cfg.state / f"compactor-w{i}.log")
            )
        children.items.append(Child("projector", projector_argv(cfg), cfg.state / "projector.log"))
        try:
            for child in children.items:
                child.start()
            restarts = _wait_caught_up(cfg, conn, children, target, say)
            seconds = time.monotonic() - started
            calls = selector_calls(cfg.state)
            rows = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.agent_messages").format(sql.Identifier(n.schema))
            ).fetchone()
            conn.execute(
                sql.SQL(
                    "UPDATE {}.{} SET caught_up_at = now(), events = %s, selector_calls = %s, seconds = %s"
                ).format(sql.Identifier(n.schema), sql.Identifier(RUN_TABLE)),
                (total, calls, seconds),
            )
            result = RunResult(total, int(rows[0]) if rows else 0, seconds, calls, restarts, resumed, left)
            if follow:
                say(f"rederive {n.name}: caught up; following the live tail (Ctrl-C to stop)")
                _follow(cfg, conn, children, say)
            return result
        finally:
            children.stop()


def compactor_worker(cfg: RunConfig, worker: str, say: Callable[[str], None] | None = None) -> RunResult:
    """One more compactor worker of the re-derivation NAME (a Kubernetes Job pod): it joins the group,
    takes its share of the partitions and exits once the group has committed up to the events topic's
    end as it was when this worker started. The coordinator (`rederive --into NAME`) runs the projector."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    n = cfg.names
    started = time.monotonic()
    prepare_topics(cfg)
    target = high_watermarks(cfg.kafka, n.events_topic)
    total = sum(target.values())
    state = cfg.state / worker
    child = Child(f"compactor {worker}", compactor_argv(cfg, worker), state / f"compactor-{worker}.log")
    children = Children([child])
    say(f"rederive {n.name}: worker {worker} joining group {n.app_id} up to {total:,} records")
    try:
        child.start()
        last = 0.0
        while True:
            restarts = children.check()
            left = remaining(target, committed(cfg.kafka, n.app_id, n.events_topic, sorted(target)))
            if left == 0:
                break
            if cfg.progress and time.monotonic() - last >= cfg.every:
                last = time.monotonic()
                say(f"rederive {n.name}: worker {worker}: group {total - left:,}/{total:,} committed")
            time.sleep(0.5)
    finally:
        children.stop()
    return RunResult(total, 0, time.monotonic() - started, selector_calls(state), restarts, False, total)


def _positions(cfg: RunConfig, conn: psycopg.Connection, target: dict[int, int]) -> tuple[int, int, int]:
    """(compactor records left to the target, projector records left to the compacted end, compacted end)."""
    n = cfg.names
    compactor = committed(cfg.kafka, n.app_id, n.events_topic, sorted(target))
    compacted_end = high_watermarks(cfg.kafka, n.compacted_topic)
    projector = projected(conn, n.schema, n.projector_group, n.compacted_topic)
    return remaining(target, compactor), remaining(compacted_end, projector), sum(compacted_end.values())


def _wait_caught_up(
    cfg: RunConfig,
    conn: psycopg.Connection,
    children: Children,
    target: dict[int, int],
    say: Callable[[str], None],
) -> int:
    """Poll until done; say a progress line every `cfg.every` seconds. Returns the children's restarts.

    Done is what the compactor group COMMITTED (faust commits every few seconds, after flushing its
    outputs); what it has done so far is shown from its outputs on the compacted topic (one per
    input record, dead letters of non-events aside), so the line moves between commits."""
    total = sum(target.values())
    compactor_eta, projector_eta = Eta(), Eta()
    last_said = 0.0
    restarts = 0
    while True:
        restarts = children.check()
        c_left, p_left, c_end = _positions(cfg, conn, target)
        if c_left == 0 and p_left == 0:
            # The compactor committed everything, so its outputs are on the topic: this end is final.
            c_left2, p_left2, _ = _positions(cfg, conn, target)
            if c_left2 == 0 and p_left2 == 0:
                if cfg.progress:
                    say(f"rederive {cfg.names.name}: caught up: {total:,} records")
                return restarts
        t = time.monotonic()
        c_done = min(total, max(total - c_left, c_end))
        compactor_eta.add(t, c_done)
        projector_eta.add(t, c_end - p_left)
        if cfg.progress and t - last_said >= cfg.every:
            last_said = t
            if c_done < total:
                eta = compactor_eta.seconds_left(total - c_done)
            else:
                eta = projector_eta.seconds_left(p_left)
            say(
                f"rederive {cfg.names.name}: "
                f"{progress_line('compactor', c_done, total, compactor_eta)} | "
                f"{progress_line('projector', c_end - p_left, c_end, projector_eta)} | "
                f"overall {format_eta(eta)}"
            )
        time.sleep(0.5)


def _follow(cfg: RunConfig, conn: psycopg.Connection, children: Children, say: Callable[[str], None]) -> None:
    last = 0.0
    while True:
        children.check()
        if time.monotonic() - last >= 10 * cfg.every:
            last = time.monotonic()
            c_left, p_left, _ = _positions(cfg, conn, high_watermarks(cfg.kafka, cfg.names.events_topic))
            say(f"rederive {cfg.names.name}: following; compactor lag {c_left:,}, projector lag {p_left:,}")
        time.sleep(1.0)


def run_record(conn: psycopg.Connection, schema: str) -> dict[str, object] | None:
    """The re-derivation record in `schema`, or None for a schema no rederive made."""
    if not projections.table_exists(conn, schema, RUN_TABLE):
        return None
    cur = conn.execute(
        sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(RUN_TABLE))
    )
    row = cur.fetchone()
    if row is None or cur.description is None:
        return None
    return {d.name: v for d, v in zip(cur.description, row, strict=True)}


def write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, default=str) + "\n")
    os.replace(tmp, path)
