"""What the agent says, as events on incident.events: produced idempotently, acked before going on.

Every send waits for the broker's ack, so "the marker is acked" means the round is on
Kafka and the wake offset may be committed.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from schemas.events import EventBase
from services.runtime.kafka import producer_config
from services.runtime.kafka_client import KafkaClient
from services.runtime.logs import about

log = logging.getLogger("agent.emitter")


class EventEmitter:
    """A thread-safe idempotent producer of thread events, keyed by thread_ts."""

    def __init__(self, kafka: KafkaClient | str, topic: str, **overrides: Any) -> None:
        self.topic = topic
        self._producer = Producer(producer_config(kafka, **overrides))
        self._lock = threading.Lock()

    def send(self, *events: EventBase, timeout: float = 30.0) -> None:
        """Produce the events in order and block until every one is acked (raises otherwise)."""
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)

        with self._lock:
            for event in events:
                self._producer.produce(
                    self.topic, key=event.key(), value=event.to_bytes(), on_delivery=delivered
                )
                log.info("emitted", extra=about(event.thread_ts, event.message_id, type=type(event).__name__))
            left = self._producer.flush(timeout)
        if left or errors:
            raise KafkaException(errors[0] if errors else KafkaError(KafkaError._TIMED_OUT))

    def close(self) -> None:
        with self._lock:
            self._producer.flush(30)


def dead_letter_sender(emitter: EventEmitter, dlq_topic: str) -> Any:
    """A function that sends one dead letter on the emitter's producer and waits for its ack."""
    from services.runtime.kafka import send_dead_letter

    def send(letter: Any) -> None:
        with emitter._lock:
            send_dead_letter(emitter._producer, letter, topic=dlq_topic)
            emitter._producer.flush(30)

    return send
