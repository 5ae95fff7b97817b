"""Test helpers: the real ingest server on loopback, Slack-shaped payloads, reading topics back."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from deploy.local import asgi_thread
from schemas.events import EventBase, parse_event
from services.ingest.app import Ingest, Worker, build_app
from services.ingest.config import IngestConfig
from services.ingest.main import build
from services.ingest.slack_signature import sign
from services.runtime.kafka_client import KafkaClient

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # Slack's documented example signing secret
TOKEN = "am-test-token"
BOT = "U0LAN0Z89"
TEAM, APP = "T123ABC456", "A123ABC456"  # the workspace and app of Slack's documented example
WORKSPACE_ENV = {"SLACK_TEAM_ID": TEAM, "SLACK_APP_ID": APP}
CLOSED_PORT_BOOTSTRAP = "127.0.0.1:1"  # nothing listens on port 1: "the broker is down"


def config(bootstrap: str, topics: dict[str, str] | None = None, **overrides: Any) -> IngestConfig:
    base = IngestConfig(
        signing_secret=SECRET,
        alertmanager_token=TOKEN,
        kafka=KafkaClient.plaintext(bootstrap),
        team_id=TEAM,
        app_id=APP,
        bot_user_id=BOT,
    )
    if topics:
        base = replace(
            base, events_topic=topics["events"], wake_topic=topics["wake"], dlq_topic=topics["dlq"]
        )
    return replace(base, **overrides)


@dataclass
class RunningServer:
    url: str
    ingest: Ingest
    serving: asgi_thread.Serving

    def metric(self, name: str, **labels: str) -> float:
        return self.ingest.metrics.registry.get_sample_value(name, labels) or 0.0

    def stop(self) -> None:
        self.serving.stop(timeout=20)


def start_server(cfg: IngestConfig, workers: Callable[[Ingest], list[Worker]] | None = None) -> RunningServer:
    """uvicorn serving the real app on 127.0.0.1 (an ephemeral port), in a thread."""
    ingest = build(cfg)
    app = build_app(ingest, workers(ingest) if workers else None)
    sock, url = asgi_thread.listen()
    server = asgi_thread.server(app, lifespan="on", graceful_s=None)
    return RunningServer(url, ingest, asgi_thread.start(server, sock, "ingest-server"))


def signed_headers(body: bytes, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": sign(secret, ts, body),
    }


def slack_ts(offset: int = 0) -> str:
    """A fresh, unique Slack ts."""
    now = time.time()
    return f"{int(now) - 3600 + offset}.{uuid.uuid4().int % 1_000_000:06d}"


def envelope(event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    """An event_callback shaped like Slack's documented example."""
    return {
        "token": "XXYYZZ",
        "team_id": TEAM,
        "api_app_id": APP,
        "event": event,
        "type": "event_callback",
        "authorizations": [{"enterprise_id": None, "team_id": TEAM, "user_id": BOT, "is_bot": True}],
        "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "event_context": "4-eyJldCI6Im1lc3NhZ2UiLCJ0aWQiOiJUMTIzQUJDNDU2In0",
    }


def message(thread_ts: str, ts: str, text: str, user: str = "U123ABC456", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "C123ABC456",
        "user": user,
        "text": text,
        "ts": ts,
        "thread_ts": thread_ts,
        "event_ts": ts,
        "channel_type": "channel",
        **extra,
    }


def mention(thread_ts: str, ts: str, text: str | None = None, user: str = "U123ABC456") -> dict[str, Any]:
    return {
        "type": "app_mention",
        "user": user,
        "text": text or f"<@{BOT}> is it everything a river should be?",
        "ts": ts,
        "channel": "C123ABC456",
        "event_ts": ts,
        "thread_ts": thread_ts,
    }


def alert_payload(
    status: str = "firing", group_key: str | None = None, starts_at: str = "2026-03-14T09:26:53.123456789Z"
) -> dict[str, Any]:
    """An Alertmanager webhook (version 4) for one group of two alerts."""
    key = (
        group_key or '{}/{severity="page"}:{alertname="HighErrorRate", service="checkout"}' + uuid.uuid4().hex
    )
    ends = "0001-01-01T00:00:00Z" if status == "firing" else "2026-03-14T10:02:00Z"
    labels = {"alertname": "HighErrorRate", "service": "checkout", "severity": "page"}
    return {
        "version": "4",
        "groupKey": key,
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "incident-memory",
        "groupLabels": {"alertname": "HighErrorRate", "service": "checkout"},
        "commonLabels": labels,
        "commonAnnotations": {"summary": "checkout 5xx ratio above 5%"},
        "externalURL": "http://alertmanager.example:9093",
        "alerts": [
            {
                "status": status,
                "labels": {**labels, "pod": "checkout-7d9f-abc12"},
                "annotations": {"summary": "checkout 5xx ratio above 5%"},
                "startsAt": starts_at,
                "endsAt": ends,
                "generatorURL": "http://prometheus.example:9090/graph?g0.expr=...",
                "fingerprint": "a1b2c3d4e5f60718",
            },
            {
                "status": status,
                "labels": {**labels, "pod": "checkout-7d9f-def34"},
                "annotations": {"summary": "checkout 5xx ratio above 5%"},
                "startsAt": "2026-03-14T09:27:30Z",
                "endsAt": ends,
                "generatorURL": "http://prometheus.example:9090/graph?g0.expr=...",
                "fingerprint": "0718a1b2c3d4e5f6",
            },
        ],
    }


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def topic_count(bootstrap: str, topic: str) -> int:
    """How many messages a (fresh, non-transactional) topic holds: the sum of its high watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}"})
    deadline = time.monotonic() + 20
    try:
        while True:  # a just-created topic may not have its partition leaders yet
            try:
                partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
                return sum(
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in partitions
                )
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


def read_topic(
    bootstrap: str, topic: str, expected: int, timeout_s: float = 20.0
) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of `topic` from the beginning, once `expected` arrived (or the deadline passed)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])  # offset 0: from the beginning
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                if m.error() is None:
                    out.append((m.key() or b"", m.value() or b""))
        return out
    finally:
        consumer.close()


def read_events(bootstrap: str, topic: str, expected: int, timeout_s: float = 20.0) -> list[EventBase]:
    return [parse_event(value) for _, value in read_topic(bootstrap, topic, expected, timeout_s)]


def group_notification(
    status: str, group_key: str, *starts: str, ends: str = "0001-01-01T00:00:00Z"
) -> dict[str, Any]:
    """An Alertmanager notification of one group holding one alert (pod p0, p1, ...) per startsAt."""
    payload = alert_payload(status, group_key=group_key)
    template = payload["alerts"][0]
    payload["alerts"] = [
        {**template, "labels": {**template["labels"], "pod": f"p{i}"}, "startsAt": s, "endsAt": ends}
        for i, s in enumerate(starts)
    ]
    return payload
