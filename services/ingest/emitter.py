"""Planned events -> the broker, acked: the one produce path of HTTP and the alerts consumer."""

from __future__ import annotations

import logging
import time

from schemas import topics
from services.ingest.at_rest import redact_at_rest
from services.ingest.config import IngestConfig
from services.ingest.metrics import Metrics
from services.ingest.planned import Planned
from services.ingest.producer import AckedProducer, Delivery
from services.ingest.rejections import Rejected
from services.runtime.logs import about

log = logging.getLogger("incident_memory.ingest")

Record = tuple[str, bytes, bytes]  # (topic, key, value)


class Emitter:
    def __init__(self, config: IngestConfig, producer: AckedProducer, metrics: Metrics) -> None:
        self.config = config
        self.producer = producer
        self.metrics = metrics
        self._topics = {"events": config.events_topic, "wake": config.wake_topic}

    def encode(self, planned: list[Planned]) -> list[Record]:
        """Each event as (topic, key, value), or Rejected (4xx) when one cannot be: larger than
        MAX_EVENT_BYTES (413: permanent, so Slack and Alertmanager do not retry it forever), or not
        encodable at all (a lone surrogate, nesting deeper than the serializer goes)."""
        records = []
        for p in planned:
            if self.config.redact_at_ingest:
                p = Planned(p.destination, redact_at_rest(p.event))
            try:
                value = p.event.to_bytes()
            except (ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
                raise Rejected(400, "unencodable_event", f"{type(exc).__name__}: {exc}"[:300]) from None
            if len(value) > topics.MAX_EVENT_BYTES:
                raise Rejected(
                    413,
                    "event_too_large",
                    f"{getattr(p.event, 'type', 'event')} {p.event.message_id[:80]} would be {len(value):,} bytes > limit "
                    f"{topics.MAX_EVENT_BYTES:,}",
                )
            records.append((self._topics[p.destination], p.event.key(), value))
        return records

    def submit(self, items: list[Record]) -> list[Delivery]:
        """Hand encoded events to the producer. Raises ProduceError."""
        for topic, _, _ in items:
            self.metrics.produce_attempts.labels(topic).inc()
        return self.producer.produce(items)

    def acked(self, planned: list[Planned], started: float, source: str) -> None:
        """Count and log a request whose every event the broker acked."""
        self.metrics.produce_latency.observe(time.perf_counter() - started)
        for p in planned:
            event = p.event
            self.metrics.produced.labels(self._topics[p.destination], getattr(event, "type", "?")).inc()
            log.info(
                "produced", extra=about(event.thread_ts, event.message_id, source=source, topic=p.destination)
            )
