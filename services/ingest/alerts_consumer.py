"""The Kafka-native way in: Alertmanager JSON already flowing on a user's own topic.

Each message becomes the same events as a POST /alertmanager (no bearer token: the topic's
ACLs are the authentication). A message that does not map goes to the DLQ with its reason, and
so does one too big to become events (over the HTTP body limit, or an event over the producer's
message limit): a compressed batch can carry a record far over 1 MiB, and retrying it would
block its partition forever.
Offsets are committed only after every event (or dead letter) of the batch was acked, so a
crash or a broker outage replays the batch instead of losing it; the deterministic ids make
the replay harmless.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from pydantic import ValidationError

from services.ingest.alerts import Window, map_webhook
from services.ingest.config import MAX_BODY_BYTES
from services.ingest.directory import GroupDirectory
from services.ingest.emitter import Emitter
from services.ingest.planned import Planned, parse_json_object
from services.ingest.producer import Delivery, ProduceError
from services.ingest.rejections import Rejected
from services.runtime.kafka import consumer_config, dead_letter
from services.runtime.kafka_client import KafkaClient
from services.runtime.logs import about

log = logging.getLogger("incident_memory.ingest.alerts_topic")

DEFAULT_GROUP = "incident-memory-ingest-alerts"


@dataclass(frozen=True)
class AlertsTopicConfig:
    topic: str
    group: str = DEFAULT_GROUP
    batch: int = 100
    ack_timeout_s: float = 30.0
    backoff_s: float = 1.0
    max_bytes: int = MAX_BODY_BYTES  # the same limit as a POST /alertmanager body (413 there)
    overrides: dict[str, Any] = field(default_factory=dict)


class AlertsTopicConsumer:
    def __init__(
        self,
        config: AlertsTopicConfig,
        emitter: Emitter,
        kafka: KafkaClient | str,
        window: Window,
        groups: GroupDirectory | None = None,
    ) -> None:
        self.config = config
        self.emitter = emitter
        self.window = window
        self.groups = groups  # None: stateless threads (each from its notification's earliest startsAt)
        self._consumer_config = consumer_config(kafka, config.group, **config.overrides)

    def run(self, stop: threading.Event) -> None:
        """Consume until `stop` is set; a worker for `build_app`."""
        consumer = Consumer(self._consumer_config)
        consumer.subscribe([self.config.topic])
        try:
            while not stop.is_set():
                messages = consumer.consume(num_messages=self.config.batch, timeout=0.5)
                batch = [m for m in messages if m.error() is None]
                for m in messages:
                    if m.error() is not None:
                        log.warning("consumer error", extra=about(None, None, error=str(m.error())))
                if batch and not self._handle(consumer, batch):
                    stop.wait(self.config.backoff_s)
        finally:
            consumer.close()

    def _handle(self, consumer: Consumer, batch: list[Message]) -> bool:
        """Produce the batch's events, wait for every ack, then commit. False (and rewound) on failure."""
        pending: list[tuple[list[Planned] | None, float, list[Delivery]]] = []
        try:
            for message in batch:
                pending.append(self._submit(message))
            for _, _, futures in pending:
                for future in futures:
                    future.result(timeout=self.config.ack_timeout_s)
        except (ProduceError, concurrent.futures.TimeoutError) as exc:
            log.warning("broker did not ack; rewinding", extra=about(None, None, detail=str(exc)))
            self._rewind(consumer, batch)
            return False
        for planned, started, _ in pending:
            if planned is not None:
                self.emitter.acked(planned, started, "alerts_topic")
        offsets: dict[tuple[str, int], int] = {}
        for message in batch:
            key = (message.topic() or "", message.partition() or 0)
            offsets[key] = max(offsets.get(key, -1), (message.offset() or 0) + 1)
        try:
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
            )
        except KafkaException as exc:  # the events are acked; a replay after this re-produces the same ids
            log.warning("offset commit failed", extra=about(None, None, detail=str(exc)))
        return True

    def _submit(self, message: Message) -> tuple[list[Planned] | None, float, list[Delivery]]:
        """Hand one message's events (or its dead letter: planned None) to the producer."""
        value = message.value() or b""
        try:
            if len(value) > self.config.max_bytes:
                raise Rejected(413, "body_too_large", f"{len(value)} bytes > limit {self.config.max_bytes}")
            known = self.groups.known if self.groups else None
            group = map_webhook(parse_json_object(value), self.window, known)
            records = self.emitter.encode(group.planned)  # Rejected (dead letter) when too large
            if self.groups:  # before the ack: the batch's next notification of this group must see it
                self.groups.decided(group)
            return group.planned, time.perf_counter(), self.emitter.submit(records)
        except ProduceError as exc:
            if "MSG_SIZE_TOO_LARGE" not in str(exc):
                raise  # transient (queue full, broker away): the batch is rewound and retried
            # Permanent: AlertReceived (first planned, it carries the payload) was refused, nothing was queued.
            return self._dead_letter(message, value, Rejected(413, "event_too_large", str(exc)[:300]))
        except (Rejected, ValidationError) as exc:
            return self._dead_letter(message, value, exc)
        except Exception as exc:  # a mapping bug must cost one message, not the consumer thread
            log.exception("unexpected mapping failure", extra=about(None, None, offset=message.offset()))
            return self._dead_letter(message, value, Rejected(400, "mapping_failed", repr(exc)[:300]))

    def _dead_letter(
        self, message: Message, value: bytes, exc: Rejected | ValidationError
    ) -> tuple[None, float, list[Delivery]]:
        reason = str(exc) if isinstance(exc, Rejected) else f"invalid_event: {exc.errors()[:1]}"
        letter = dead_letter(
            reason,
            stage="ingest.alerts_topic",
            payload=value,
            source_topic=message.topic() or self.config.topic,
            partition=message.partition(),
            offset=message.offset(),
            key=message.key(),
        )
        self.emitter.metrics.dead_letters.labels(
            exc.reason if isinstance(exc, Rejected) else "invalid_event"
        ).inc()
        log.info("dead letter", extra=about(None, None, reason=reason, offset=message.offset()))
        key = (letter.key or "").encode()
        dlq = self.emitter.config.dlq_topic
        return None, 0.0, self.emitter.producer.produce([(dlq, key, letter.to_bytes())])

    def _rewind(self, consumer: Consumer, batch: list[Message]) -> None:
        first: dict[tuple[str, int], int] = {}
        for message in batch:
            key = (message.topic() or "", message.partition() or 0)
            first[key] = min(first.get(key, 1 << 62), message.offset() or 0)
        for (topic, partition), offset in first.items():
            try:
                consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException as exc:  # partition revoked meanwhile: its new owner starts at the commit
                log.warning("seek failed", extra=about(None, None, detail=str(exc)))
