"""`up` and `down` of the local real stack: one Kafka broker and one PostgreSQL, shared by everyone.

`up` is idempotent and safe to run concurrently (several pytest sessions at once): it holds an
exclusive file lock, reuses what is already running (pid file + liveness), starts what is not,
then applies the migrations and creates the topics. A component whose environment variable
(KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL) is set is never started: it is only checked.
`down` stops only what `up` started, by pid.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from deploy.local import kafka_node, postgres_node
from services.runtime import settings as rt
from services.runtime.checks import check_kafka, check_postgres
from services.runtime.errors import UserFacingError

LOCK_TIMEOUT = 300.0  # a first `up` builds the classpath with Maven


@dataclass(frozen=True)
class StackInfo:
    kafka_bootstrap_servers: str
    database_url: str
    kafka_pid: int | None  # None: an external broker (KAFKA_BOOTSTRAP_SERVERS was set)
    postgres_pid: int | None  # None: an external database (DATABASE_URL was set)
    started: tuple[str, ...] = ()  # what this call started ("kafka", "postgres")
    timings: dict[str, float] = field(default_factory=dict)  # seconds, per step
    state_dir: Path = field(default_factory=rt.state_dir)

    @property
    def settings(self) -> rt.Settings:
        return rt.Settings(self.kafka_bootstrap_servers, self.database_url)

    def describe(self) -> str:
        def who(pid: int | None, name: str) -> str:
            if pid is None:
                return "external"
            return f"local, pid {pid}, {'started' if name in self.started else 'already running'}"

        return (
            f"kafka     {self.kafka_bootstrap_servers}  ({who(self.kafka_pid, 'kafka')})\n"
            f"postgres  {postgres_redacted(self.database_url)}  ({who(self.postgres_pid, 'postgres')})\n"
            f"state     {self.state_dir}"
        )


def postgres_redacted(dsn: str) -> str:
    from services.runtime.checks import redact_dsn

    return redact_dsn(dsn)


@contextmanager
def locked(state: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """An exclusive flock on <state>/stack.lock, so concurrent `up`/`down` calls take turns."""
    state.mkdir(parents=True, exist_ok=True)
    with (state / "stack.lock").open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise UserFacingError(
                        f"another `incident-memory up/down` holds {state / 'stack.lock'}"
                    ) from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _external(var: str) -> bool:
    return bool(os.environ.get(var))


def up(migrate: bool = True, topics: bool = True, check_timeout: float = 10.0) -> StackInfo:
    """Start (or reuse) the local Kafka and PostgreSQL, apply migrations, create topics."""
    state = rt.state_dir()
    env = rt.Settings.from_env()
    timings: dict[str, float] = {}
    started: list[str] = []
    kafka_pid: int | None = None
    pg_pid: int | None = None
    with locked(state):
        if _external("KAFKA_BOOTSTRAP_SERVERS"):
            check_kafka(env.kafka_bootstrap_servers, timeout=check_timeout)
            bootstrap = env.kafka_bootstrap_servers
        else:
            kafka_pid, took = _up_kafka(state)
            bootstrap = kafka_node.bootstrap()
            if took is not None:
                started.append("kafka")
                timings.update(took)
        if _external("DATABASE_URL"):
            check_postgres(env.database_url, timeout=check_timeout)
            dsn = env.database_url
        else:
            pg_pid, took = _up_postgres(state)
            dsn = postgres_node.dsn()
            if took is not None:
                started.append("postgres")
                timings.update(took)
        t0 = time.monotonic()
        if migrate:
            _migrate(dsn)
        if topics:
            from schemas.topics import ensure_topics

            ensure_topics(bootstrap)
        timings["migrate_and_topics_s"] = round(time.monotonic() - t0, 2)
    return StackInfo(bootstrap, dsn, kafka_pid, pg_pid, tuple(started), timings, state)


def _up_kafka(state: Path) -> tuple[int, dict[str, float] | None]:
    p = kafka_node.paths(state)
    pid = kafka_node.running_pid(p)
    if pid is not None:
        kafka_node.wait_ready(p, timeout=60.0)
        return pid, None
    t0 = time.monotonic()
    built = kafka_node.build_classpath(p)
    t1 = time.monotonic()
    pid = kafka_node.start(p)
    took = {"kafka_start_s": round(time.monotonic() - t1, 2)}
    if built:
        took["kafka_classpath_s"] = round(t1 - t0, 2)
    return pid, took


def _up_postgres(state: Path) -> tuple[int, dict[str, float] | None]:
    p = postgres_node.paths(state)
    pid = postgres_node.running_pid(p)
    if pid is not None:
        bins = postgres_node.bin_dir()
        postgres_node.wait_ready()
        postgres_node.ensure_role_and_db(p, bins)
        return pid, None
    t0 = time.monotonic()
    bins = postgres_node.bin_dir()
    t1 = time.monotonic()
    created = postgres_node.init_cluster(p, bins)
    t2 = time.monotonic()
    postgres_node.write_config(p)
    pid = postgres_node.start(p, bins)
    postgres_node.ensure_role_and_db(p, bins)
    postgres_node.wait_ready()
    took = {"postgres_start_s": round(time.monotonic() - t2, 2)}
    if t1 - t0 > 1:
        took["postgres_install_s"] = round(t1 - t0, 2)
    if created:
        took["postgres_initdb_s"] = round(t2 - t1, 2)
    return pid, took


def _migrate(dsn: str) -> list[str]:
    import psycopg

    from schemas.migrate import MigrationError, apply_migrations

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        try:
            return apply_migrations(conn)
        except MigrationError as exc:
            raise UserFacingError(str(exc)) from None


def down() -> list[str]:
    """Stop what `up` started (by pid file). Returns the names stopped."""
    state = rt.state_dir()
    stopped = []
    with locked(state):
        if kafka_node.stop(kafka_node.paths(state)):
            stopped.append("kafka")
        if postgres_node.stop(postgres_node.paths(state)):
            stopped.append("postgres")
    return stopped
