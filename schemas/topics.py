"""The Kafka topics of the pipeline, their partition counts and configs, and their creation.

Events are retained forever (retention.ms=-1, retention.bytes=-1): the topics
are the system of record, and replays re-derive Postgres from them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

EVENTS = "incident.events"
COMPACTED = "incident.compacted"
WAKE = "incident.wake"
DLQ = "incident.dlq"

RETAIN_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}

# A compacted event carries its raw beside the compact, so it is larger than the tool result it came
# from, and a tool result may itself pass the broker's default 1 MiB as a compressed batch. The
# compacted topic takes records up to this size; a larger one is dead-lettered, never dropped.
MAX_COMPACTED_RECORD_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=lambda: dict(RETAIN_FOREVER))


TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(EVENTS, 8),
    TopicSpec(COMPACTED, 8, {**RETAIN_FOREVER, "max.message.bytes": str(MAX_COMPACTED_RECORD_BYTES)}),
    TopicSpec(WAKE, 4),
    TopicSpec(DLQ, 1),
)


def ensure_topics(
    bootstrap_servers: str,
    specs: tuple[TopicSpec, ...] = TOPICS,
    timeout: float = 30.0,
    replication_factor: int = 1,
) -> list[str]:
    """Create any missing topic; existing ones are left as they are. Returns the names created.

    The local stack has one broker (replication 1); a production cluster wants 3.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    existing = set(admin.list_topics(timeout=timeout).topics)
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [
            NewTopic(
                s.name, num_partitions=s.partitions, replication_factor=replication_factor, config=s.config
            )
            for s in missing
        ],
        operation_timeout=timeout,
    )
    created = []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout)
            created.append(name)
        except Exception as exc:  # a concurrent creator is fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    # The controller has accepted them; the broker's metadata may lag behind by a moment (seen on a
    # broker started seconds before: a compactor started right after the demo created its topics
    # was told they did not exist). Return only once each is visible with all its partitions.
    for spec in missing:
        visible = partitions_once_visible(admin, spec.name, timeout)
        if visible != spec.partitions:
            raise RuntimeError(
                f"topic {spec.name!r} was created but the broker shows {visible} of its "
                f"{spec.partitions} partitions after {timeout:g}s"
            )
    return created


def partitions_once_visible(admin: Any, topic: str, timeout: float = 30.0) -> int:
    """A topic's partition count, waiting out the moment after its creation when the broker's
    metadata does not list it yet, or lists it with no partitions (seen on a fresh broker under load)."""
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        count = len(meta.partitions) if meta is not None and meta.error is None else 0
        if count or time.monotonic() >= deadline:
            return count
        time.sleep(0.2)


def record_limit(bootstrap_servers: str, topic: str, timeout: float = 30.0) -> int:
    """The topic's `max.message.bytes`: the largest record batch the broker accepts for it."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout=timeout)
    return int(configs["max.message.bytes"].value)
