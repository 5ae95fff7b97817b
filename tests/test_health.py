"""`/healthz` reports the loop, not just the process; `/metrics` is served beside it."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter

from deploy.local import loopback_http
from deploy.local.ports import free_port
from services.runtime.health import Heartbeat, serve_metrics_and_health


def test_healthz_is_503_until_the_loop_beats_then_200_then_503_when_stale() -> None:
    registry = CollectorRegistry()
    Counter("things_total", "things", registry=registry).inc(3)
    heartbeat = Heartbeat(stale_after=3.0)  # long enough for a loaded machine to answer twice
    port = free_port()
    server = serve_metrics_and_health(port, heartbeat, registry, addr="127.0.0.1")
    try:
        base = f"http://127.0.0.1:{port}"
        first = loopback_http.get(f"{base}/healthz")
        assert first.status_code == 503 and first.json()["ok"] is False
        heartbeat.beat()
        ok = loopback_http.get(f"{base}/healthz")
        assert ok.status_code == 200 and ok.json()["ok"] is True
        time.sleep(3.2)
        stale = loopback_http.get(f"{base}/healthz")
        assert stale.status_code == 503 and "stale" in stale.json()["detail"]
        metrics = loopback_http.get(f"{base}/metrics")
        assert metrics.status_code == 200 and "things_total 3.0" in metrics.text
        assert loopback_http.get(f"{base}/nope").status_code == 404
    finally:
        server.shutdown()


def _healthy_gauge(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("incident_memory_healthy ")]


def test_metrics_carry_the_healthz_verdict_as_a_gauge_for_alerting() -> None:
    """Prometheus never calls /healthz: `incident_memory_healthy` is what IncidentMemoryServiceUnhealthy
    reads. It follows the heartbeat scrape by scrape, on the default registry too (two servers)."""
    heartbeat = Heartbeat(stale_after=3.0)  # long enough for a loaded machine to answer twice
    ports = [free_port(), free_port()]
    servers = [serve_metrics_and_health(p, heartbeat, addr="127.0.0.1") for p in ports]
    try:
        for port in ports:
            base = f"http://127.0.0.1:{port}"
            assert _healthy_gauge(loopback_http.get(f"{base}/metrics").text) == [
                "incident_memory_healthy 0.0"
            ]
        heartbeat.beat()
        for port in ports:
            base = f"http://127.0.0.1:{port}"
            assert _healthy_gauge(loopback_http.get(f"{base}/metrics").text) == [
                "incident_memory_healthy 1.0"
            ]
        time.sleep(3.2)
        stale = loopback_http.get(f"http://127.0.0.1:{ports[0]}/metrics").text
        assert _healthy_gauge(stale) == ["incident_memory_healthy 0.0"]
        assert stale.count("# TYPE incident_memory_healthy gauge") == 1
    finally:
        for server in servers:
            server.shutdown()


def _start_times(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("process_start_time_seconds ")]


def test_every_service_exports_its_process_start_time_once() -> None:
    """IncidentMemoryRestartLoop counts changes of `process_start_time_seconds`: every service's /metrics
    has it once (the agent and the poster serve the default registry, which carries it)."""
    from prometheus_client import REGISTRY, generate_latest

    from services.compactor.stream_metrics import StreamMetrics
    from services.ingest.metrics import Metrics as IngestMetrics
    from services.projector.metrics import Metrics as ProjectorMetrics

    served = {
        "ingest": IngestMetrics().render(),
        "projector": generate_latest(ProjectorMetrics().registry),
        "compactor": generate_latest(StreamMetrics().registry),
        "agent and slack": generate_latest(REGISTRY),
    }
    for service, text in served.items():
        assert len(_start_times(text.decode())) == 1, service
