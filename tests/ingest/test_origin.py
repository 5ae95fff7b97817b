"""Events of another Slack workspace or app are dropped with a 200 and counted, never recorded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deploy.local import loopback_http
from services.ingest.origin import foreign_field
from services.ingest.rejections import Rejected

from .helpers import (
    APP,
    TEAM,
    RunningServer,
    config,
    dumps,
    envelope,
    message,
    signed_headers,
    slack_ts,
    start_server,
    topic_count,
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, None),
        ({"team_id": "T0OTHER"}, "team_id"),
        ({"api_app_id": "A0OTHER"}, "api_app_id"),
        ({"team_id": TEAM.lower()}, "team_id"),  # ids are compared exactly
        ({"team_id": "T0OTHER", "api_app_id": "A0OTHER"}, "team_id"),
    ],
)
def test_foreign_field_names_the_first_field_that_is_not_ours(
    changes: dict[str, Any], expected: str | None
) -> None:
    payload = envelope(message(slack_ts(), slack_ts(1), "hello"))
    for key, value in changes.items():
        if value is None:
            payload.pop(key)
        else:
            payload[key] = value
    assert foreign_field(payload, TEAM, APP) == expected


@pytest.mark.parametrize("field", ["team_id", "api_app_id"])
def test_an_event_callback_without_its_workspace_or_app_is_malformed(field: str) -> None:
    payload = {k: v for k, v in envelope(message(slack_ts(), slack_ts(1), "x")).items() if k != field}
    with pytest.raises(Rejected) as refused:
        foreign_field(payload, TEAM, APP)
    assert (refused.value.status, refused.value.reason, refused.value.detail) == (400, "missing_field", field)


def test_url_verification_carries_no_workspace_and_is_not_foreign() -> None:
    assert foreign_field({"type": "url_verification", "challenge": "x"}, TEAM, APP) is None


@pytest.mark.parametrize("kind", [["event_callback"], {"a": 1}, 7, None])
def test_an_envelope_type_of_any_json_shape_is_compared_never_hashed(kind: Any) -> None:
    """A signed body's `type` may be a list or an object: left to mapping's 400, never a 500 here."""
    assert foreign_field({"type": kind, "team_id": "T0", "api_app_id": "A0"}, TEAM, APP) is None


@pytest.fixture
def server(kafka_bootstrap: str, topic_names: dict[str, str]) -> Iterator[RunningServer]:
    running = start_server(config(kafka_bootstrap, topic_names))
    yield running
    running.stop()


def _post(server: RunningServer, payload: dict[str, Any]) -> httpx.Response:
    body = dumps(payload)
    return loopback_http.post(f"{server.url}/slack/events", content=body, headers=signed_headers(body))


def test_events_of_another_team_or_app_are_answered_200_counted_and_not_produced(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    thread = slack_ts()
    ours = envelope(message(thread, slack_ts(1), "our workspace"))
    foreign = [
        {**envelope(message(thread, slack_ts(2), "pasted elsewhere")), "team_id": "T0OTHER"},
        {**envelope(message(thread, slack_ts(3), "another app")), "api_app_id": "A0OTHER"},
        {**envelope(message(thread, slack_ts(4), "third workspace")), "team_id": "T0THIRD"},
    ]
    for payload in foreign:
        answer = _post(server, payload)
        assert answer.status_code == 200, answer.text  # never a 4xx: Slack would retry it
        assert answer.json()["ignored"].startswith("foreign_")
    assert server.metric("ingest_foreign_events_total", field="team_id") == 2
    assert server.metric("ingest_foreign_events_total", field="api_app_id") == 1
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 0

    answer = _post(server, ours)
    assert answer.status_code == 200 and answer.json()["produced"] == 1, answer.text
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 1
