"""The broker is down (a closed port): nothing is acknowledged, so nothing acknowledged is lost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deploy.local import loopback_http

from .helpers import (
    CLOSED_PORT_BOOTSTRAP,
    TOKEN,
    RunningServer,
    alert_payload,
    config,
    dumps,
    envelope,
    mention,
    signed_headers,
    slack_ts,
    start_server,
)


@pytest.fixture
def server() -> Iterator[RunningServer]:
    running = start_server(config(CLOSED_PORT_BOOTSTRAP, ack_timeout_s=0.5, flush_timeout_s=0.5))
    yield running
    running.stop()


@pytest.mark.slow
def test_slack_event_gets_503_and_is_not_marked_seen(server: RunningServer) -> None:
    body = dumps(envelope(mention(slack_ts(), slack_ts(1)), event_id="Ev0DOWN01"))
    first = loopback_http.post(f"{server.url}/slack/events", content=body, headers=signed_headers(body))
    assert first.status_code == 503 and first.json()["error"] == "broker_unavailable"
    # Slack retries a 5xx: the retry must be produced again, not dropped as a duplicate.
    retry = loopback_http.post(
        f"{server.url}/slack/events", content=body, headers={**signed_headers(body), "X-Slack-Retry-Num": "1"}
    )
    assert retry.status_code == 503
    assert server.metric("ingest_duplicates_total") == 0
    assert server.metric("ingest_produce_failures_total", reason="ack_timeout") == 2


@pytest.mark.slow
def test_alertmanager_gets_503(server: RunningServer) -> None:
    response = loopback_http.post(
        f"{server.url}/alertmanager", json=alert_payload(), headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status_code == 503  # Alertmanager retries a 5xx


@pytest.mark.slow
def test_healthz_reports_the_broker_unreachable(server: RunningServer) -> None:
    response = loopback_http.get(f"{server.url}/healthz", timeout=10)
    assert response.status_code == 503 and response.json()["error"] == "broker_unreachable"


def test_metrics_say_unhealthy_while_the_broker_is_unreachable(server: RunningServer) -> None:
    """`incident_memory_healthy` (the gauge every service exports, IncidentMemoryServiceUnhealthy) is
    /healthz's verdict: 0 here, where /healthz answers 503."""
    text = loopback_http.get(f"{server.url}/metrics", timeout=10).text
    assert "\nincident_memory_healthy 0.0\n" in text
