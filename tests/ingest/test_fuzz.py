"""Fuzzing the endpoints of the real server: arbitrary input never gives a 5xx, and never produces."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy.local import loopback_http

from .helpers import (
    CLOSED_PORT_BOOTSTRAP,
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

HEADER_NAMES = st.sampled_from(
    ["X-Slack-Signature", "X-Slack-Request-Timestamp", "X-Slack-Retry-Num", "Authorization", "Content-Type"]
)
HEADER_VALUES = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80),
    st.just(str(int(time.time()))),
    st.just("Bearer am-wrong"),
    st.just("v0="),
).map(str.strip)  # h11 (the client) refuses surrounding whitespace itself
BODIES = st.one_of(
    st.binary(max_size=2048),
    st.text(max_size=512).map(str.encode),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
        max_leaves=20,
    ).map(dumps),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def offline_server() -> Iterator[RunningServer]:
    """A broker that is down: any attempt to produce would answer 503, which the test refuses."""
    running = start_server(config(CLOSED_PORT_BOOTSTRAP, ack_timeout_s=0.3, flush_timeout_s=0.3))
    yield running
    running.stop()


@pytest.mark.slow
@FUZZ
@given(
    path=st.sampled_from(["/slack/events", "/alertmanager"]),
    body=BODIES,
    headers=st.dictionaries(HEADER_NAMES, HEADER_VALUES, max_size=5),
)
def test_unauthenticated_garbage_is_a_4xx_and_produces_nothing(
    offline_server: RunningServer, path: str, body: bytes, headers: dict[str, str]
) -> None:
    response = loopback_http.post(f"{offline_server.url}{path}", content=body, headers=headers)
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    assert isinstance(response.json()["error"], str)
    assert offline_server.metric("ingest_produce_attempts_total", topic="incident.events") == 0
    assert offline_server.metric("ingest_produce_attempts_total", topic="incident.wake") == 0


@FUZZ
@given(data=st.data())
def test_signed_arbitrary_slack_bodies_never_give_a_5xx(
    kafka_bootstrap: str, topic_names: dict[str, str], data: st.DataObject
) -> None:
    server = _online(kafka_bootstrap, topic_names)
    shape = data.draw(st.sampled_from(["any", "event", "field"]))
    payload: Any
    if shape == "any":
        payload = data.draw(JSON)
    elif shape == "event":
        payload = envelope(
            data.draw(st.dictionaries(st.sampled_from(list(message("1.1", "1.2", "x"))), JSON))
        )
    else:
        event = message(slack_ts(), slack_ts(1), "x")
        event[data.draw(st.sampled_from(sorted(event)))] = data.draw(JSON)
        payload = envelope(event)
    body = dumps(payload)
    response = loopback_http.post(f"{server.url}/slack/events", content=body, headers=signed_headers(body))
    assert response.status_code < 500, (response.status_code, response.text, payload)
    if response.status_code >= 400:
        assert isinstance(response.json()["error"], str)


_SERVERS: dict[str, RunningServer] = {}


def _online(bootstrap: str, topics: dict[str, str]) -> RunningServer:
    """One server per test's topics, kept across hypothesis examples (stopped at exit)."""
    key = topics["events"]
    if key not in _SERVERS:
        for old in _SERVERS.values():
            old.stop()
        _SERVERS.clear()
        _SERVERS[key] = start_server(config(bootstrap, topics))
    return _SERVERS[key]


@pytest.fixture(autouse=True, scope="module")
def _stop_servers() -> Iterator[None]:
    yield
    for server in _SERVERS.values():
        server.stop()
    _SERVERS.clear()


def test_rejected_signed_input_left_the_topics_empty(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    server = start_server(config(kafka_bootstrap, topic_names))
    try:
        for payload in (
            {"type": "x"},
            envelope({"type": "message", "ts": "1.2", "thread_ts": "1.1"}),
            envelope({"type": 5}),
        ):
            body = dumps(payload)
            assert (
                loopback_http.post(
                    f"{server.url}/slack/events", content=body, headers=signed_headers(body)
                ).status_code
                == 400
            )
    finally:
        server.stop()
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 0
