"""`search_thread(query)` on the real Postgres, through the MCP server: a war room's facts one call away,
verbatim, and never another thread's turns (the agent sets the thread; the model cannot)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import anyio
import psycopg
import pytest
from psycopg.types.json import Jsonb

from deploy.local.warroom import WarRoom, as_rows, generate
from services.agent.mcp_client import THREAD_ARG, tool_spec
from services.telemetry_mcp.client import session, text_of
from services.telemetry_mcp.thread_search import excerpt

pytestmark = pytest.mark.stack
SEARCH_TOOL = "search_thread"


def _project(conn: psycopg.Connection, room: WarRoom, thread_ts: str | None = None) -> None:
    thread = thread_ts or room.thread_ts
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)"
            " VALUES (%s, %s, NULL, %s, NULL, %s, NULL, 1, %s)",
            [(rid.replace(room.thread_ts, thread), thread, role, Jsonb(content), datetime(2026, 3, 14, tzinfo=UTC))
             for rid, role, content in as_rows(room)],
        )  # fmt: skip
    conn.commit()


def test_every_fact_is_one_search_away_and_only_in_its_own_thread(
    pg_dsn: str, pg_schema: str, pg_conn: psycopg.Connection
) -> None:
    room = generate(11, messages=300, pastes=6, paste_lines=40, desc_bytes=2_000, alerts=20, facts=16)
    other = "C0OTHER-1773400000.000100"
    _project(pg_conn, room)
    _project(pg_conn, room, other)  # the very same words in another thread
    plan = pg_conn.execute(
        "EXPLAIN SELECT 1 FROM agent_messages WHERE role = 'human' AND "
        "to_tsvector('english'::regconfig, content ->> 'text') @@ to_tsquery('english', 'rolled')"
    ).fetchall()
    assert "agent_messages_human_text" in " ".join(str(r[0]) for r in plan)  # migration 007's GIN index

    async def main() -> list[dict[str, Any]]:
        answers = []
        async with session(["--backend", "recorded", "--dsn", pg_dsn, "--schema", pg_schema]) as client:
            for fact in room.facts:
                args = {"query": fact.needle, THREAD_ARG: room.thread_ts}  # as McpToolbox.call sets it
                got = await client.call_tool(SEARCH_TOOL, args)
                assert not got.is_error, text_of(got)
                answers.append(json.loads(text_of(got)))
            empty = await client.call_tool(SEARCH_TOOL, {"query": " ", THREAD_ARG: room.thread_ts})
            assert empty.is_error and "1 to 500 characters" in text_of(empty)
            unscoped = await client.call_tool(SEARCH_TOOL, {"query": "rolled back"})
            assert unscoped.is_error and "name the thread" in text_of(unscoped)
        return answers

    answers = anyio.run(main)
    for fact, answer in zip(room.facts, answers, strict=True):
        assert all(h["id"].startswith(f"{room.thread_ts}:") for h in answer["hits"]), "another thread's turn"
        found = [h for h in answer["hits"] if h["id"] == fact.message_id]
        assert found, f"{fact.kind} fact {fact.needle!r} not returned by search_thread({fact.needle!r})"
        assert fact.needle in found[0]["text"] and found[0]["user"] and found[0]["time"]


def test_the_model_is_never_offered_the_thread() -> None:
    from mcp.types import Tool

    props = {"query": {"type": "string"}, THREAD_ARG: {"type": "string"}}
    spec = tool_spec(Tool(name=SEARCH_TOOL, input_schema={"type": "object", "properties": props}))
    assert set(spec["function"]["parameters"]["properties"]) == {"query"}  # McpToolbox.call sets the thread


def test_a_long_turn_is_answered_by_its_own_words_around_the_match() -> None:
    text = "config diff: " + "".join(f"key_{n} = {n * 7}\n" for n in range(3000)) + "we rolled back at 03:41"
    got = excerpt(text, "rolled back")
    assert "we rolled back at 03:41" in got and got.startswith("[") and "chars before]" in got


def test_an_answer_is_redacted_like_everything_a_model_is_sent(
    pg_dsn: str, pg_schema: str, pg_conn: psycopg.Connection
) -> None:
    import asyncio

    from services.telemetry_mcp.thread_search import ThreadSearch

    room = generate(5, messages=3, pastes=0, huge_chars=0, desc_bytes=0, alerts=1, facts=0, mentions=0)
    _project(pg_conn, room)
    leaked = "we rolled back; the db password=hunter2-Secret9 is in the runbook"
    pg_conn.execute(
        "UPDATE agent_messages SET content = jsonb_set(content, '{text}', to_jsonb(%s::text)) WHERE id = %s",
        (leaked, room.events[1].message_id),
    )
    pg_conn.commit()
    answer = asyncio.run(ThreadSearch(pg_dsn, pg_schema).search(room.thread_ts, "rolled back"))
    (hit,) = [h for h in answer["hits"] if h["id"] == room.events[1].message_id]
    assert "hunter2" not in hit["text"] and "[REDACTED" in hit["text"] and "rolled back" in hit["text"]
