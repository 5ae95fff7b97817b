"""One HTTP port per service for `/metrics` and a real `/healthz`.

prometheus_client's own server answers every path with the metrics, so a probe of
`/healthz` there would only prove the process is alive. Here `/healthz` reports the
service's loop: it answers 503 until the loop has run once, and again when the loop
has not beaten for `stale_after` seconds (stuck on a dead broker or database).
`/metrics` carries the same verdict as the gauge `incident_memory_healthy` (1 or 0), so Prometheus,
which never calls `/healthz`, can alert on a loop that is stuck while the process still answers
(deploy/monitoring/incident-memory.rules.yml, `IncidentMemoryServiceUnhealthy`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

HEALTHY_METRIC = "incident_memory_healthy"


class Heartbeat:
    """Beaten by a service's loop on every iteration; read by `/healthz`."""

    def __init__(self, stale_after: float = 60.0) -> None:
        self.stale_after = stale_after
        self._last: float | None = None

    def beat(self) -> None:
        self._last = time.monotonic()

    def status(self) -> tuple[bool, str]:
        if self._last is None:
            return False, "starting: the loop has not run yet"
        age = time.monotonic() - self._last
        if age > self.stale_after:
            return False, f"stale: the loop last ran {age:.0f}s ago"
        return True, f"ok: the loop ran {age:.1f}s ago"


class HealthCollector(Collector):
    """`incident_memory_healthy`: the heartbeat's verdict at scrape time, as `/healthz` would give it."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self.heartbeat = heartbeat

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ok, _detail = self.heartbeat.status()
        yield GaugeMetricFamily(
            HEALTHY_METRIC, "1 while /healthz answers 200 (the service's loop runs), else 0", value=float(ok)
        )


def health_registry(heartbeat: Heartbeat) -> CollectorRegistry:
    """A registry of its own for the health gauge: the service's registry may be the process-wide
    default, where a second server (a test, a restart in-process) could not register it again."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HealthCollector(heartbeat))
    return registry


def serve_metrics_and_health(
    port: int,
    heartbeat: Heartbeat,
    registry: CollectorRegistry = REGISTRY,
    addr: str = "0.0.0.0",
) -> ThreadingHTTPServer:
    """Serve `/metrics` and `/healthz` on `addr:port` from a daemon thread; returns the server."""
    health = health_registry(heartbeat)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body = generate_latest(registry) + generate_latest(health)
                self._send(200, body, CONTENT_TYPE_LATEST)
            elif self.path.startswith("/healthz"):
                ok, detail = heartbeat.status()
                body = json.dumps({"ok": ok, "detail": detail}).encode()
                self._send(200 if ok else 503, body, "application/json")
            else:
                self._send(404, b'{"error":"not found: try /metrics or /healthz"}', "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # probes are not worth a log line
            return

    server = ThreadingHTTPServer((addr, port), Handler)
    threading.Thread(target=server.serve_forever, name=f"health:{port}", daemon=True).start()
    return server
