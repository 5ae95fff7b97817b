"""Fail fast, in one line, when Kafka or Postgres is not where the configuration says.

Every command that needs the broker or the database calls these first, so a wrong
KAFKA_BOOTSTRAP_SERVERS, Kafka credential or CA, or DATABASE_URL gives `UserFacingError`
naming the setting within the timeout, instead of a client library retrying forever.
`check_kafka_access` then asks the broker what this principal may do with the topics and the
group the service is about to use, so a service given another service's credentials stops with
one line before it reads or writes anything.
"""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Iterable
from typing import Any

from services.runtime.errors import KafkaRefused, UserFacingError
from services.runtime.kafka_client import KafkaClient, as_client

log = logging.getLogger("incident_memory.checks")
_QUIET = logging.getLogger("incident_memory.checks.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
_QUIET.setLevel(logging.CRITICAL)


def redact_dsn(dsn: str) -> str:
    """The DSN with its password replaced by ***, safe to print."""
    dsn = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def _passwords(dsn: str) -> list[str]:
    found = re.findall(r"://[^:/@]*:([^@]*)@", dsn) + re.findall(r"password\s*=\s*(\S+)", dsn)
    return [p for p in found if p]


def pg_error_text(exc: BaseException, dsn: str) -> str:
    """A Postgres error in one line, safe to print: the DSN's password never appears in it, in any
    spelling the error might quote it (as given, or percent-decoded)."""
    from urllib.parse import unquote

    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    for secret in _passwords(dsn):
        for spelling in {secret, unquote(secret)}:
            text = text.replace(spelling, "***")
    return f"{type(exc).__name__}: {redact_dsn(text)}"


def _hosts(bootstrap: str) -> list[tuple[str, int]]:
    hosts = []
    for item in bootstrap.split(","):
        item = item.strip().removeprefix("PLAINTEXT://").removeprefix("kafka://")
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise UserFacingError(f"KAFKA_BOOTSTRAP_SERVERS={bootstrap!r} is not a list of host:port")
        hosts.append((host.strip("[]"), int(port)))
    return hosts


def check_kafka(kafka: KafkaClient | str, timeout: float = 10.0) -> int:
    """Raise UserFacingError unless a broker answers a metadata request. Returns the broker count.

    A refused password or a broker certificate the CA does not sign ends the wait at once: the
    client library would otherwise retry them forever."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    client = as_client(kafka)
    bootstrap = client.bootstrap_servers
    where = f"KAFKA_BOOTSTRAP_SERVERS={bootstrap}"
    deadline = time.monotonic() + timeout
    errors = []
    for host, port in _hosts(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=max(0.5, min(5.0, timeout))):
                break
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    else:
        raise UserFacingError(f"Kafka is not reachable at {where} ({'; '.join(errors)})")
    fatal: list[Any] = []

    def on_error(err: Any) -> None:
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or "SSL handshake failed" in err.str():
            fatal.append(err)

    config: dict[str, object] = {**client.librdkafka(), "log_level": 0, "error_cb": on_error}
    admin = AdminClient(config)  # type: ignore[arg-type]
    metadata = None
    while metadata is None:
        try:
            metadata = admin.list_topics(timeout=max(0.1, min(0.5, deadline - time.monotonic())))
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb: how librdkafka reports a refused login or handshake
            if fatal:
                break
            if time.monotonic() >= deadline:
                raise UserFacingError(
                    f"Kafka at {where} did not answer a metadata request: {exc.args[0]}"
                ) from None
    if fatal or metadata is None:
        raise KafkaRefused(_refusal(client, fatal[0]))
    if not metadata.brokers:
        raise UserFacingError(f"Kafka at {where} reports no brokers")
    return len(metadata.brokers)


def _refusal(client: KafkaClient, err: Any) -> str:
    """The one line for an authentication or TLS failure, naming the setting to look at."""
    from confluent_kafka import KafkaError

    s = client.security
    reason = re.sub(r"^\S+://\S+: | \(after \d+ms in state \w+\)$", "", " ".join(err.str().split()))
    if err.code() == KafkaError._AUTHENTICATION and "SSL" not in reason:
        return (
            f"Kafka at {client.bootstrap_servers} refused the {s.mechanism} credentials of user "
            f"{s.username!r} ({client.source}; password ***): {reason}"
        )
    ca = s.ca_file or ("ssl.truststore.certificates" if s.ca_pem else "the system's CAs")
    return (
        f"TLS with Kafka at {client.bootstrap_servers} failed ({client.source}; CA {ca}, hostname "
        f"{'checked' if s.check_hostname else 'not checked'}): {reason}"
    )


def check_kafka_access(
    kafka: KafkaClient | str,
    *,
    reads: Iterable[str] = (),
    writes: Iterable[str] = (),
    group: str | None = None,
    service: str = "this service",
    timeout: float = 10.0,
) -> None:
    """Raise UserFacingError unless the principal may READ `reads`, WRITE `writes` and join `group`.

    Asks the broker (DescribeTopics / DescribeGroups with authorized operations), so nothing is
    read or written first. A broker without an authorizer reports no operations: nothing to check."""
    client = as_client(kafka)
    reads, writes = tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes))
    who = f"user {client.principal!r}" if client.principal else "this client"
    # Silenced by log_level, not by a Python `logger`: an AdminClient with a logger crashes the process
    # (SIGSEGV, confluent-kafka 2.16.1) when an admin request fails and librdkafka logs it from its
    # background thread, which a group coordinator still loading on a fresh broker does.
    quiet: dict[str, Any] = {**client.librdkafka(), "log_level": 0}
    needed = {name: set[str]() for name in (*reads, *writes)}
    for name in reads:
        needed[name].add("READ")
    for name in writes:
        needed[name].add("WRITE")
    denied = _topics_denied(quiet, needed, timeout) if needed else []
    if group is not None and reads and not denied:  # a principal refused its topics is refused already
        denied += _group_denied(quiet, group, reads[0], timeout)
    if not denied:
        log.info("kafka access checked", extra={"service": service, "kafka": client.describe()})
        return
    raise KafkaRefused(
        f"Kafka refuses {who} ({client.source}) what {service} needs: {'; '.join(denied)}. "
        "Is this the service's own principal? Its ACLs are in deploy/README.md"
    )


def _topics_denied(quiet: dict[str, Any], needed: dict[str, set[str]], timeout: float) -> list[str]:
    """What the broker's authorized operations refuse of `needed` (topic -> READ/WRITE), one line each."""
    from confluent_kafka import KafkaError, KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(quiet)  # held while its futures resolve: a dropped client cancels them
    futures = admin.describe_topics(
        TopicCollection(list(needed)), request_timeout=timeout, include_authorized_operations=True
    )
    denied: list[str] = []
    for name, future in futures.items():
        try:
            allowed = future.result(timeout=timeout).authorized_operations
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                denied.append(f"{'/'.join(sorted(needed[name]))} on topic {name}")
            elif code != KafkaError.UNKNOWN_TOPIC_OR_PART:  # missing: the caller says so
                denied.append(f"topic {name}: {exc.args[0].str()}")
            continue
        except TimeoutError:
            log.warning("topic access not checked", extra={"topic": name, "error": "timed out"})
            continue
        names = set() if allowed is None else {op.name for op in allowed}
        if allowed is None or "ALL" in names:
            continue
        missing = sorted(needed[name] - names)
        if missing:
            denied.append(f"{'/'.join(missing)} on topic {name}")
    return denied


def _group_denied(quiet: dict[str, Any], group: str, topic: str, timeout: float) -> list[str]:
    """What the consumer asks first (OffsetFetch), through a consumer. An answer proves the group may
    be used. No answer in time is not a refusal, only a warning: librdkafka answers a group this
    principal may not use the same way it answers a coordinator still loading (it times out). The
    admin API would tell them apart, but its ListConsumerGroupOffsets crashed the process
    (SIGSEGV, confluent-kafka 2.16.1) on a fresh broker. Each service's topic ACLs differ from every
    other's, so another service's principal is refused by its topics in any case."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    probe = Consumer({**quiet, "group.id": group, "enable.auto.commit": False})
    try:
        probe.committed([TopicPartition(topic, 0)], timeout=min(timeout, 5.0))
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            return [f"READ on group {group}"]
        log.warning(
            "group not checked: no answer (its coordinator is loading, or this principal may not use it)",
            extra={"group": group, "error": exc.args[0].str()},
        )
    finally:
        probe.close()
    return []


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
