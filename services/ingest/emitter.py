"""Planned events -> the broker, acked: the one produce path of HTTP and the alerts consumer."""

from __future__ import annotations

import logging
import time

from services.ingest.config import IngestConfig
from services.ingest.metrics import Metrics
from services.ingest.planned import Planned
from services.ingest.producer import AckedProducer, Delivery
from services.runtime.logs import about

log = logging.getLogger("incident_memory.ingest")


class Emitter:
    def __init__(self, config: IngestConfig, producer: AckedProducer, metrics: Metrics) -> None:
        self.config = config
        self.producer = producer
        self.metrics = metrics
        self._topics = {"events": config.events_topic, "wake": config.wake_topic}

    def submit(self, planned: list[Planned]) -> list[Delivery]:
        """Hand every event to the producer, keyed by thread_ts. Raises ProduceError."""
        items = [(self._topics[p.destination], p.event.key(), p.event.to_bytes()) for p in planned]
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
