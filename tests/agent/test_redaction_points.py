"""Redaction where text leaves for a model or for Slack: the poster, the MCP server's errors and
get_evidence. (Digests: tests/compactor/test_redacted_digests.py; the whole pipeline:
tests/integration/test_no_secret_leaves.py.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import psycopg
import pytest
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from psycopg.types.json import Jsonb

from deploy.local.secret_testdata import SECRETS, leaked, loki_with_secrets, slack_message_with_secrets
from schemas.events import EventBase, ThreadPost
from schemas.ids import message_id, thread_key
from services.agent.stand_in_model import DeterministicStandInModel
from services.telemetry_mcp.client import session, text_of
from services.telemetry_mcp.server import _guarded
from services.telemetry_mcp.wire import UpstreamError
from services.voice.blocks import SlackMessage

from .test_voice_rules import AT, FakeSlack, commit, play, voice


class BlockSlack(FakeSlack):
    """FakeSlack that keeps the blocks too: the whole body a post would send."""

    async def post(self, message: SlackMessage) -> str:
        ts = await super().post(message)
        self.messages[-1]["blocks"] = message.blocks
        return ts


def test_the_poster_never_posts_a_credential_whatever_the_post_says() -> None:
    thread = thread_key("C0INCIDENTS", "1773458070.000100")
    hostile = ThreadPost(
        thread_ts=thread, message_id=message_id(thread, 1, "post", 0), event_time=AT, round=1, kind="summary",
        text=f"Root cause: bad DSN\n• {slack_message_with_secrets()}", model="m",
    )  # fmt: skip
    slack, emitted = BlockSlack(), list[EventBase]()
    play(voice(slack, emitted), hostile, commit(thread, 1))
    [posted] = slack.messages
    body = json.dumps(posted, ensure_ascii=False)
    assert leaked(slack_message_with_secrets())  # the post held them all
    assert leaked(body) == []
    assert "aws_access_key_id=[REDACTED:aws-access-key]" in body and "Bearer [REDACTED:bearer]" in body
    assert "gave 403 at 03:07" in body and posted["text"] == "Summary: Root cause: bad DSN"


def test_an_upstream_error_with_a_url_password_is_redacted_in_the_tool_error() -> None:
    async def failing() -> CallToolResult:
        raise UpstreamError(f"cannot reach Loki at http://admin:{SECRETS['basic-auth']}@loki:3100/x: refused")

    with pytest.raises(ToolError) as caught:
        asyncio.run(_guarded(failing)())
    assert leaked(str(caught.value)) == []
    assert str(caught.value) == "cannot reach Loki at http://admin:[REDACTED:basic-auth]@loki:3100/x: refused"


def test_get_evidence_answers_the_raw_redacted_and_the_row_stays_verbatim(
    pg_dsn: str, pg_schema: str, pg_conn: psycopg.Connection
) -> None:
    thread = "1773458070.000100"
    row_id = f"{thread}:1:tools:0"
    raw = loki_with_secrets()
    pg_conn.execute(
        "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)"
        " VALUES (%s, %s, 1, 'tool', 'call_1', %s, %s, 7, now())",
        (row_id, thread, Jsonb(raw), Jsonb({"digest": 1})),
    )
    pg_conn.commit()

    async def main() -> None:
        async with session(["--backend", "recorded", "--dsn", pg_dsn, "--schema", pg_schema]) as client:
            got = await client.call_tool("get_evidence", {"id": row_id, "thread": thread})
            assert not got.is_error, text_of(got)
            assert leaked(text_of(got)) == [] and leaked(json.dumps(got.structured_content)) == []
            answer = json.loads(text_of(got))
            values = answer["data"]["result"][0]["values"]
            assert len(values) == len(raw["data"]["result"][0]["values"])  # every line, every time
            assert [t for t, _ in values] == [t for t, _ in raw["data"]["result"][0]["values"]]

    anyio.run(main)
    stored = pg_conn.execute("SELECT content FROM agent_messages WHERE id = %s", (row_id,)).fetchone()
    assert stored is not None and stored[0] == raw  # at rest: verbatim, the audit trail


class LeakyModel(DeterministicStandInModel):
    """The stand-in, with a judge that asks about a credential and a hypothesis that quotes one: what a
    careless or prompt-injected model might write into a post."""

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        message = result.generations[0].message
        try:
            answer = json.loads(str(message.content))
        except (TypeError, ValueError):
            return result
        if isinstance(answer, dict) and answer.get("questions"):
            answer["questions"].append(f"Does password={SECRETS['password']} still work on db?")
        if isinstance(answer, dict) and isinstance(answer.get("summary"), str):
            answer["summary"] += f" (token {SECRETS['slack-token']})"
        message.content = json.dumps(answer)
        return result


def test_a_post_never_records_a_credential_the_model_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.agent.mcp_client import McpToolbox

    from . import inprocess
    from .inprocess import Seeded, telemetry_server

    monkeypatch.setattr(inprocess, "DeterministicStandInModel", LeakyModel)

    async def play() -> Seeded:
        thread = Seeded()
        async with McpToolbox((telemetry_server(),)) as toolbox:
            await thread.play_seed(toolbox)
        return thread

    thread = asyncio.run(play())
    posts = [row.content for row in thread.projection.rows if row.role == "post"]
    assert len(posts) == 2
    assert any("[REDACTED:" in post for post in posts), posts
    assert all(leaked(post) == [] for post in posts), posts
