"""The local stack's secured Kafka node (`incident-memory up --secure`): SASL_SSL, SCRAM users, ACLs.

The same jars and server.properties template as the plaintext node, beside it on its own ports and
data, with an overlay that makes it what production clusters are:
- one client listener, SASL_SSL with SCRAM-SHA-512/256, its certificate signed by the local CA
  (deploy/local/tls.py); the controller listener is TLS with client certificates (CN=broker), so
  nothing on it is anonymous;
- SCRAM users made at format time (`kafka-storage format --add-scram`): the admin, the broker
  itself, and one principal per service;
- `StandardAuthorizer`, no access without an ACL; each service's ACLs (`service_acls`) give it
  only its own topics, groups and transactional ids.
Each principal gets a client properties file (`clients/<user>.properties`, the Java form a
service reads through KAFKA_CLIENT_CONFIG). Passwords are random, kept 0600 in `users.json`.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.local import kafka_node, tls
from schemas import topics
from services.runtime import settings
from services.runtime.errors import UserFacingError
from services.runtime.kafka_client import KafkaClient

MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"
BROKER = "broker"
SERVICES = ("ingest", "compactor", "projector", "agent", "slack")
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class Names:
    """The topics and consumer groups one deployment of the pipeline uses (the defaults: `up`'s)."""

    events: str = topics.EVENTS
    compacted: str = topics.COMPACTED
    wake: str = topics.WAKE
    dlq: str = topics.DLQ
    alerts: str = "incident.alerts"  # ingest's --alerts-topic, when used
    selections: str = topics.SELECTIONS
    groups: Mapping[str, str] = field(
        default_factory=lambda: {
            "ingest": "incident-memory-ingest-alerts",
            "compactor": "incident-memory-compactor",  # faust's app id: its group and transactional ids
            "projector": "incident-memory-projector",  # and its replay's, <group>-replay
            "agent": "incident-memory-agent",
            "slack": "incident-memory-slack",
        }
    )


Grant = tuple[str, str, str, str]  # (resource type, name, pattern type, operation)


def service_acls(names: Names = Names()) -> dict[str, list[Grant]]:
    """Who may do what: every service only its own reads, writes, group and transactional ids.

    The producers are idempotent, which since Kafka 3.0 needs WRITE on a topic and nothing on the
    cluster. Groups and transactional ids are PREFIXED by the service's group name (the projector's
    replay group and faust's transactional ids extend it)."""

    def topic(name: str, *ops: str) -> list[Grant]:
        return [("TOPIC", name, "LITERAL", op) for op in ops]

    def group(service: str) -> list[Grant]:
        return [("GROUP", names.groups[service], "PREFIXED", "READ")]

    return {
        "ingest": [
            *topic(names.events, "WRITE"),
            *topic(names.wake, "WRITE"),
            *topic(names.dlq, "WRITE"),
            *topic(names.alerts, "READ"),
            *group("ingest"),
        ],
        "compactor": [
            *topic(names.events, "READ"),
            *topic(names.compacted, "WRITE", "DESCRIBE_CONFIGS"),  # its record limit, read at start
            *topic(names.dlq, "WRITE"),
            *topic(names.selections, "READ", "WRITE", "CREATE"),  # its changelog, made if missing
            *group("compactor"),
            ("TRANSACTIONAL_ID", names.groups["compactor"], "PREFIXED", "WRITE"),
        ],
        "projector": [*topic(names.compacted, "READ"), *topic(names.dlq, "WRITE"), *group("projector")],
        "agent": [
            *topic(names.wake, "READ"),
            *topic(names.events, "WRITE"),
            *topic(names.dlq, "WRITE"),
            *group("agent"),
        ],
        "slack": [*topic(names.events, "READ", "WRITE"), *group("slack")],
    }


@dataclass(frozen=True)
class SecureKafka:
    """Where the secured node is and how each principal reaches it."""

    root: Path
    port: int = settings.LOCAL_SECURE_KAFKA_PORT
    controller_port: int = settings.LOCAL_SECURE_KAFKA_CONTROLLER_PORT

    @property
    def paths(self) -> kafka_node.KafkaPaths:
        return kafka_node.KafkaPaths(self.root)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path:
        return self.root.parent / "tls" / "ca.pem"

    @property
    def users_file(self) -> Path:
        return self.root / "users.json"

    def client_file(self, user: str) -> Path:
        return self.root / "clients" / f"{user}.properties"

    def client(self, user: str = ADMIN, **overrides: str) -> KafkaClient:
        """The principal's client, read from its properties file as a service would read it."""
        return KafkaClient.from_env(self.bootstrap, {**self.env(user), **overrides})

    def env(self, user: str) -> dict[str, str]:
        """The environment a service runs with to be `user` on this node."""
        return {"KAFKA_BOOTSTRAP_SERVERS": self.bootstrap, "KAFKA_CLIENT_CONFIG": str(self.client_file(user))}


def paths(state: Path | None = None) -> SecureKafka:
    return SecureKafka((state or settings.state_dir()) / "kafka-secure")


def passwords(node: SecureKafka) -> dict[str, str]:
    """The users' passwords, made once (before the storage is formatted with them)."""
    if node.users_file.is_file():
        return dict(json.loads(node.users_file.read_text()))
    users = {user: secrets.token_urlsafe(24) for user in (ADMIN, BROKER, *SERVICES)}
    node.root.mkdir(parents=True, exist_ok=True)
    _write_private(node.users_file, json.dumps(users, indent=2) + "\n")
    return users


def overlay(node: SecureKafka, keystore: Path, broker_password: str) -> dict[str, str]:
    """The properties that secure the node (appended to the template; they win)."""
    jaas = f'{_SCRAM_MODULE} required username="{BROKER}" password="{_jaas_quote(broker_password)}";'
    return {
        "listeners": f"SASL_SSL://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{node.port}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(node.ca),
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{BROKER};User:{ADMIN}",
        "allow.everyone.if.no.acl.found": "false",
    }


def client_properties(node: SecureKafka, user: str, password: str) -> str:
    """A principal's client properties file, in the form the Java tools take with --command-config."""
    jaas = f'{_SCRAM_MODULE} required username="{user}" password="{_jaas_quote(password)}";'
    return (
        f"# {user} on the local secured Kafka node (written by `incident-memory up --secure`)\n"
        f"bootstrap.servers={node.bootstrap}\n"
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={MECHANISM}\n"
        f"sasl.jaas.config={jaas.replace(chr(92), chr(92) * 2)}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={node.ca}\n"
        "ssl.endpoint.identification.algorithm=https\n"
    )


def start(node: SecureKafka, timeout: float = 90.0) -> int:
    """Start the secured node (its users, certificates and client files first). Returns its pid."""
    users = passwords(node)
    ca = tls.ensure_ca(node.ca.parent)
    broker = tls.issue(ca, node.root / "certs", BROKER, client=True)
    for user, password in users.items():
        _write_private(node.client_file(user), client_properties(node, user, password))
    scram = [
        arg
        for user, password in users.items()
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256")
        for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")
    ]
    kafka_node.link_jars(node.paths)
    return kafka_node.start(
        node.paths,
        timeout,
        port=node.port,
        controller_port=node.controller_port,
        extra=overlay(node, broker.keystore, users[BROKER]),
        format_args=scram,
        client=node.client(ADMIN),
    )


def running_pid(node: SecureKafka) -> int | None:
    return kafka_node.running_pid(node.paths)


def stop(node: SecureKafka) -> bool:
    return kafka_node.stop(node.paths)


def grant(admin: KafkaClient, acls: Mapping[str, Iterable[Grant]], timeout: float = 30.0) -> int:
    """Create the ACLs (ALLOW, any host) for each service's principal. Idempotent. Returns the count."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [
        AclBinding(
            ResourceType[kind],
            name,
            ResourcePatternType[pattern],
            f"User:{user}",
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )
        for user, grants in acls.items()
        for kind, name, pattern, operation in grants
    ]
    config: dict[str, Any] = admin.librdkafka()
    client = AdminClient(config)  # kept alive until every future is done
    futures = client.create_acls(bindings, request_timeout=timeout)
    for binding, future in futures.items():
        try:
            future.result(timeout=timeout)
        except Exception as exc:
            raise UserFacingError(f"could not create the ACL {binding}: {exc}") from None
    return len(bindings)


def _jaas_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
