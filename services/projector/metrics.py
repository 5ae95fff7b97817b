"""Prometheus metrics of one projector, in its own registry (several can live in one test process)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, ProcessCollector

from services.runtime.health import Heartbeat, serve_metrics_and_health
from services.runtime.metric_families import Families

if TYPE_CHECKING:
    from services.projector.decoding import Decoded
    from services.projector.plan import WriteOutcome

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600)
BATCH_BUCKETS = (1, 10, 50, 100, 250, 500, 1000, 2000, 5000, 10000)
SAMPLES_PER_BATCH = 64  # latency samples per batch: enough for the histogram, cheap at 20k events/s


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        f = Families(self.registry)
        self.events = f.counter("projector_events_projected", "Events committed into the projection")
        self.dead_letters = f.counter("projector_dead_letters", "Events sent to the dead-letter topic")
        self.rounds = f.counter("projector_rounds_committed", "Rounds published into agent_messages")
        self.retries = f.counter("projector_retries", "Batches retried after Postgres/Kafka failures")
        self.batch_size = f.histogram(
            "projector_batch_size", "Events per committed transaction", buckets=BATCH_BUCKETS
        )
        self.latency = f.histogram(
            "projector_latency_seconds",
            "Time from event_time (source=event) or from consume (source=consume) to commit",
            "source",
            buckets=LATENCY_BUCKETS,
        )
        self.heartbeat = Heartbeat()
        self.lag = f.gauge("projector_consumer_lag", "High watermark minus position", "partition")
        ProcessCollector(registry=self.registry)  # process_start_time_seconds: IncidentMemoryRestartLoop

    def serve(self, port: int) -> None:
        """`/metrics` and `/healthz` (503 until the loop runs, or when it is stuck) on `port`."""
        serve_metrics_and_health(port, self.heartbeat, self.registry)

    def observe_commit(self, decoded: Sequence[Decoded], outcome: WriteOutcome, now: float) -> None:
        self.events.inc(outcome.events)
        self.dead_letters.inc(outcome.dead_letters)
        self.rounds.inc(outcome.rounds_committed)
        self.batch_size.observe(len(decoded))
        step = max(1, len(decoded) // SAMPLES_PER_BATCH)
        for d in decoded[::step]:
            self.latency.labels("consume").observe(max(0.0, now - d.incoming.received))
            if d.event_time is not None:
                self.latency.labels("event").observe(max(0.0, now - d.event_time))

    def set_lag(self, lags: dict[int, int]) -> None:
        for partition, lag in lags.items():
            self.lag.labels(str(partition)).set(lag)

    def value(self, name: str, **labels: Any) -> float:
        """A sample's current value (tests)."""
        found = self.registry.get_sample_value(name, labels or None)
        return 0.0 if found is None else found
