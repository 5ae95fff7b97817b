"""`incident-memory ingest --socket-mode`: the real CLI in a subprocess, Slack's Socket Mode from the
stand-in (`deploy/local/slack_standin.py`, the real wire format, loopback only) and the real broker.

An envelope is acked only once it is settled (its events acked by Kafka, or ignored, or rejected);
an unacked one is redelivered by Slack, and the event_id dedupe keeps a redelivery from producing twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from deploy.local import loopback_http
from deploy.local.pipeline import Proc
from deploy.local.ports import free_port
from deploy.local.slack_standin import DEFAULT_CHANNEL, HUMAN_USER, SlackStandin, running
from schemas.events import HumanMessage, Wake, parse_event

from .helpers import (
    CLOSED_PORT_BOOTSTRAP,
    SECRET,
    TOKEN,
    alert_payload,
    read_events,
    read_topic,
    signed_headers,
    topic_count,
)

ROOT = Path(__file__).resolve().parents[2]
CHANNEL = DEFAULT_CHANNEL


def eventually(check: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s")
        time.sleep(0.02)


@dataclass
class SocketIngest:
    """`incident-memory ingest --socket-mode` running in a subprocess, its HTTP port and its log."""

    proc: Proc
    url: str
    log: Path

    def logs(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.logs().splitlines() if line.startswith("{")]

    def metric(self, name: str, **labels: str) -> float:
        text = loopback_http.get(f"{self.url}/metrics", timeout=10).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return 0.0

    def stop(self) -> int | None:
        return self.proc.stop(40)


@contextlib.contextmanager
def socket_ingest(
    slack: SlackStandin,
    bootstrap: str,
    topics: dict[str, str],
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    wait_healthy: bool = True,
) -> Iterator[SocketIngest]:
    """Start the CLI against the stand-in; ready once its websocket is open (and /healthz answers)."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    full_env = {
        **base,
        "SLACK_APP_TOKEN": slack.app_token,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_API_URL": slack.base_url,
        "SLACK_BOT_USER_ID": slack.workspace.bot_user_id,
        "SLACK_TEAM_ID": slack.workspace.team_id,
        "SLACK_APP_ID": slack.workspace.app_id,
        "ALERTMANAGER_TOKEN": TOKEN,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        **(env or {}),
    }
    argv = [sys.executable, "-m", "services.cli", "ingest", "--socket-mode", "--port", str(port)]
    argv += ["--events-topic", topics["events"], "--wake-topic", topics["wake"], "--dlq-topic", topics["dlq"]]
    log = tmp_path / f"ingest-{port}.log"
    proc = Proc("ingest", [*argv, *args], full_env, log, port=port, cwd=ROOT).start()
    running_ingest = SocketIngest(proc, f"http://127.0.0.1:{port}", log)
    try:
        eventually(lambda: slack.hub.open_connections >= 1 or not proc.alive(), 30, "websocket opened")
        assert proc.alive(), running_ingest.logs()
        # /healthz answers once the HTTP port is bound (200 only when a broker answers too).
        eventually(
            lambda: _health(running_ingest.url) in ((200,) if wait_healthy else (200, 503)), 30, "/healthz"
        )
        yield running_ingest
    finally:
        if proc.alive():
            proc.kill9()


def _health(url: str) -> int | None:
    try:
        return loopback_http.get(f"{url}/healthz", timeout=5).status_code
    except httpx.TransportError:
        return None


def thread_reply(slack: SlackStandin, text: str) -> tuple[str, dict[str, Any]]:
    """A human's reply in a fresh thread: (the thread's parent ts, the stored reply)."""
    parent = slack.post_as_user(CHANNEL, "checkout 5xx ratio above 5%")
    reply = slack.post_as_user(CHANNEL, text, thread_ts=parent["ts"])
    return parent["ts"], reply


def wait_acked(slack: SlackStandin, envelope_id: str, timeout: float = 20.0) -> None:
    eventually(lambda: envelope_id in slack.acks(), timeout, f"ack of {envelope_id}")


@pytest.fixture
def slack() -> Iterator[SlackStandin]:
    with running(ack_timeout=5.0, max_retries=3) as standin:
        yield standin


# --- 1. a thread reply -----------------------------------------------------------------------------------


def test_thread_reply_is_one_human_message_acked_only_after_the_broker(
    slack: SlackStandin, kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    parent_ts, reply = thread_reply(slack, "SELECT 1; -- the db pool is exhausted")
    payload = slack.event_callback(slack.message_event(CHANNEL, reply))
    env = {"SLACK_SIGNING_SECRET": SECRET}  # /slack/events stays too: the same path, the same dedupe
    with socket_ingest(
        slack, kafka_bootstrap, topic_names, tmp_path, env=env, args=("--log-level", "DEBUG")
    ) as ing:
        envelope_id = slack.push_event(payload)
        wait_acked(slack, envelope_id)
        # Acked only once Kafka acked: the event is on the topic already, no waiting.
        assert topic_count(kafka_bootstrap, topic_names["events"]) == 1
        assert slack.envelope(envelope_id).deliveries == [0]

        # Over HTTP the same event id is a duplicate (one dedupe for both ways in) ...
        body = json.dumps(payload).encode()
        retried = loopback_http.post(f"{ing.url}/slack/events", content=body, headers=signed_headers(body))
        assert retried.status_code == 200 and retried.json()["duplicate"] is True
        # ... and under a new event id it maps to the very same bytes.
        fresh = json.dumps({**payload, "event_id": "Ev0HTTP0001"}).encode()
        answered = loopback_http.post(f"{ing.url}/slack/events", content=fresh, headers=signed_headers(fresh))
        assert answered.status_code == 200 and answered.json()["produced"] == 1

        assert ing.metric("ingest_socket_envelopes_total", type="events_api", outcome="produced") == 1
        assert ing.metric("ingest_socket_connected") == 1
        assert ing.metric("ingest_duplicates_total") == 1
        assert ing.stop() == 0  # SIGTERM: finish, close the websocket, flush, exit 0

    (key1, socket_value), (key2, http_value) = read_topic(kafka_bootstrap, topic_names["events"], 2)
    assert socket_value == http_value and key1 == key2
    event = parse_event(socket_value)
    key = f"{CHANNEL}-{parent_ts}"  # the thread is its channel and its ts, as over HTTP
    assert isinstance(event, HumanMessage)
    assert (event.thread_ts, event.message_id) == (key, f"{key}:-:human:{reply['ts']}")
    assert (event.text, event.user, event.ts, event.mention) == (
        reply["text"],
        HUMAN_USER,
        reply["ts"],
        False,
    )
    assert topic_count(kafka_bootstrap, topic_names["wake"]) == 0
    logs = ing.logs()
    assert slack.app_token not in logs and slack.bot_token not in logs  # not even at DEBUG
    produced = [r for r in ing.records() if r["msg"] == "produced"]
    assert [r["source"] for r in produced] == ["slack_socket", "slack"]


# --- 2. a mention ----------------------------------------------------------------------------------------


def test_app_mention_becomes_a_human_message_and_a_wake(
    slack: SlackStandin, kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    bot = slack.workspace.bot_user_id
    parent_ts, reply = thread_reply(slack, f"<@{bot}> what changed before the errors?")
    message = slack.message_event(CHANNEL, reply)
    mention = {**{k: v for k, v in message.items() if k != "channel_type"}, "type": "app_mention"}
    with socket_ingest(slack, kafka_bootstrap, topic_names, tmp_path) as ing:
        # Slack sends both for one mention: one `message` and one `app_mention` event.
        ids = [
            slack.push_event(slack.event_callback(mention)),
            slack.push_event(slack.event_callback(message)),
        ]
        for envelope_id in ids:
            wait_acked(slack, envelope_id)
        assert ing.metric("ingest_socket_envelopes_total", type="events_api", outcome="produced") == 2
        assert ing.stop() == 0

    records = read_topic(kafka_bootstrap, topic_names["events"], 2)
    assert len(records) == 2
    # The same message: only the `message` event says the channel's type (app_mention has none).
    events = [parse_event(value) for _key, value in records]
    assert sorted(str(getattr(e, "channel_type", "")) for e in events) == ["None", "channel"]
    assert len({e.model_copy(update={"channel_type": None}).to_bytes() for e in events}) == 1
    human = events[0]
    [wake] = read_events(kafka_bootstrap, topic_names["wake"], 1)
    key = f"{CHANNEL}-{parent_ts}"
    assert isinstance(human, HumanMessage) and human.mention
    assert human.message_id == f"{key}:-:human:{reply['ts']}"
    assert isinstance(wake, Wake) and wake.reason == "mention"
    assert wake.message_id == f"{key}:-:wake:{reply['ts']}" and wake.trigger_message_id == human.message_id
    assert topic_count(kafka_bootstrap, topic_names["wake"]) == 1  # only app_mention wakes


# --- 3. retries and redelivery ---------------------------------------------------------------------------


def test_a_retried_event_produces_no_second_event(
    slack: SlackStandin, kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    _, reply = thread_reply(slack, "retried")
    payload = slack.event_callback(slack.message_event(CHANNEL, reply))
    with socket_ingest(slack, kafka_bootstrap, topic_names, tmp_path) as ing:
        first = slack.push_event(payload)
        wait_acked(slack, first)
        again = slack.push_event(payload)  # Slack's retry of the event: a new envelope, the same event_id
        wait_acked(slack, again)
        assert ing.metric("ingest_socket_envelopes_total", type="events_api", outcome="duplicate") == 1
        assert ing.metric("ingest_duplicates_total") == 1
    assert len(read_topic(kafka_bootstrap, topic_names["events"], 2, timeout_s=3)) == 1


def test_an_envelope_not_acked_in_time_is_redelivered_and_yields_one_event(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    # ack_timeout=0: the stand-in resends at once, long before any broker could ack the first delivery.
    with running(ack_timeout=0.0, max_retries=3) as slack:
        _, reply = thread_reply(slack, "redelivered")
        with socket_ingest(slack, kafka_bootstrap, topic_names, tmp_path) as ing:
            envelope_id = slack.push_event(slack.event_callback(slack.message_event(CHANNEL, reply)))
            wait_acked(slack, envelope_id)

            def copies_settled() -> bool:  # each redelivered copy: dropped by the dedupe, then acked
                copies = len(slack.envelope(envelope_id).deliveries) - 1
                return (
                    ing.metric("ingest_socket_envelopes_total", type="events_api", outcome="duplicate")
                    == copies
                )

            eventually(copies_settled, 20, "every redelivery settled")
            deliveries = slack.envelope(envelope_id).deliveries
            assert len(deliveries) >= 2 and deliveries[:2] == [0, 1]
            assert ing.metric("ingest_socket_envelopes_total", type="events_api", outcome="produced") == 1
            assert slack.acks().count(envelope_id) == len(deliveries)  # each delivery acked once settled
        retries = [r for r in ing.records() if r["msg"] == "slack retry"]
        assert {r["retry"] for r in retries} >= {"1"} and {r["endpoint"] for r in retries} == {"slack_socket"}
    assert len(read_topic(kafka_bootstrap, topic_names["events"], 2, timeout_s=3)) == 1


@pytest.mark.slow
def test_broker_down_leaves_the_envelope_unacked_for_slack_to_redeliver(
    topic_names_offline: dict[str, str], tmp_path: Path
) -> None:
    with running(ack_timeout=1.0, max_retries=2) as slack:
        _, reply = thread_reply(slack, "nobody hears this yet")
        with socket_ingest(
            slack,
            CLOSED_PORT_BOOTSTRAP,
            topic_names_offline,
            tmp_path,
            args=("--ack-timeout", "0.3"),
            wait_healthy=False,
        ) as ing:
            envelope_id = slack.push_event(slack.event_callback(slack.message_event(CHANNEL, reply)))
            eventually(lambda: slack.envelope(envelope_id).given_up, 20, "the stand-in gave up")
            eventually(
                lambda: (
                    ing.metric("ingest_socket_envelopes_total", type="events_api", outcome="unavailable") == 3
                ),
                10,
                "three unavailable outcomes",
            )
            assert slack.envelope(envelope_id).deliveries == [0, 1, 2]
            assert envelope_id not in slack.acks()
            assert ing.metric("ingest_duplicates_total") == 0  # a failed event is not marked seen
            assert ing.metric("ingest_produce_failures_total", reason="ack_timeout") == 3


@pytest.fixture
def topic_names_offline() -> dict[str, str]:
    return {
        "events": "incident.events.offline",
        "wake": "incident.wake.offline",
        "dlq": "incident.dlq.offline",
    }


# --- 4. reconnecting -------------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["refresh_requested", None], ids=["disconnect-frame", "dropped"])
def test_after_a_forced_disconnect_it_reconnects_and_the_next_envelope_flows(
    slack: SlackStandin,
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    tmp_path: Path,
    reason: str | None,
) -> None:
    with socket_ingest(slack, kafka_bootstrap, topic_names, tmp_path) as ing:
        assert slack.disconnect(reason) == 1
        eventually(
            lambda: slack.hub.connections_opened == 2 and slack.hub.open_connections == 1, 30, "reconnected"
        )
        _, reply = thread_reply(slack, "after the reconnect")
        envelope_id = slack.push_event(slack.event_callback(slack.message_event(CHANNEL, reply)))
        wait_acked(slack, envelope_id)
        assert ing.metric("ingest_socket_connections_total") == 2
        if reason is not None:
            assert ing.metric("ingest_socket_disconnects_total", reason=reason) == 1
        assert len(slack.calls("apps.connections.open")) == 2  # a fresh URL for the new connection
        assert ing.stop() == 0
    [event] = read_events(kafka_bootstrap, topic_names["events"], 1)
    assert isinstance(event, HumanMessage) and event.text == "after the reconnect"


# --- 5. a bad app token ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("token", "api_url", "needle"),
    [
        ("xapp-1-A0NOPE-not-a-real-token", None, "invalid_auth"),
        ("BOT", None, "not_allowed_token_type"),
        ("xapp-1-A0BOTMEM1-revoked-token", None, "token_revoked"),
        ("", None, "is not set"),
        ("xapp-1-A0BOTMEM1-standin-app-token", "http://127.0.0.1:1/api/", "SLACK_API_URL"),
    ],
    ids=["unknown", "bot-token", "revoked", "missing", "api-unreachable"],
)
def test_a_bad_app_token_fails_at_start_in_one_line(token: str, api_url: str | None, needle: str) -> None:
    revoked = "xapp-1-A0BOTMEM1-revoked-token"
    with running(app_tokens=["xapp-1-A0BOTMEM1-standin-app-token", revoked]) as slack:
        slack.revoke(revoked)
        token = slack.bot_token if token == "BOT" else token
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
        env |= {
            "SLACK_APP_TOKEN": token,
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_API_URL": api_url or slack.base_url,
            "ALERTMANAGER_TOKEN": TOKEN,
            "SLACK_TEAM_ID": slack.workspace.team_id,
            "SLACK_APP_ID": slack.workspace.app_id,
            "KAFKA_BOOTSTRAP_SERVERS": CLOSED_PORT_BOOTSTRAP,
        }
        port = free_port()
        done = subprocess.run(
            [sys.executable, "-m", "services.cli", "ingest", "--socket-mode", "--port", str(port)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert slack.hub.connections_opened == 0
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and done.stdout == "", done.stderr
    assert lines[0].startswith("incident-memory ingest: ") and "SLACK_APP_TOKEN" in lines[0]
    assert needle in lines[0]
    if token:
        assert token not in lines[0] and slack.bot_token not in lines[0]


# --- settled envelopes: ignored, rejected, not handled --------------------------------------------------


def test_settled_envelopes_are_acked_counted_and_produce_nothing(
    slack: SlackStandin, kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    _, reply = thread_reply(slack, "a reply")
    no_ts = {k: v for k, v in slack.message_event(CHANNEL, reply).items() if k != "ts"}
    own = slack.message_event(CHANNEL, {**reply, "user": slack.workspace.bot_user_id})
    valid = slack.event_callback(slack.message_event(CHANNEL, reply))
    other_team, other_app = {**valid, "team_id": "T0OTHER"}, {**valid, "api_app_id": "A0OTHER"}
    with socket_ingest(slack, kafka_bootstrap, topic_names, tmp_path) as ing:
        ids = [
            slack.push_event(slack.event_callback(no_ts)),  # rejected: missing_field
            slack.push_event([1, 2]),  # type: ignore[arg-type]  # not an object: slack_sdk cannot parse it
            slack.push_event(slack.event_callback(own)),  # ignored: own_message
            slack.push_event({"type": "block_actions", "actions": []}, "interactive"),  # not handled
            slack.push_event(other_team),  # ignored: another workspace (acked: Slack must not retry it)
            slack.push_event(other_app),  # ignored: another app
        ]
        for envelope_id in ids:
            wait_acked(slack, envelope_id)
        assert all(slack.envelope(e).deliveries == [0] for e in ids)  # acked at once, never redelivered
        assert ing.metric("ingest_socket_envelopes_total", type="events_api", outcome="rejected") == 2
        assert ing.metric("ingest_socket_envelopes_total", type="events_api", outcome="ignored") == 3
        assert ing.metric("ingest_foreign_events_total", field="team_id") == 1
        assert ing.metric("ingest_foreign_events_total", field="api_app_id") == 1
        assert ing.metric("ingest_socket_envelopes_total", type="interactive", outcome="not_handled") == 1
        assert ing.metric("ingest_rejections_total", endpoint="slack_socket", reason="missing_field") == 1
        assert ing.metric("ingest_rejections_total", endpoint="slack_socket", reason="bad_envelope") == 1
        assert ing.metric("ingest_ignored_total", reason="own_message") == 1
        assert topic_count(kafka_bootstrap, topic_names["events"]) == 0

        # HTTP stays for Alertmanager, health and metrics; /slack/events needs a signing secret (none here).
        assert loopback_http.get(f"{ing.url}/healthz", timeout=10).json() == {"ok": True}
        alert = loopback_http.post(
            f"{ing.url}/alertmanager", json=alert_payload(), headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert alert.status_code == 200, alert.text
        assert (
            loopback_http.post(f"{ing.url}/slack/events", json={"type": "url_verification"}).status_code
            == 404
        )
        assert ing.stop() == 0
    assert topic_count(kafka_bootstrap, topic_names["events"]) == 2  # the alert's AlertReceived + state
