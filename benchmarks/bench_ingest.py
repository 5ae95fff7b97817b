"""Ingest under load: signed Slack events at a fixed arrival rate against the real server and broker.

Open loop: request i is due at start + i/rate whatever happened before it, so a slow server
shows up as latency (and a missed rate) instead of silently slowing the generator. The client
is a minimal HTTP/1.1 keep-alive client on asyncio streams (an off-the-shelf async client costs
more CPU per request than the server under test on a 2-core machine). Every 200 means "acked
by the broker", so afterwards every event of every acked request must be on the topics:
`events_lost` counts those that are not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from benchmarks.http_load import Outcome, load, run_loop, signed_slack_request
from deploy.local.pipeline import Pipeline, delete_topics
from schemas.ids import thread_key
from schemas.topics import TOPICS, ensure_topics
from services.runtime.settings import Settings

SECRET = "bench-signing-secret"
TOKEN = "bench-alertmanager-token"
BOT = "UBENCHBOT"
MENTION_EVERY = 50  # one request in 50 is an app_mention (a human message and a wake)


@dataclass(frozen=True)
class Planned:
    request: bytes
    expected: tuple[tuple[str, str], ...]  # (topic role, message_id) the request must leave on the broker


def run(
    settings: Settings, duration_s: float = 10.0, rate: float = 1000.0, connections: int = 64
) -> dict[str, Any]:
    suffix = uuid.uuid4().hex[:10]
    names = {spec.name.split(".")[-1]: f"{spec.name}.bench.{suffix}" for spec in TOPICS}
    ensure_topics(
        settings.kafka_bootstrap_servers, tuple(replace(s, name=f"{s.name}.bench.{suffix}") for s in TOPICS)
    )
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as logs:
        secrets = {
            "SLACK_SIGNING_SECRET": SECRET,
            "ALERTMANAGER_TOKEN": TOKEN,
            "SLACK_BOT_USER_ID": BOT,
            "SLACK_TEAM_ID": "T0BENCH",
            "SLACK_APP_ID": "A0BENCH",
        }
        pipe = Pipeline(
            settings.kafka_bootstrap_servers, "", f"bench_{suffix}", names, Path(logs), extra_env=secrets
        )
        try:
            # its log a file, not a pipe: a chatty server must never block on it
            server = pipe.ingest(schema=False, extra=["--log-level", "WARNING"]).wait_ready(30)
            assert server.port is not None
            planned = _plan(int(duration_s * rate))
            outcome = run_loop(load(server.port, [p.request for p in planned], rate, connections))
        finally:
            pipe.stop_all(30)
    acked = [p for p, status in zip(planned, outcome.statuses, strict=True) if status == 200]
    found = _message_ids(settings.kafka_bootstrap_servers, [names["events"], names["wake"]])
    expected = {mid for p in acked for _, mid in p.expected}
    lost = len(expected - found)
    delete_topics(settings.kafka_bootstrap_servers, list(names.values()))
    figures = _figures(outcome, len(planned), len(acked), lost, duration_s, rate, connections, len(expected))
    return {
        "title": "Ingest: signed Slack events over HTTP, acked by Kafka",
        "markdown": _markdown(figures),
        **figures,
    }


def _plan(n: int) -> list[Planned]:
    """Every request, signed up front (well inside Slack's 5-minute window), so the clock covers I/O only."""
    base = int(time.time()) - 600
    threads = [f"{base - 1000 + t}.{t:06d}" for t in range(100)]
    out = []
    for i in range(n):
        thread = threads[i % len(threads)]
        ts = f"{base + i // 1_000_000}.{i % 1_000_000:06d}"
        mention = i % MENTION_EVERY == 0
        event: dict[str, Any] = {
            "type": "app_mention" if mention else "message",
            "channel": "C0BENCH",
            "user": f"U{i % 37:04d}",
            "text": (f"<@{BOT}> " if mention else "") + f"bench message {i}: p99 at 09:26 was 1.8s",
            "ts": ts,
            "thread_ts": thread,
            "event_ts": ts,
        }
        body = json.dumps(
            {
                "token": "XXYYZZ",
                "team_id": "T0BENCH",
                "api_app_id": "A0BENCH",
                "event": event,
                "type": "event_callback",
                "event_id": f"Ev{i:010d}",
                "event_time": base + i // 1000,
            }
        ).encode()
        request = signed_slack_request(SECRET, body)
        key = thread_key("C0BENCH", thread)  # a thread is its channel and its ts
        expected = [("events", f"{key}:-:human:{ts}")]
        if mention:
            expected.append(("wake", f"{key}:-:wake:{ts}"))
        out.append(Planned(request, tuple(expected)))
    return out


def _figures(
    outcome: Outcome,
    sent: int,
    acked: int,
    lost: int,
    duration_s: float,
    rate: float,
    conns: int,
    events: int,
) -> dict[str, Any]:
    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else 0.0

    statuses = outcome.statuses
    return {
        "target_rps": rate,
        "duration_s": duration_s,
        "connections": conns,
        "requests": sent,
        "acked_200": acked,
        "non_200": sum(1 for s in statuses if s != 200),
        "achieved_rps": round(sent / outcome.elapsed, 1),
        "acked_rps": round(acked / outcome.elapsed, 1),
        "ack_p50_ms": pct(outcome.ack, 0.50),
        "ack_p99_ms": pct(outcome.ack, 0.99),
        "ack_max_ms": pct(outcome.ack, 1.0),
        "scheduled_p99_ms": pct(outcome.due, 0.99),
        "events_expected": events,
        "events_lost": lost,
        "cores": os.cpu_count(),
        "http_stack": "httptools+uvloop" if importlib.util.find_spec("httptools") else "h11+asyncio",
    }


def _markdown(f: dict[str, Any]) -> str:
    return (
        f"Open-loop load of {f['requests']} signed Slack `event_callback` requests at {f['target_rps']:.0f} req/s "
        f"for {f['duration_s']:.0f} s over {f['connections']} keep-alive connections on loopback "
        f"(1 in {MENTION_EVERY} an `app_mention`, which adds a wake). The server, the load generator and the "
        f"Kafka broker share {f['cores']} cores; uvicorn ran on {f['http_stack']}. A 200 is sent only after the broker acked every event.\n\n"
        "| figure | value |\n|---|---|\n"
        f"| achieved req/s | {f['achieved_rps']} |\n"
        f"| acked (200) req/s | {f['acked_rps']} |\n"
        f"| non-200 answers | {f['non_200']} |\n"
        f"| ack latency p50 / p99 / max (ms) | {f['ack_p50_ms']} / {f['ack_p99_ms']} / {f['ack_max_ms']} |\n"
        f"| p99 from scheduled send (ms, incl. queueing) | {f['scheduled_p99_ms']} |\n"
        f"| events expected / lost | {f['events_expected']} / {f['events_lost']} |\n"
    )


def _message_ids(bootstrap: str, topics: list[str]) -> set[str]:
    """Every message_id on `topics`, read from the beginning up to the high watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        targets: dict[tuple[str, int], int] = {}
        for topic in topics:
            for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                if high > 0:
                    targets[(topic, p)] = high
        consumer.assign([TopicPartition(t, p, 0) for t, p in targets])
        ids: set[str] = set()
        deadline = time.monotonic() + 60
        while targets and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                if m.error() is not None:
                    continue
                ids.add(json.loads(m.value() or b"{}").get("message_id", ""))
                key = (m.topic() or "", m.partition() or 0)
                if key in targets and (m.offset() or 0) + 1 >= targets[key]:
                    del targets[key]
        return ids
    finally:
        consumer.close()
