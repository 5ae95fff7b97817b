"""confluent-kafka client configs and the dead-letter path, shared by every service.

Each config starts from the one `KafkaClient` (bootstrap + security, services.runtime.kafka_client);
a bare bootstrap string, as development tools and tests pass, is a PLAINTEXT client.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Producer

from schemas import topics
from schemas.events import DeadLetter
from services.runtime.kafka_client import KafkaClient, as_client

DLQ_PAYLOAD_LIMIT = 64 * 1024  # bytes of the offending payload kept in the dead letter


def admin_config(kafka: KafkaClient | str, **overrides: Any) -> dict[str, Any]:
    """An admin client's config: the connection and security settings alone."""
    return {**as_client(kafka).librdkafka(), **overrides}


def producer_config(kafka: KafkaClient | str, **overrides: Any) -> dict[str, Any]:
    """An idempotent producer: acks=all, retries forever, ordering kept per partition."""
    config: dict[str, Any] = {
        **as_client(kafka).librdkafka(),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "lz4",
    }
    config.update(overrides)
    return config


def consumer_config(kafka: KafkaClient | str, group_id: str, **overrides: Any) -> dict[str, Any]:
    """A consumer that commits nothing by itself and sees only committed transactions."""
    config: dict[str, Any] = {
        **as_client(kafka).librdkafka(),
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": False,
    }
    config.update(overrides)
    return config


def dead_letter(
    reason: str,
    stage: str,
    payload: bytes | str | None,
    source_topic: str,
    partition: int | None = None,
    offset: int | None = None,
    key: bytes | str | None = None,
) -> DeadLetter:
    """Build the dead letter for one bad input, keeping (a bounded prefix of) the payload verbatim."""
    raw = payload if isinstance(payload, bytes) else (payload or "").encode()
    truncated = len(raw) > DLQ_PAYLOAD_LIMIT
    text = raw[:DLQ_PAYLOAD_LIMIT].decode("utf-8", errors="replace")
    key_text = key.decode("utf-8", errors="replace") if isinstance(key, bytes) else key
    return DeadLetter(
        reason=reason[:2000],
        stage=stage,
        source_topic=source_topic,
        partition=partition,
        offset=offset,
        key=key_text,
        payload=text,
        payload_truncated=truncated,
        event_time=datetime.now(UTC),
    )


def send_dead_letter(producer: Producer, letter: DeadLetter, topic: str = topics.DLQ) -> None:
    """Produce a dead letter (the caller flushes, or delivers it inside its transaction)."""
    producer.produce(topic, key=(letter.key or "").encode(), value=letter.to_bytes())
