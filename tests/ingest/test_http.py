"""The real ingest server (uvicorn on loopback) against the real broker: events read back from Kafka."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from deploy.local import loopback_http
from schemas.events import AlertReceived, HumanMessage, IncidentStateChanged, Wake

from .helpers import (
    BOT,
    TOKEN,
    RunningServer,
    alert_payload,
    config,
    dumps,
    envelope,
    mention,
    message,
    read_events,
    signed_headers,
    slack_ts,
    start_server,
    topic_count,
)


@pytest.fixture
def server(kafka_bootstrap: str, topic_names: dict[str, str]) -> Iterator[RunningServer]:
    running = start_server(config(kafka_bootstrap, topic_names))
    yield running
    running.stop()


def post_slack(server: RunningServer, payload: dict[str, object], **headers: str) -> httpx.Response:
    body = dumps(payload)
    return loopback_http.post(
        f"{server.url}/slack/events", content=body, headers={**signed_headers(body), **headers}
    )


def post_alert(server: RunningServer, payload: dict[str, object], token: str = TOKEN) -> httpx.Response:
    return loopback_http.post(
        f"{server.url}/alertmanager", json=payload, headers={"Authorization": f"Bearer {token}"}
    )


def test_url_verification(server: RunningServer) -> None:
    response = post_slack(
        server,
        {
            "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
            "challenge": "3eZbrw1aBm2rZgRNFdxV",
            "type": "url_verification",
        },
    )
    assert response.status_code == 200 and response.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV"}


def test_thread_message_is_on_the_broker_when_answered(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    thread, ts = slack_ts(), slack_ts(1)
    text = "SELECT * FROM orders WHERE id = '1'; DROP TABLE agent_messages; --"
    response = post_slack(server, envelope(message(thread, ts, text)))
    assert response.status_code == 200, response.text
    # Answered 200 only after the ack: the event is already in the topic, no waiting needed.
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 1
    [event] = read_events(kafka_bootstrap, topic_names["events"], 1)
    assert isinstance(event, HumanMessage)
    key = f"C123ABC456-{thread}"  # the thread is its channel and its ts
    assert (event.thread_ts, event.ts, event.text, event.message_id) == (
        key,
        ts,
        text,
        f"{key}:-:human:{ts}",
    )
    assert (
        server.metric("ingest_events_produced_total", topic=topic_names["events"], type="human_message") == 1
    )


def test_events_of_a_thread_share_its_key_and_partition(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    from .helpers import read_topic

    thread = slack_ts()
    for i in range(5):
        assert post_slack(server, envelope(message(thread, slack_ts(i + 1), f"note {i}"))).status_code == 200
    records = read_topic(kafka_bootstrap, topic_names["events"], 5)
    assert {key for key, _ in records} == {f"C123ABC456-{thread}".encode()}
    assert [json.loads(v)["text"] for _, v in records] == [f"note {i}" for i in range(5)]  # in order


def test_mention_produces_human_message_and_wake(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    thread, ts = slack_ts(), slack_ts(2)
    assert post_slack(server, envelope(mention(thread, ts))).status_code == 200
    [human] = read_events(kafka_bootstrap, topic_names["events"], 1)
    [wake] = read_events(kafka_bootstrap, topic_names["wake"], 1)
    assert isinstance(human, HumanMessage) and human.mention
    assert isinstance(wake, Wake) and wake.reason == "mention"
    key = f"C123ABC456-{thread}"  # the thread is its channel and its ts
    assert wake.message_id == f"{key}:-:wake:{ts}" and wake.trigger_message_id == human.message_id


def test_slack_retry_produces_no_second_event(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    payload = envelope(mention(slack_ts(), slack_ts(3)), event_id="Ev0RETRY01")
    first = post_slack(server, payload)
    retry = post_slack(server, payload, **{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    assert first.status_code == retry.status_code == 200
    assert retry.json()["duplicate"] is True
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 1
    assert topic_count(kafka_bootstrap, topic_names["wake"]) == 1
    assert server.metric("ingest_duplicates_total") == 1


def test_bot_messages_are_ignored_with_200_and_produce_nothing(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    thread = slack_ts()
    own = post_slack(server, envelope(message(thread, slack_ts(1), "summary", user=BOT)))
    bot = post_slack(server, envelope({**message(thread, slack_ts(2), "deploy done"), "bot_id": "B01"}))
    reaction = post_slack(server, envelope({"type": "reaction_added", "user": "U1", "reaction": "eyes"}))
    assert [r.status_code for r in (own, bot, reaction)] == [200, 200, 200]
    assert [r.json()["ignored"] for r in (own, bot, reaction)] == [
        "own_message",
        "bot_message",
        "event_type_not_handled:reaction_added",
    ]
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 0


def test_firing_alert_opens_a_thread_and_resolved_updates_it(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    firing = post_alert(server, alert_payload("firing", group_key="grp-A"))
    again = post_alert(server, alert_payload("firing", group_key="grp-A"))  # Alertmanager's retry / re-send
    assert firing.status_code == again.status_code == 200, firing.text
    thread = firing.json()["thread_ts"]
    assert again.json()["thread_ts"] == thread
    resolved = post_alert(server, alert_payload("resolved", group_key="grp-A"))
    assert resolved.status_code == 200 and resolved.json()["thread_ts"] == thread
    events = read_events(kafka_bootstrap, topic_names["events"], 6)
    assert {e.thread_ts for e in events} == {thread}
    ids = [e.message_id for e in events]
    assert ids == [f"{thread}:-:alert:0", f"{thread}:-:state:open"] * 2 + [
        f"{thread}:-:alert:resolved",
        f"{thread}:-:state:resolved",
    ]
    assert isinstance(events[0], AlertReceived) and events[0].status == "firing"
    assert isinstance(events[-1], IncidentStateChanged) and events[-1].status == "resolved"
    wakes = read_events(kafka_bootstrap, topic_names["wake"], 2)
    assert [w.message_id for w in wakes] == [f"{thread}:-:wake:alert"] * 2  # same id: the agent dedupes


@pytest.mark.parametrize(
    ("make", "status", "reason"),
    [
        (lambda b: {"Content-Type": "application/json"}, 401, "missing_signature"),
        (lambda b: signed_headers(b, secret="wrong"), 401, "bad_signature"),
        (lambda b: signed_headers(b, timestamp=int(time.time()) - 301), 401, "stale_timestamp"),
        (lambda b: signed_headers(b, timestamp=int(time.time()) + 400), 401, "stale_timestamp"),
        (lambda b: {**signed_headers(b), "X-Slack-Request-Timestamp": "soon"}, 401, "bad_timestamp"),
    ],
)
def test_unauthentic_slack_requests_are_refused(
    server: RunningServer,
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    make: object,
    status: int,
    reason: str,
) -> None:
    body = dumps(envelope(mention(slack_ts(), slack_ts(1))))
    response = loopback_http.post(f"{server.url}/slack/events", content=body, headers=make(body))  # type: ignore[operator]
    assert response.status_code == status and response.json()["error"] == reason
    assert server.metric("ingest_rejections_total", endpoint="slack", reason=reason) == 1
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 0
    assert topic_count(kafka_bootstrap, topic_names["wake"]) == 0


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"{not json", 400, "malformed_json"),
        (b"[]", 400, "malformed_json"),
        (dumps({"type": "shortcut", "token": "x"}), 400, "unknown_event_type"),
        (dumps({"type": "event_callback", "event": {"type": "message"}}), 400, "missing_field"),
        (
            dumps(envelope({k: v for k, v in message("1.2", "1.3", "x").items() if k != "ts"})),
            400,
            "missing_field",
        ),
    ],
)
def test_bad_slack_bodies_get_a_clear_4xx(
    server: RunningServer,
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    body: bytes,
    status: int,
    reason: str,
) -> None:
    response = loopback_http.post(f"{server.url}/slack/events", content=body, headers=signed_headers(body))
    assert response.status_code == status and response.json()["error"] == reason
    assert server.metric("ingest_rejections_total", endpoint="slack", reason=reason) == 1
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 0


def test_body_over_one_mib_is_refused_while_reading(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    big = b'{"type":"event_callback","pad":"' + b"x" * (1024 * 1024) + b'"}'
    declared = loopback_http.post(f"{server.url}/slack/events", content=big, headers=signed_headers(big))
    assert declared.status_code == 413 and declared.json()["error"] == "body_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked, refused once the limit passes
        for _ in range(32):
            yield b"x" * 65536

    streamed = loopback_http.post(
        f"{server.url}/alertmanager", content=chunks(), headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert streamed.status_code == 413 and streamed.json()["error"] == "body_too_large"
    assert server.metric("ingest_rejections_total", endpoint="slack", reason="body_too_large") == 1
    assert server.metric("ingest_rejections_total", endpoint="alertmanager", reason="body_too_large") == 1
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 0


def test_alertmanager_auth_and_bad_bodies(
    server: RunningServer, kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    assert post_alert(server, alert_payload(), token="wrong").json()["error"] == "bad_token"
    no_auth = loopback_http.post(f"{server.url}/alertmanager", json=alert_payload())
    assert no_auth.status_code == 401
    bad_version = post_alert(server, {**alert_payload(), "version": "3"})
    assert bad_version.status_code == 400 and bad_version.json()["error"] == "unsupported_version"
    broken = loopback_http.post(
        f"{server.url}/alertmanager", content=b"{", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert broken.status_code == 400 and broken.json()["error"] == "malformed_json"
    assert server.metric("ingest_rejections_total", endpoint="alertmanager", reason="bad_token") == 2
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 0
    assert topic_count(kafka_bootstrap, topic_names["wake"]) == 0


def test_healthz_and_metrics(server: RunningServer) -> None:
    health = loopback_http.get(f"{server.url}/healthz")
    assert health.status_code == 200 and health.json() == {"ok": True}
    post_slack(server, {"type": "nope"})
    text = loopback_http.get(f"{server.url}/metrics").text
    assert 'ingest_requests_total{endpoint="slack",status="400"} 1.0' in text
    assert 'ingest_rejections_total{endpoint="slack",reason="unknown_event_type"} 1.0' in text
    assert "ingest_produce_latency_seconds_bucket" in text
    assert "\nincident_memory_healthy 1.0\n" in text  # /healthz's verdict, as every service exports it
