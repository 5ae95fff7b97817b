"""Prometheus metrics of the ingest service, on a registry of its own (one per app, so tests isolate).

Every label value comes from a closed set (`closed`): a value taken from input (an event type, a
Slack disconnect reason) would let anyone grow /metrics without bound, one series per value.
"""

from __future__ import annotations

from collections.abc import Collection

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from services.runtime.health import HEALTHY_METRIC
from services.runtime.metric_families import Families


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        f = Families(self.registry)
        self.requests = f.counter(
            "ingest_requests", "HTTP requests by endpoint and status", "endpoint", "status"
        )
        self.rejections = f.counter("ingest_rejections", "Requests refused, by reason", "endpoint", "reason")
        self.ignored = f.counter(
            "ingest_ignored", "Valid input deliberately not recorded, by reason", "reason"
        )
        self.foreign = f.counter(
            "ingest_foreign_events",
            "Slack events of another workspace or app, dropped with a 200 (field: team_id or api_app_id)",
            "field",
        )
        self.duplicates = f.counter("ingest_duplicates", "Slack retries dropped by event_id")
        self.produce_attempts = f.counter("ingest_produce_attempts", "Events handed to the producer", "topic")
        self.produced = f.counter("ingest_events_produced", "Events acked by the broker", "topic", "type")
        self.produce_latency = f.histogram(
            "ingest_produce_latency_seconds",
            "From produce to the broker's ack of every event of a request",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
        )
        self.produce_failures = f.counter(
            "ingest_produce_failures", "Requests answered 503: the broker did not ack", "reason"
        )
        self.dead_letters = f.counter(
            "ingest_dead_letters", "Bad messages of the alerts topic sent to the DLQ", "reason"
        )

        # Socket Mode (only with --socket-mode; its rejections count under endpoint="slack_socket")
        self.socket_envelopes = f.counter(
            "ingest_socket_envelopes",
            "Socket Mode envelopes by type and outcome; all but outcome=unavailable are acked",
            "type",
            "outcome",
        )
        self.socket_connections = f.counter(
            "ingest_socket_connections", "Socket Mode connections opened (hello frames received)"
        )
        self.socket_disconnects = f.counter(
            "ingest_socket_disconnects", "Socket Mode disconnect frames Slack sent, by reason", "reason"
        )
        self.socket_connected = f.gauge("ingest_socket_connected", "1 while a Socket Mode websocket is open")
        # the other services' gauge (services/runtime/health.py), set at each scrape from /healthz's own
        # check (a broker answered a metadata request), so one alert covers every service
        ProcessCollector(registry=self.registry)  # process_start_time_seconds: IncidentMemoryRestartLoop
        self.healthy = f.gauge(
            HEALTHY_METRIC, "1 while /healthz answers 200 (a Kafka broker answers), else 0"
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


def closed(value: object, allowed: Collection[str]) -> str:
    """`value` when it is one of `allowed`, else "other": a label never takes an unbounded value."""
    return value if isinstance(value, str) and value in allowed else "other"


def reason_label(reason: str) -> str:
    """A reason's label: the constant before its first `:` (`subtype_ignored:<subtype>` -> `subtype_ignored`).
    Reasons are written by our code; what follows the colon may come from input."""
    return reason.partition(":")[0][:48] or "other"
