"""Issue 34's "done when", on the wire: a generated war room's round, every request the agent sends to an
OpenAI-compatible endpoint counted, and every known fact accounted for, fact by fact.

The war room (deploy/local/warroom.py): an alert with a 400 KB description and a group of 500 alerts,
then 600 messages from 15 people with 20 pastes of 150-line logs and one 40,000-character message, and
a mention. The round runs in process (tests/agent/inprocess.py: the compactor's, projector's and agent's
own code, the telemetry MCP server over stdio) with ChatOpenAI talking to deploy/local/openai_standin.py,
which records each request as received. Each request is counted with cl100k_base: every message's
content and tool calls, the tool schemas, and the per-message framing of the chat format (3 tokens a
message, 3 for the reply). A fact is either in a request's messages, or returned by one `search_thread`
call (on the real Postgres, the room projected into a fresh schema) while the request offered that tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from deploy.local.openai_standin import MODEL, OpenAIStandin, WireCall, running
from deploy.local.warroom import WarRoom, as_rows, generate
from schemas.tokens import count_tokens, render_for_model
from services.agent.config import ModelConfig
from services.agent.mcp_client import McpToolbox
from services.agent.models import build_models
from services.telemetry_mcp.thread_search import ThreadSearch

from . import inprocess
from .inprocess import Seeded, telemetry_server

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]
SEARCH_TOOL = "search_thread"
BUDGET = 8000
FRAMING = 3  # tokens of the chat format around each message, and before the reply


@pytest.fixture(scope="module")
def oai() -> Iterator[OpenAIStandin]:
    with running() as standin:
        yield standin


def wire_tokens(body: dict[str, Any]) -> int:
    """One request's input as sent: messages (content, tool calls), tool schemas, the chat framing."""
    total = FRAMING
    for m in body["messages"]:
        total += FRAMING + count_tokens(render_for_model(m.get("content") or ""))
        for call in m.get("tool_calls") or []:
            total += count_tokens(call["function"]["name"] + call["function"]["arguments"])
    return total + (count_tokens(render_for_model(body["tools"])) if body.get("tools") else 0)


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for the module: ChatOpenAI's pooled HTTP client outlives a single asyncio.run."""
    running_loop = asyncio.new_event_loop()
    yield running_loop
    running_loop.close()


def play(room: WarRoom, oai: OpenAIStandin, loop: asyncio.AbstractEventLoop) -> list[WireCall]:
    async def main() -> None:
        thread = Seeded()
        async with McpToolbox((telemetry_server(),)) as toolbox:
            for event in room.events:
                thread.projection.apply(event)
            await thread.run(toolbox, room.wake())

    with pytest.MonkeyPatch.context() as mp:
        for key, value in oai.env().items():
            mp.setenv(key, value)
        models = build_models(ModelConfig(agent=MODEL, judge=MODEL))
        mp.setattr(inprocess, "DeterministicStandInModel", lambda: models.agent)
        mp.setattr(inprocess, "MODEL_NAME", models.agent_name)
        before = len(oai.calls())
        loop.run_until_complete(main())
        return oai.calls()[before:]


def project(conn: psycopg.Connection, room: WarRoom) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)"
            " VALUES (%s, %s, NULL, %s, NULL, %s, NULL, 1, %s)",
            [(rid, room.thread_ts, role, Jsonb(content), datetime(2026, 3, 14, tzinfo=UTC))
             for rid, role, content in as_rows(room)],
        )  # fmt: skip
    conn.commit()


@pytest.mark.parametrize("seed", [34, 2026])
def test_a_war_room_round_stays_within_budget_on_the_wire_and_every_fact_is_reachable(
    seed: int,
    oai: OpenAIStandin,
    loop: asyncio.AbstractEventLoop,
    pg_dsn: str,
    pg_schema: str,
    pg_conn: psycopg.Connection,
) -> None:
    room = generate(seed)  # 600 messages, 15 people, 20 x 150-line pastes, 40,000 chars, 400 KB, 500 alerts
    calls = play(room, oai, loop)
    assert calls and all(c.status == 200 for c in calls), [c.error for c in calls if c.status != 200]
    sizes = [wire_tokens(c.body) for c in calls]
    assert max(sizes) <= BUDGET, sizes
    offering = [
        c.body for c in calls if any(t["function"]["name"] == SEARCH_TOOL for t in c.body.get("tools") or [])
    ]
    assert offering, "search_thread was never offered to the model"
    seen = "\n".join(render_for_model(m.get("content") or "") for b in offering for m in b["messages"])

    project(pg_conn, room)
    search = ThreadSearch(pg_dsn, pg_schema)
    where: dict[str, str] = {}
    for fact in room.facts:
        if fact.needle in seen:
            where[f"{fact.needle} ({fact.message_id})"] = "in context"
            continue
        answer = loop.run_until_complete(search.search(room.thread_ts, fact.needle))
        hits = [h for h in answer["hits"] if h["id"] == fact.message_id and fact.needle in h["text"]]
        where[f"{fact.needle} ({fact.message_id})"] = "by search_thread" if hits else "LOST"
    print(f"seed {seed}: model inputs {sizes}; facts {where}")
    assert len(where) == len(room.facts) and "LOST" not in where.values(), where
    assert (
        list(where.values()).count("in context") >= 1
    )  # salient older turns are shown, not only recent ones
