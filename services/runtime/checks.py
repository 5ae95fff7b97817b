"""Fail fast, in one line, when Kafka or Postgres is not where the configuration says.

Every command that needs the broker or the database calls these first, so a wrong
KAFKA_BOOTSTRAP_SERVERS or DATABASE_URL gives `UserFacingError` naming the setting
within the timeout, instead of a client library retrying forever.
"""

from __future__ import annotations

import logging
import re
import socket
import time

from services.runtime.errors import UserFacingError

_QUIET = logging.getLogger("incident_memory.checks.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
_QUIET.setLevel(logging.CRITICAL)


def redact_dsn(dsn: str) -> str:
    """The DSN with its password replaced by ***, safe to print."""
    dsn = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def _hosts(bootstrap: str) -> list[tuple[str, int]]:
    hosts = []
    for item in bootstrap.split(","):
        item = item.strip().removeprefix("PLAINTEXT://").removeprefix("kafka://")
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise UserFacingError(f"KAFKA_BOOTSTRAP_SERVERS={bootstrap!r} is not a list of host:port")
        hosts.append((host.strip("[]"), int(port)))
    return hosts


def check_kafka(bootstrap: str, timeout: float = 10.0) -> int:
    """Raise UserFacingError unless a broker at `bootstrap` answers a metadata request. Returns the broker count."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    errors = []
    for host, port in _hosts(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=max(0.5, min(5.0, timeout))):
                break
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    else:
        raise UserFacingError(
            f"Kafka is not reachable at KAFKA_BOOTSTRAP_SERVERS={bootstrap} ({'; '.join(errors)})"
        )
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "logger": _QUIET}
    admin = AdminClient(config)  # type: ignore[arg-type]
    try:
        metadata = admin.list_topics(timeout=max(0.5, deadline - time.monotonic()))
    except KafkaException as exc:
        raise UserFacingError(
            f"Kafka at KAFKA_BOOTSTRAP_SERVERS={bootstrap} did not answer a metadata request: {exc.args[0]}"
        ) from None
    if not metadata.brokers:
        raise UserFacingError(f"Kafka at KAFKA_BOOTSTRAP_SERVERS={bootstrap} reports no brokers")
    return len(metadata.brokers)


def check_postgres(dsn: str, timeout: float = 10.0) -> str:
    """Raise UserFacingError unless `dsn` connects and answers a query. Returns the server version."""
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=max(1, int(timeout)), autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except (psycopg.Error, ValueError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise UserFacingError(
            f"PostgreSQL is not reachable at DATABASE_URL={redact_dsn(dsn)}: {reason}"
        ) from None
    return str(row[0]) if row else "?"
