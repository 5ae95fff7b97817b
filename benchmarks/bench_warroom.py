"""War rooms (issue 34): hundreds of human turns, pastes and long alerts, held to the model's input budget.

For each generated war room (deploy/local/warroom.py; the seed names the room), projected into a fresh
schema of the real Postgres: the first investigate call's whole input as the round builds it (preamble,
prompt, the thread as the discussion policy renders it, the telemetry tool schemas), the share of the
known facts in that input, the share of the others that one `search_thread(<the fact's words>)` returns,
and the time to load the context (the one query) and to plan and render it. The round's later calls
add tool results, which the investigate loop's room check holds under the same budget; their figures
on the wire are in tests/agent/test_warroom_wire.py.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import psycopg
from langchain_core.messages import SystemMessage
from psycopg import sql

from deploy.local.seed import SEED_RECORDING
from deploy.local.warroom import WarRoom, as_rows, generate
from schemas.migrate import apply_migrations
from schemas.tokens import count_tokens, render_for_model
from services.agent.config import AgentConfig, McpServer, default_cli
from services.agent.mcp_client import McpToolbox
from services.agent.round import discussion_policy
from services.compactor.turns import with_turn_compact
from services.context_render import prompts
from services.context_render.context import LoadedContext, load_context, message_tokens, to_messages
from services.context_render.discussion import plan_discussion
from services.context_render.preamble import Trigger, render_preamble
from services.projector.mapping import Row, map_event
from services.runtime.kafka_client import KafkaClient
from services.telemetry_mcp.thread_search import ThreadSearch

SCHEMA = "bench_warroom"
SHAPES: list[dict[str, Any]] = [
    {
        "seed": 34
    },  # the issue's: 600 messages, 15 people, 20 x 150-line pastes, 40,000 chars, 400 KB, 500 alerts
    {"seed": 1, "messages": 300, "people": 8, "pastes": 10},
    {"seed": 2, "messages": 1000, "people": 30, "pastes": 40, "facts": 40},
    {"seed": 3, "messages": 200, "people": 5, "pastes": 0, "huge_chars": 0, "desc_bytes": 2_000, "alerts": 3},
    {"seed": 4, "messages": 600, "people": 15, "paste_lines": 400, "mentions": 12},
]


async def _tool_schemas(dsn: str) -> list[dict[str, Any]]:
    server = McpServer(
        name="telemetry",
        command=[default_cli(), "telemetry-mcp", "--backend", "recorded"],
        env={"DATABASE_URL": dsn, "TELEMETRY_MCP_SCHEMA": SCHEMA, "TELEMETRY_MCP_RECORDING": SEED_RECORDING},
    )
    async with McpToolbox((server,)) as toolbox:
        return toolbox.tool_specs(exclude=("get_evidence",))


def _project(conn: psycopg.Connection, room: WarRoom) -> int:
    """The room's rows as the pipeline writes them: each turn through the compactor's write-time compact
    (redaction, pastes: services/compactor/turns.py), then the projector's own mapping. Returns how many
    human rows got a compact."""
    rows = [
        op
        for event in room.events
        for op in map_event(with_turn_compact(event) or event)
        if isinstance(op, Row) and not op.staged
    ]
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)"
            " VALUES (%s, %s, NULL, %s, NULL, %s::jsonb, %s::jsonb, %s, %s)",
            [(r.id, r.thread_ts, r.role, r.content, r.compact, r.tokens, r.created_at) for r in rows],
        )  # fmt: skip
    return sum(1 for r in rows if r.role == "human" and r.compact is not None)


def _one(conn: psycopg.Connection, dsn: str, room: WarRoom, schemas: list[dict[str, Any]]) -> dict[str, Any]:
    assert room.trigger is not None
    config = AgentConfig(kafka=KafkaClient.plaintext("unused:9092"), database_url=dsn)
    started = time.perf_counter()
    ctx = load_context(conn, room.thread_ts)
    loaded = time.perf_counter()
    now = datetime.now(UTC)
    events = {
        e.target_id: e
        for e in plan_discussion(ctx.rows, discussion_policy(config, room.trigger.message_id), 1, now)
    }
    rows = tuple(replace(r, value=events[r.id].compact) if r.id in events else r for r in ctx.rows)
    shown = LoadedContext(ctx.thread_ts, rows, ctx.state)
    preamble = render_preamble(shown, 1, Trigger("mention", room.trigger.message_id, room.trigger.user), now)
    messages = [SystemMessage(content=f"{preamble}\n\n{prompts.INVESTIGATE}"), *to_messages(rows)]
    rendered = time.perf_counter()
    tokens = message_tokens(messages) + count_tokens(render_for_model(schemas))
    seen = "\n".join(str(m.content) for m in messages)
    search = ThreadSearch(dsn, SCHEMA)
    in_context = [f for f in room.facts if f.needle in seen]
    found = 0
    for fact in room.facts:
        if fact in in_context:
            continue
        answer = asyncio.run(search.search(room.thread_ts, fact.needle))
        found += any(h["id"] == fact.message_id and fact.needle in h["text"] for h in answer["hits"])
    raw = sum(count_tokens(render_for_model(c)) for _, _, c in as_rows(room))
    return {
        "messages": len(room.events) - 1,
        "raw_tokens": raw,
        "row_tokens": ctx.token_sum,
        "first_investigate_input": tokens,
        "facts": len(room.facts),
        "in_context": len(in_context),
        "by_one_search": found,
        "load_ms": round(1000 * (loaded - started), 1),
        "plan_render_ms": round(1000 * (rendered - loaded), 1),
        "clipped": sum(e.policy == "clipped" for e in events.values()),
        "folded": sum(e.policy == "folded" for e in events.values()),
    }


def run(settings: Any = None) -> dict[str, Any]:
    from services.runtime.settings import Settings

    dsn = (settings or Settings.from_env()).database_url
    results = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
        apply_migrations(conn, SCHEMA)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(SCHEMA)))
        schemas = asyncio.run(_tool_schemas(dsn))
        try:
            for shape in SHAPES:
                room = generate(**shape)
                compacted = _project(conn, room)
                results.append({"shape": shape, "compacted": compacted, **_one(conn, dsn, room, schemas)})
        finally:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    lines = [
        "| room | messages | raw tokens | row tokens after write-time compacts (rows compacted) | first investigate input | facts in input | others by one search_thread | load ms | plan+render ms | clipped / folded |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| `{r['shape']}` | {r['messages']} | {r['raw_tokens']:,} | {r['row_tokens']:,} ({r['compacted']}) | "
            f"{r['first_investigate_input']:,} | "
            f"{r['in_context']}/{r['facts']} | {r['by_one_search']}/{r['facts'] - r['in_context']} | "
            f"{r['load_ms']} | {r['plan_render_ms']} | {r['clipped']} / {r['folded']} |"
        )
    worst = max(r["first_investigate_input"] for r in results)
    return {
        "title": "War rooms: the input budget on long threads (issue 34)",
        "rooms": results,
        "largest_first_investigate_input": worst,
        "median_plan_render_ms": statistics.median(r["plan_render_ms"] for r in results),
        "markdown": "\n".join(lines)
        + "\n\nInput budget 8,000 tokens (the default). The round's later calls on the wire: "
        "`pytest tests/agent/test_warroom_wire.py -s` prints every request's tokens.\n",
    }
