"""Prometheus metrics of the ingest service, on a registry of its own (one per app, so tests isolate).

Every label value comes from a closed set (`closed`): a value taken from input (an event type, a
Slack disconnect reason) would let anyone grow /metrics without bound, one series per value.
"""

from __future__ import annotations

from collections.abc import Collection

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest

from services.runtime.health import HEALTHY_METRIC


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ingest_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.rejections = Counter(
            "ingest_rejections", "Requests refused, by reason", ["endpoint", "reason"], registry=self.registry
        )
        self.ignored = Counter(
            "ingest_ignored",
            "Valid input deliberately not recorded, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.foreign = Counter(
            "ingest_foreign_events",
            "Slack events of another workspace or app, dropped with a 200 (field: team_id or api_app_id)",
            ["field"],
            registry=self.registry,
        )
        self.duplicates = Counter(
            "ingest_duplicates", "Slack retries dropped by event_id", registry=self.registry
        )
        self.produce_attempts = Counter(
            "ingest_produce_attempts", "Events handed to the producer", ["topic"], registry=self.registry
        )
        self.produced = Counter(
            "ingest_events_produced", "Events acked by the broker", ["topic", "type"], registry=self.registry
        )
        self.produce_latency = Histogram(
            "ingest_produce_latency_seconds",
            "From produce to the broker's ack of every event of a request",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry,
        )
        self.produce_failures = Counter(
            "ingest_produce_failures",
            "Requests answered 503: the broker did not ack",
            ["reason"],
            registry=self.registry,
        )
        self.dead_letters = Counter(
            "ingest_dead_letters",
            "Bad messages of the alerts topic sent to the DLQ",
            ["reason"],
            registry=self.registry,
        )

        # Socket Mode (only with --socket-mode; its rejections count under endpoint="slack_socket")
        self.socket_envelopes = Counter(
            "ingest_socket_envelopes",
            "Socket Mode envelopes by type and outcome; all but outcome=unavailable are acked",
            ["type", "outcome"],
            registry=self.registry,
        )
        self.socket_connections = Counter(
            "ingest_socket_connections",
            "Socket Mode connections opened (hello frames received)",
            registry=self.registry,
        )
        self.socket_disconnects = Counter(
            "ingest_socket_disconnects",
            "Socket Mode disconnect frames Slack sent, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.socket_connected = Gauge(
            "ingest_socket_connected", "1 while a Socket Mode websocket is open", registry=self.registry
        )
        # the other services' gauge (services/runtime/health.py), set at each scrape from /healthz's own
        # check (a broker answered a metadata request), so one alert covers every service
        ProcessCollector(registry=self.registry)  # process_start_time_seconds: IncidentMemoryRestartLoop
        self.healthy = Gauge(
            HEALTHY_METRIC,
            "1 while /healthz answers 200 (a Kafka broker answers), else 0",
            registry=self.registry,
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
