"""Done-when (issue 37): recall in the agent, through the whole pipeline, and a private channel's incident
never reaching another channel's thread: not its recall row, not the model's input, not a post.

The seed alert is played as the demo plays it (ingest over HTTP, compactor, projector, agent and the
Slack poster as processes, on the real Kafka and Postgres; the model over the OpenAI wire, whose
stand-in records every request; Slack is the stand-in, which keeps every message). Two incidents were
projected before it, opened 20 minutes earlier and still open, with the same telemetry (the same cause):
one in the alert's own channel, public; one in a private channel that the operator even maps together
with it (RECALL_CHANNEL_GROUPS), so only the private rule keeps it out. The first must be recalled,
shown to the model and linked in the first post with its reasons; the second must appear nowhere.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from deploy.local.demo import (
    APP_ID,
    BOT_USER_ID,
    TEAM_ID,
    recorded,
    round_posted,
    slack_side,
    thread_in_slack,
)
from deploy.local.openai_standin import MODEL, running
from deploy.local.pipeline import Pipeline
from deploy.local.seed import seed_incident
from schemas.events import (
    AlertReceived,
    CompactedToolResult,
    EventBase,
    HumanMessage,
    RoundCommitted,
    SlackPostRecorded,
)
from schemas.ids import message_id, voice_id
from services.projector import store
from services.projector.mapping import map_event

pytestmark = [pytest.mark.slow, pytest.mark.stack, pytest.mark.timeout(420)]
TIMEOUT = 150.0
PUBLIC_PAY = "1773456870.000200"  # alert-opened: its root post says where it lives
PRIVATE_PAY = "1773456871.000300"
SECRET_CHANNEL = "C0SECRETS1"
MARKER = "ZEBRA-7731"  # said only in the private incident


def other_incident(
    thread: str, opened: datetime, *, channel: str, private: bool, text: str, seed: Any
) -> list[EventBase]:
    """An open incident of another service with the seed's telemetry, its round committed, its root posted."""
    alert = dict(
        thread_ts=thread, service="payments-api", alertname="KubePodOOMKilled", fingerprint="p",
        window_start=opened - timedelta(minutes=30), window_end=opened,
        alert={"commonLabels": {"service": "payments-api", "namespace": "shop", "severity": "critical"}},
    )  # fmt: skip
    tools = [("query_loki", seed.loki), ("get_pod_events", seed.pod_events)]
    ids = [message_id(thread, 1, "tools", k) for k in range(len(tools))]
    post_id = message_id(thread, None, "alert", 0)
    return [
        AlertReceived(message_id=post_id, event_time=opened, status="firing", **alert),  # type: ignore[arg-type]
        SlackPostRecorded(thread_ts=thread, message_id=voice_id(post_id, "posted"), post_id=post_id,
                          event_time=opened + timedelta(seconds=1), phase="posted", channel=channel,
                          slack_ts=f"{thread.split('.')[0]}.000900", root=True, channel_private=private),
        *[CompactedToolResult(thread_ts=thread, message_id=mid, event_time=opened + timedelta(seconds=5), round=1,
                              tool_call_id=f"call_{k}", tool=tool, args={"q": tool}, raw=raw, compact={"n": 1},
                              tokens=5, raw_tokens=50, raw_sha256="0" * 64, compactor_version="t", budget=400)
          for k, (mid, (tool, raw)) in enumerate(zip(ids, tools, strict=True))],
        RoundCommitted(thread_ts=thread, message_id=message_id(thread, 1, "commit", 0),
                       event_time=opened + timedelta(seconds=6), round=1, message_ids=ids),
        HumanMessage(thread_ts=thread, message_id=message_id(thread, None, "human", "1"),
                     event_time=opened + timedelta(minutes=2), user="U9", ts="1", text=text),
    ]  # fmt: skip


def project(conn: psycopg.Connection, events: list[EventBase], schema: str) -> None:
    """The events through the projector's own SQL in one transaction (no Kafka: they happened before)."""
    with conn.transaction():
        result = store.apply_batch(
            conn, [(k, map_event(e)) for k, e in enumerate(events)], group="planted", topic="planted",
            partitions=[0], next_offsets={0: len(events)}, schema=schema,
        )  # fmt: skip
    assert result.rejections == []


def test_recall_reaches_model_and_post_and_a_private_incident_never_does(
    kafka_bootstrap: str, pg_dsn: str, pg_schema: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    seed = seed_incident()
    opened = datetime.fromisoformat(seed.alertmanager_webhook["alerts"][0]["startsAt"]).astimezone(UTC)
    signing, am_token = secrets.token_hex(16), secrets.token_hex(16)
    with running() as oai:
        pipe = Pipeline(
            kafka_bootstrap, pg_dsn, pg_schema, topic_names, tmp_path,
            extra_env={"SLACK_SIGNING_SECRET": signing, "ALERTMANAGER_TOKEN": am_token,
                       "SLACK_BOT_USER_ID": BOT_USER_ID, "SLACK_TEAM_ID": TEAM_ID, "SLACK_APP_ID": APP_ID,
                       **oai.env()},
        )  # fmt: skip
        try:
            side = slack_side(pipe, TIMEOUT)
            pipe.extra_env["RECALL_CHANNEL_GROUPS"] = json.dumps([[side.channel, SECRET_CHANNEL]])
            earlier = opened - timedelta(minutes=20)
            planted = [
                *other_incident(PUBLIC_PAY, earlier, channel=side.channel, private=False, seed=seed,
                                text="payments pods OOMKilled, restarted the payments-api pods"),
                *other_incident(PRIVATE_PAY, earlier, channel=SECRET_CHANNEL, private=True, seed=seed,
                                text=f"{MARKER} customer escalation; rolled back to 9.9.9-zebra"),
            ]  # fmt: skip
            with psycopg.connect(pg_dsn, options=f"-c search_path={pg_schema}") as conn:
                project(conn, planted, pg_schema)
            procs = [
                pipe.slack(side.api_url, side.bot_token, default_channel=side.channel),
                pipe.ingest(), pipe.compactor(), pipe.projector(),
                pipe.agent(extra=["--model", MODEL, "--judge-model", MODEL]),
            ]  # fmt: skip
            for proc in procs:
                pipe.wait_until(proc.ready or (lambda: True), TIMEOUT, f"{proc.name} ready")
            with httpx.Client(base_url=f"http://127.0.0.1:{procs[1].port}", timeout=10) as client:
                resp = client.post(
                    "/alertmanager",
                    json=seed.alertmanager_webhook,
                    headers={"Authorization": f"Bearer {am_token}"},
                )
                assert resp.status_code == 200, resp.text
            thread = str(resp.json().get("thread_ts") or seed.thread_ts)
            channel, root_ts = pipe.wait_until(
                recorded(pg_dsn, pg_schema, f"{thread}:-:alert:0"), TIMEOUT, "alert posted"
            )
            pipe.wait_until(round_posted(pg_dsn, pg_schema, thread, 1), TIMEOUT, "round 1")
            pipe.wait_until(recorded(pg_dsn, pg_schema, f"{thread}:1:post:0"), TIMEOUT, "round 1 posted")
            posts = thread_in_slack(side, channel, root_ts)
            with psycopg.connect(pg_dsn, options=f"-c search_path={pg_schema}") as conn:
                row = conn.execute(
                    "SELECT role, content FROM agent_messages WHERE id = %s", (f"{thread}:-:recall:0",)
                ).fetchone()
        finally:
            pipe.stop_all()
        bodies = [json.dumps(call.body, ensure_ascii=False) for call in oai.calls()]

    # Recorded once, as a row beside the alert: the public concurrent incident, never the private one.
    assert row is not None and row[0] == "alert"
    hits = row[1]["recall"]
    assert [(h["thread"], h["kind"]) for h in hits if h["kind"] == "concurrent"] == [
        (PUBLIC_PAY, "concurrent")
    ]
    assert all(h["thread"] != PRIVATE_PAY for h in hits) and hits[0]["reasons"]
    link = f"https://slack.com/archives/{side.channel}/p{PUBLIC_PAY.split('.')[0]}000900"
    assert hits[0]["link"] == link
    # The model was shown it (framed as data), and the first post links it with its reasons.
    assert any(PUBLIC_PAY in b and "recall of other incidents" in b for b in bodies)
    first = next(p for p in posts if "Concurrent incident" in json.dumps(p))
    assert f"<{link}|{PUBLIC_PAY}>" in json.dumps(first, ensure_ascii=False)
    assert "error patterns shared" in json.dumps(first, ensure_ascii=False)
    # The private channel's incident reached neither the model nor Slack.
    for text in [*bodies, *(json.dumps(p, ensure_ascii=False) for p in posts)]:
        assert PRIVATE_PAY not in text and MARKER not in text and "zebra" not in text
