"""kill -9 ingest while Slack keeps posting; Slack retries what was not acked: nothing lost, nothing doubled."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest

from schemas.ids import thread_key
from services.ingest.slack_signature import sign

from .harness import Pipeline, check_invariants, free_port, wait_until

pytestmark = pytest.mark.reliability
SECRET, TOKEN, BOT = "8f742231b10e8888abcd99yyyzzz85a5", "am-test-token", "U0LAN0Z89"


def signed_headers(body: bytes) -> dict[str, str]:
    ts = str(int(time.time()))
    return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": sign(SECRET, ts, body)}  # fmt: skip


CHANNEL = "C123ABC456"


def slack_message(thread: str, ts: str, text: str) -> bytes:
    event = {"type": "message", "channel": CHANNEL, "user": "U123ABC456", "text": text, "ts": ts,
             "thread_ts": thread, "event_ts": ts, "channel_type": "channel"}  # fmt: skip
    envelope: dict[str, Any] = {"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
                                "event": event, "type": "event_callback", "event_id": f"Ev{uuid.uuid4().hex[:10]}",
                                "event_time": int(time.time())}  # fmt: skip
    return json.dumps(envelope).encode()


def _post(url: str, body: bytes) -> bool:
    try:
        return httpx.post(url, content=body, headers=signed_headers(body), timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.fast
def test_kill_9_ingest_mid_stream_then_restart(pipeline: Pipeline, record: dict[str, object]) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/slack/events"
    ingest = pipeline.ingest(port, SECRET, TOKEN, BOT, team="T123ABC456", app="A123ABC456")
    pipeline.compactor()
    pipeline.projector()
    thread = f"{int(time.time()) - 3600}.{uuid.uuid4().int % 1_000_000:06d}"
    bodies: dict[str, bytes] = {}
    for i in range(120):
        ts = f"{thread.split('.')[0]}.{(int(thread.split('.')[1]) + i + 1) % 1_000_000:06d}"
        bodies[ts] = slack_message(thread, ts, f"seeing 502s {i}")
    wait_until(lambda: _post(url, next(iter(bodies.values()))), 60, "ingest to answer")
    pending, retried = list(bodies), 0
    for n, ts in enumerate(list(pending)):
        if n == len(bodies) // 2:
            ingest.kill9()
            ingest.start()
        if _post(url, bodies[ts]):
            pending.remove(ts)
    while pending:  # Slack's retries: re-deliver whatever was not acknowledged
        wait_until(lambda: _post(url, bodies[pending[0]]), 60, "restarted ingest to answer")
        pending.pop(0)
        retried += 1
    key = thread_key(CHANNEL, thread)  # a thread is its channel and its ts
    expected = {f"{key}:-:human:{ts}" for ts in bodies}
    pipeline.wait_rows(expected, 120)
    record.update(check_invariants(pipeline, expected), slack_retries=retried)
