"""confluent-kafka client configs and the dead-letter path, shared by every service."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Producer

from schemas import topics
from schemas.events import DeadLetter

DLQ_PAYLOAD_LIMIT = 64 * 1024  # bytes of the offending payload kept in the dead letter


def producer_config(bootstrap_servers: str, **overrides: Any) -> dict[str, Any]:
    """An idempotent producer: acks=all, retries forever, ordering kept per partition."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "lz4",
    }
    config.update(overrides)
    return config


def consumer_config(bootstrap_servers: str, group_id: str, **overrides: Any) -> dict[str, Any]:
    """A consumer that commits nothing by itself and sees only committed transactions."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
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
