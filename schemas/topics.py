"""The Kafka topics of the pipeline, their partition counts and configs, and their creation.

Events are retained forever (retention.ms=-1, retention.bytes=-1): the topics
are the system of record, and replays re-derive Postgres from them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EVENTS = "incident.events"
COMPACTED = "incident.compacted"
WAKE = "incident.wake"
DLQ = "incident.dlq"
# The compactor's changelog of recorded selector choices (invariant 8). Not derived from its app id:
# every compactor reads the same one, so a replay or a re-derivation under a new consumer group
# reuses the recorded choices instead of asking a model again. Created by the compactor itself.
SELECTIONS = "incident-memory-compactor-selections"

RETAIN_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}

# A compacted event carries its raw beside the compact, so it is larger than the tool result it came
# from, and a tool result may itself pass the broker's default 1 MiB as a compressed batch. The
# compacted topic takes records up to this size; a larger one is dead-lettered, never dropped.
MAX_COMPACTED_RECORD_BYTES = 8 * 1024 * 1024

# The largest event (its canonical JSON) the pipeline takes onto incident.events and incident.wake:
# ingest's HTTP body limit, the largest event ingest produces (a larger one is a 413, never a 503), and,
# with RECORD_OVERHEAD_BYTES for the record and batch headers, the producer's message.max.bytes and the
# topics' max.message.bytes. One number, so what passes the first check is never refused later for size.
MAX_EVENT_BYTES = 1_000_000
RECORD_OVERHEAD_BYTES = 64 * 1024
EVENT_RECORD_LIMIT = MAX_EVENT_BYTES + RECORD_OVERHEAD_BYTES


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=lambda: dict(RETAIN_FOREVER))


TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(EVENTS, 8, {**RETAIN_FOREVER, "max.message.bytes": str(EVENT_RECORD_LIMIT)}),
    TopicSpec(COMPACTED, 8, {**RETAIN_FOREVER, "max.message.bytes": str(MAX_COMPACTED_RECORD_BYTES)}),
    TopicSpec(WAKE, 4, {**RETAIN_FOREVER, "max.message.bytes": str(EVENT_RECORD_LIMIT)}),
    TopicSpec(DLQ, 1),
)


def admin(kafka: str | Mapping[str, Any]) -> Any:
    """An AdminClient from a bootstrap string or a full librdkafka config (security included)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka} if isinstance(kafka, str) else dict(kafka))


def ensure_topics(
    bootstrap_servers: str | Mapping[str, Any],
    specs: tuple[TopicSpec, ...] = TOPICS,
    timeout: float = 30.0,
    replication_factor: int = 1,
    min_insync_replicas: int | None = None,
) -> list[str]:
    """Create any missing topic; existing ones are left as they are. Returns the names created.

    The local stack has one broker (replication 1); a production cluster wants 3, with
    `min_insync_replicas=2` (the topic config min.insync.replicas; None: the broker's default), so an
    acks=all write survives the loss of any one broker. -1 is the broker's default.replication.factor.
    """
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap_servers)
    existing = set(client.list_topics(timeout=timeout).topics)
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    futures = client.create_topics(
        [
            NewTopic(
                s.name,
                num_partitions=s.partitions,
                replication_factor=replication_factor,
                config=s.config
                if min_insync_replicas is None
                else {**s.config, "min.insync.replicas": str(min_insync_replicas)},
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
        visible = partitions_once_visible(client, spec.name, timeout)
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


def record_limit(kafka: str | Mapping[str, Any], topic: str, timeout: float = 30.0) -> int:
    """The topic's `max.message.bytes`: the largest record batch the broker accepts for it."""
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(kafka)  # kept alive until the future is done
    configs = client.describe_configs([resource], request_timeout=timeout)[resource].result(timeout=timeout)
    return int(configs["max.message.bytes"].value)
