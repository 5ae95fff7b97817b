"""`up` and `down` of the local real stack: one Kafka broker (or three: `up --brokers 3`) and one
PostgreSQL, shared by everyone.

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

from deploy.local import kafka_cluster, kafka_node, kafka_secure, postgres_node
from services.runtime import settings as rt
from services.runtime.checks import check_kafka, check_postgres
from services.runtime.errors import UserFacingError
from services.runtime.kafka import admin_config
from services.runtime.kafka_client import as_client

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
    kafka_pids: tuple[int, ...] = ()  # every local broker's pid: one, or the cluster's three (`--brokers 3`)
    ca_file: Path | None = None  # the local CA (`up --secure`): <state>/tls/ca.pem
    secure_kafka: kafka_secure.SecureKafka | None = None  # the SASL_SSL node (`up --secure`)

    @property
    def verify_full_dsn(self) -> str | None:
        """The local Postgres over TLS, its certificate and host name checked against ca_file (`--secure`)."""
        if self.ca_file is None or self.postgres_pid is None:
            return None
        return postgres_node.verify_full_dsn(self.ca_file)

    @property
    def settings(self) -> rt.Settings:
        return rt.Settings(as_client(self.kafka_bootstrap_servers), self.database_url)

    def describe(self) -> str:
        def who(pid: int | None, name: str) -> str:
            if pid is None:
                return "external"
            how = "started" if name in self.started else "already running"
            if name == "kafka" and len(self.kafka_pids) > 1:
                return f"local, {len(self.kafka_pids)} brokers, pids {', '.join(map(str, self.kafka_pids))}, {how}"
            return f"local, pid {pid}, {how}"

        return (
            f"kafka     {self.kafka_bootstrap_servers}  ({who(self.kafka_pid, 'kafka')})\n"
            f"postgres  {postgres_redacted(self.database_url)}  ({who(self.postgres_pid, 'postgres')})\n"
            + (f"          TLS: {postgres_redacted(self.verify_full_dsn)}\n" if self.verify_full_dsn else "")
            + (f"CA        {self.ca_file}\n" if self.ca_file else "")
            + (
                f"kafka     {self.secure_kafka.bootstrap}  (SASL_SSL {kafka_secure.MECHANISM}, ACLs; a service "
                f"runs as <user> with KAFKA_CLIENT_CONFIG={self.secure_kafka.client_file('<user>')})\n"
                if self.secure_kafka
                else ""
            )
            + f"state     {self.state_dir}"
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


def up(
    migrate: bool = True,
    topics: bool = True,
    check_timeout: float = 10.0,
    brokers: int = 1,
    secure: bool = False,
) -> StackInfo:
    """Start (or reuse) the local Kafka and PostgreSQL, apply migrations, create topics.

    `brokers=3` starts the three-node cluster (deploy/local/kafka_cluster.py) instead of the single
    broker, and creates the topics with replication 3 and min.insync.replicas 2."""
    if brokers not in (1, kafka_cluster.REPLICATION):
        raise UserFacingError(f"--brokers must be 1 or {kafka_cluster.REPLICATION}, got {brokers}")
    kafka_pids: tuple[int, ...] = ()
    state = rt.state_dir()
    env = rt.Settings.from_env()
    timings: dict[str, float] = {}
    started: list[str] = []
    kafka_pid: int | None = None
    pg_pid: int | None = None
    ca_file: Path | None = None
    with locked(state):
        if _external("KAFKA_BOOTSTRAP_SERVERS"):
            check_kafka(env.kafka, timeout=check_timeout)
            bootstrap = env.kafka_bootstrap_servers
        elif brokers > 1:
            kafka_pids, took = _up_cluster(state)
            kafka_pid, bootstrap = kafka_pids[0], kafka_cluster.local(state).bootstrap
            if took is not None:
                started.append("kafka")
                timings.update(took)
        else:
            kafka_pid, took = _up_kafka(state)
            kafka_pids = (kafka_pid,)
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
            if secure:
                ca_file, timings["postgres_tls_s"] = _secure_postgres(state)
        secure_kafka = None
        if secure and not _external("KAFKA_BOOTSTRAP_SERVERS"):
            secure_kafka, took = _up_secure_kafka(state, topics)
            started += ["kafka-secure"] if took else []
            timings.update(took or {})
        t0 = time.monotonic()
        if migrate:
            _migrate(dsn)
            if not _external("DATABASE_URL"):  # the review page's read-only login (docs/review.md)
                from deploy.local.review_login import ensure_review_login

                ensure_review_login(dsn)
        if topics:
            from schemas.topics import ensure_topics

            if brokers > 1:
                ensure_topics(
                    bootstrap,
                    replication_factor=kafka_cluster.REPLICATION,
                    min_insync_replicas=kafka_cluster.MIN_INSYNC_REPLICAS,
                )
            else:
                ensure_topics(admin_config(env.kafka if _external("KAFKA_BOOTSTRAP_SERVERS") else bootstrap))
        timings["migrate_and_topics_s"] = round(time.monotonic() - t0, 2)
    return StackInfo(
        bootstrap, dsn, kafka_pid, pg_pid, tuple(started), timings, state, kafka_pids, ca_file, secure_kafka
    )


def restart_postgres(timeout: float = 30.0) -> int:
    """Restart the local PostgreSQL (postgres_node.restart) under the stack lock, so that a concurrent
    `up` waits instead of finding it down mid-restart and starting another; if the restart failed and
    left it down, start it again (the stack is shared). Returns the postmaster pid."""
    state = rt.state_dir()
    p = postgres_node.paths(state)
    with locked(state):
        try:
            return postgres_node.restart(timeout, p)
        finally:
            if postgres_node.running_pid(p) is None:
                postgres_node.start(p, postgres_node.bin_dir(install=False))


def kafka_jars() -> Path:
    """The local Kafka's jars, resolved as `up` does (Maven, only when kafka/pom.xml changed), with
    nothing started: what a broker of a test's own (kafka_node.start_isolated, kafka_cluster.isolated)
    and a Kafka tool (kafka_node.run_tool) run on, under the external-stack mode too."""
    state = rt.state_dir()
    p = kafka_node.paths(state)
    with locked(state):
        kafka_node.build_classpath(p)
    return p.libs


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


def _up_secure_kafka(state: Path, topics: bool) -> tuple[kafka_secure.SecureKafka, dict[str, float] | None]:
    """The SASL_SSL node beside the plaintext one: start it if needed, then (idempotently) the
    services' ACLs and the topics, as its admin."""
    from schemas.topics import ensure_topics

    node = kafka_secure.paths(state)
    took = None
    if kafka_secure.running_pid(node) is None:
        t0 = time.monotonic()
        kafka_secure.start(node)
        took = {"kafka_secure_start_s": round(time.monotonic() - t0, 2)}
    else:
        kafka_node.wait_ready(node.paths, timeout=60.0, client=node.client())
    kafka_secure.grant(node.client(), kafka_secure.service_acls())
    if topics:
        ensure_topics(admin_config(node.client()))
    return node, took


def _up_cluster(state: Path) -> tuple[tuple[int, ...], dict[str, float] | None]:
    """The three-node cluster: reuse the nodes that run, start the others (with the single node's jars)."""
    cluster = kafka_cluster.local(state)
    running = [pid for pid in cluster.pids().values() if pid is not None]
    if len(running) == len(cluster.nodes):
        cluster.wait_brokers(timeout=60.0)
        return tuple(running), None
    t0 = time.monotonic()
    built = kafka_node.build_classpath(kafka_node.paths(state))
    t1 = time.monotonic()
    pids = cluster.start()
    took = {"kafka_start_s": round(time.monotonic() - t1, 2)}
    if built:
        took["kafka_classpath_s"] = round(t1 - t0, 2)
    return tuple(pids[node.node_id] for node in cluster.nodes), took


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


def _secure_postgres(state: Path) -> tuple[Path, float]:
    """`--secure` for the local PostgreSQL: ssl = on with a certificate from the local CA (<state>/tls),
    applied by a reload, then checked with a verify-full connection. Returns the CA file and seconds."""
    from deploy.local import tls

    t0 = time.monotonic()
    ca = tls.ensure_ca(state / "tls")
    p = postgres_node.paths(state)
    postgres_node.enable_tls(p, postgres_node.bin_dir(), ca)
    postgres_node.wait_tls(p, ca.cert)
    return ca.cert, round(time.monotonic() - t0, 2)


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
        stopped += [f"kafka node {n}" for n in kafka_cluster.local(state).stop()]
        if kafka_secure.stop(kafka_secure.paths(state)):
            stopped.append("kafka-secure")
        if postgres_node.stop(postgres_node.paths(state)):
            stopped.append("postgres")
    return stopped
