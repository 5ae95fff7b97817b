"""How a batch is cut from what the Kafka client has buffered (both sources use it)."""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

log = logging.getLogger("projector")

DEFAULT_BATCH_BYTES = 32 * 1024 * 1024
DRAIN_STEP = 500  # records per drain call: a batch passes max_bytes by less than one step


def take_batch(
    consumer: Consumer, size: int, timeout: float, max_bytes: int = DEFAULT_BATCH_BYTES
) -> list[Message]:
    """Block for the first record only, then drain what is already buffered: low latency, big batches.

    A batch stops at `size` records or once its values pass `max_bytes` (so a backlog of large
    tool results does not hold tens of thousands of raws in memory at once, twice over).
    """
    messages = consumer.consume(num_messages=min(size, DRAIN_STEP), timeout=0)
    if not messages:
        messages = consumer.consume(num_messages=1, timeout=timeout)
    held = sum(len(m.value() or b"") for m in messages)
    while messages and len(messages) < size and held < max_bytes:
        more = consumer.consume(num_messages=min(size - len(messages), DRAIN_STEP), timeout=0)
        if not more:
            break
        messages += more
        held += sum(len(m.value() or b"") for m in more)
    return messages


def usable(messages: list[Message]) -> list[Message]:
    """Records with data; end-of-partition notices are dropped and real errors raised."""
    kept = []
    for m in messages:
        err = m.error()
        if err is None:
            kept.append(m)
        elif err.code() == KafkaError._PARTITION_EOF:
            continue
        elif err.fatal():
            raise KafkaException(err)
        else:
            log.warning("consumer error: %s", err)
    return kept
