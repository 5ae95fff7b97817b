"""Play the seed thread onto real topics (the services run through deploy/local/pipeline.py).

The events are what ingest would produce for the seed's Alertmanager webhook and Slack
messages (same ids: `T:-:alert:0`, `T:-:human:<ts>`), with event times taken from the
seed itself, so every run of the test sees the same thread.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, Producer

from deploy.local.seed.incident import ALERT_STARTS_AT, seed_incident
from schemas.events import AlertReceived, EventBase, HumanMessage, Wake, parse_event
from schemas.ids import message_id


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def alert_events() -> list[EventBase]:
    seed = seed_incident()
    hook = seed.alertmanager_webhook
    mid = message_id(seed.thread_ts, None, "alert", 0)
    at = _dt(ALERT_STARTS_AT)
    alert = AlertReceived(
        thread_ts=seed.thread_ts,
        message_id=mid,
        event_time=at,
        status="firing",
        service=seed.service,
        alertname=seed.alertname,
        fingerprint=hook["alerts"][0]["fingerprint"],
        window_start=_dt(seed.window_start),
        window_end=_dt(seed.window_end),
        alert=hook,
    )
    return [alert]


def alert_wake() -> Wake:
    seed = seed_incident()
    mid = message_id(seed.thread_ts, None, "alert", 0)
    return Wake(
        thread_ts=seed.thread_ts,
        message_id=message_id(seed.thread_ts, None, "wake", "alert"),
        event_time=_dt(ALERT_STARTS_AT),
        reason="alert",
        trigger_message_id=mid,
    )


def human_events(mention: bool) -> list[HumanMessage]:
    seed = seed_incident()
    return [
        HumanMessage(
            thread_ts=seed.thread_ts,
            message_id=message_id(seed.thread_ts, None, "human", h.ts),
            event_time=datetime.fromtimestamp(float(h.ts), UTC),
            user=h.user,
            ts=h.ts,
            text=h.text,
            mention=h.mention,
        )
        for h in seed.humans
        if h.mention == mention
    ]


def mention_wake() -> Wake:
    (human,) = human_events(mention=True)
    return Wake(
        thread_ts=human.thread_ts,
        message_id=message_id(human.thread_ts, None, "wake", human.ts),
        event_time=human.event_time,
        reason="mention",
        trigger_message_id=human.message_id,
        user=human.user,
    )


def produce(bootstrap: str, topic: str, events: list[Any]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for event in events:
        producer.produce(topic, key=event.key(), value=event.to_bytes())
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, timeout: float = 5.0) -> list[EventBase]:
    """Every event on a topic (from the start), as parsed values."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}", "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    out: list[EventBase] = []
    deadline = time.monotonic() + timeout
    idle_since = time.monotonic()
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            if out and time.monotonic() - idle_since > 1.5:
                break
            continue
        if msg.error():
            continue
        idle_since = time.monotonic()
        with contextlib.suppress(ValueError):
            out.append(parse_event(msg.value() or b""))
    consumer.close()
    return out
