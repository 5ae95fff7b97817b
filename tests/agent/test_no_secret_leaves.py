"""Done-when (issue 32): no credential leaves for a model or for Slack, through the whole pipeline.

The seed incident, played as the demo plays it (ingest over HTTP, the compactor, the projector, the
agent and the Slack poster as processes, on the real Kafka and Postgres), with credentials planted
where they turn up in real incidents: Loki lines (a DSN with its password on 30 error lines, a
password, an AWS key pair, a Slack token, a PEM key split over lines, a bearer JWT, a GitHub token in
a git remote), a Kubernetes event message, a Prometheus label, an alert annotation and a pasted Slack
message. The model is reached over the OpenAI wire (deploy/local/openai_standin.py, which records
every request body) and Slack is the Slack stand-in (which keeps every message). No secret value
may appear in any request body or any post; the facts of those lines (their count, the pattern's
words, the marker in the secret's place) must; and the raw at rest still holds the secrets verbatim
(the audit trail), which also shows the secrets really went through.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from deploy.local.demo import (
    APP_ID,
    BOT_USER_ID,
    TEAM_ID,
    post_slack,
    recorded,
    round_posted,
    slack_envelope,
    slack_event,
    slack_side,
    thread_in_slack,
)
from deploy.local.openai_standin import MODEL, running
from deploy.local.pipeline import Pipeline
from deploy.local.secret_testdata import (
    PEM_BODY,
    SECRETS,
    leaked,
    loki_with_secrets,
    slack_message_with_secrets,
)
from deploy.local.seed import seed_incident

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]
TIMEOUT = 150.0


def _recording(seed: Any) -> dict[str, Any]:
    """The seed's telemetry with credentials planted in the lines, events and labels the agent reads."""
    loki = copy.deepcopy(seed.loki)
    stream = loki["data"]["result"][0]
    newest = max(int(ns) for ns, _ in stream["values"])
    planted = [line for _, line in loki_with_secrets()["data"]["result"][0]["values"]]
    stream["values"] = [
        *[[str(newest - 1000 * (i + 1)), line] for i, line in enumerate(planted)],
        *stream["values"],
    ]
    events = copy.deepcopy(seed.pod_events)
    for item in events["items"][:3]:
        item["message"] = (
            f"{item['message']}; init env DB_PASSWORD={SECRETS['password']} token={SECRETS['slack-token']}"
        )
    prometheus = copy.deepcopy(seed.prometheus)
    for series in prometheus["data"]["result"]:
        series["metric"]["scrape_url"] = (
            f"https://admin:{SECRETS['basic-auth']}@kubelet.shop.svc:10250/metrics"
        )
    return {"loki": loki, "prometheus": prometheus, "tempo": seed.tempo, "pod_events": events}


def _webhook(seed: Any) -> dict[str, Any]:
    hook = copy.deepcopy(seed.alertmanager_webhook)
    runbook = f"curl -H 'Authorization: Bearer {SECRETS['jwt']}' https://runbooks.shop.internal/x"
    for alert in hook["alerts"]:
        alert["annotations"]["debug"] = runbook
    hook.setdefault("commonAnnotations", {})["debug"] = runbook
    return hook


def _tool_contents(dsn: str, schema: str, thread_ts: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        rows = conn.execute(
            "SELECT role, content::text, compact::text FROM agent_messages WHERE thread_ts = %s ORDER BY seq",
            (thread_ts,),
        ).fetchall()
    return [f"{role}\t{content}\t{compact}" for role, content, compact in rows]


def test_no_secret_reaches_the_model_or_slack_and_the_facts_do(
    kafka_bootstrap: str, pg_dsn: str, pg_schema: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    seed = seed_incident()
    recording = tmp_path / "recording.json"
    recording.write_text(json.dumps(_recording(seed)))
    signing, am_token = secrets.token_hex(16), secrets.token_hex(16)
    with running() as oai:
        pipe = Pipeline(
            kafka_bootstrap, pg_dsn, pg_schema, topic_names, tmp_path,
            extra_env={"SLACK_SIGNING_SECRET": signing, "ALERTMANAGER_TOKEN": am_token,
                       "SLACK_BOT_USER_ID": BOT_USER_ID, "SLACK_TEAM_ID": TEAM_ID, "SLACK_APP_ID": APP_ID,
                       "TELEMETRY_MCP_RECORDING": str(recording), **oai.env()},
        )  # fmt: skip
        try:
            side = slack_side(pipe, TIMEOUT)
            procs = [
                pipe.slack(side.api_url, side.bot_token, default_channel=side.channel),
                pipe.ingest(), pipe.compactor(), pipe.projector(),
                pipe.agent(extra=["--model", MODEL, "--judge-model", MODEL]),
            ]  # fmt: skip
            for proc in procs:
                pipe.wait_until(proc.ready or (lambda: True), TIMEOUT, f"{proc.name} ready")
            ingest = procs[1]
            with httpx.Client(base_url=f"http://127.0.0.1:{ingest.port}", timeout=10) as client:
                resp = client.post(
                    "/alertmanager", json=_webhook(seed), headers={"Authorization": f"Bearer {am_token}"}
                )
                assert resp.status_code == 200, resp.text
                thread_ts = str(resp.json().get("thread_ts") or seed.thread_ts)
                channel, root_ts = pipe.wait_until(
                    recorded(pg_dsn, pg_schema, f"{thread_ts}:-:alert:0"), TIMEOUT, "alert posted"
                )
                pipe.wait_until(round_posted(pg_dsn, pg_schema, thread_ts, 1), TIMEOUT, "round 1")
                pasted = [*seed.humans[:-1]]
                texts = [(h.user, h.ts, h.text, h.mention) for h in pasted]
                texts.append(("U05DAVE", "1773458500.000100", slack_message_with_secrets(), False))
                last = seed.humans[-1]
                texts.append((last.user, "1773458600.000100", last.text, True))
                for i, (user, ts, text, mention) in enumerate(texts):
                    kind = "app_mention" if mention else "message"
                    event = slack_event(kind, root_ts, ts, user, text, channel)
                    post_slack(client, signing, slack_envelope(event, f"EvSECRET{i:03d}"))
                pipe.wait_until(round_posted(pg_dsn, pg_schema, thread_ts, 2), TIMEOUT, "round 2")
                pipe.wait_until(
                    recorded(pg_dsn, pg_schema, f"{thread_ts}:2:post:0"), TIMEOUT, "round 2 posted"
                )
            posts = thread_in_slack(side, channel, root_ts)
            rows = _tool_contents(pg_dsn, pg_schema, thread_ts)
        finally:
            pipe.stop_all()
        bodies = [json.dumps(call.body, ensure_ascii=False) for call in oai.calls()]

    # The secrets really went through: verbatim at rest (the raw is the audit trail) ...
    at_rest = set(leaked("\n".join(rows)))
    assert {"basic-auth", "password", "aws-access-key", "slack-token", "jwt"} <= at_rest, at_rest
    # ... and none of them reached the model or Slack, in any request or post.
    assert bodies and len(posts) >= 3
    for body in bodies:
        assert leaked(body) == [], leaked(body)
        assert PEM_BODY not in body
    for post in posts:
        assert leaked(json.dumps(post, ensure_ascii=False)) == []
    # The facts of those lines did: the planted DSN errors as one pattern with its exact count, the
    # markers in the secrets' places, the pasted message's words and time, the alert's own summary.
    everything = "\n".join(bodies)
    facts = [
        "db connect",
        "remote=https://[REDACTED:github-token]@github.com/acme/orders.git",
        "Bearer [REDACTED:bearer]",
        "aws_access_key_id=[REDACTED:aws-access-key]",  # the pasted Slack message
        "gave 403 at 03:07",
        "OOMKilled 3 times in 5 minutes",
        "FATAL ERROR: JS heap out of memory",  # the seed's own facts untouched
    ]
    assert "198× " in everything
    assert [f for f in facts if f not in everything] == []
    # 30 lines that differ only in the secret (and a number) are one pattern with its exact count,
    # shown whole beside the seed's lines (tests/compactor/test_loki_error_salience.py).
    assert re.search(r"30× [^\n]{0,120}db connect failed", everything)
