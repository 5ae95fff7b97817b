"""`get_evidence` through the MCP server (a real subprocess over stdio) against the real Postgres."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import anyio
import psycopg
from psycopg.types.json import Jsonb

from deploy.local.seed import seed_incident
from services.telemetry_mcp.client import session, text_of

THREAD = "1773458070.000100"


def _insert(
    conn: psycopg.Connection, table: str, row_id: str, round_: int | None, role: str, content: object
) -> None:
    conn.execute(
        f"INSERT INTO {table} (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (row_id, THREAD, round_, role, "call_1" if role == "tool" else None, Jsonb(content), Jsonb({"digest": 1}), 7,
         datetime(2026, 3, 14, 3, 15, tzinfo=UTC)),
    )  # fmt: skip


def test_get_evidence_returns_the_stored_raw_verbatim(
    pg_dsn: str, pg_schema: str, pg_conn: psycopg.Connection
) -> None:
    raw = seed_incident().loki
    tool_id = f"{THREAD}:1:tools:0"
    staged_id = f"{THREAD}:2:tools:0"
    human = "rolled one pod back to 3.13.2 — watching it ✅"
    _insert(pg_conn, "agent_messages", tool_id, 1, "tool", raw)
    _insert(pg_conn, "agent_messages", f"{THREAD}:-:human:1773458412.000200", None, "human", human)
    _insert(pg_conn, "round_staging", staged_id, 2, "tool", {"kind": "EventList", "items": []})
    pg_conn.commit()
    stored = pg_conn.execute("SELECT content FROM agent_messages WHERE id = %s", (tool_id,)).fetchone()
    assert stored is not None

    async def main() -> None:
        async with session(["--backend", "recorded", "--dsn", pg_dsn, "--schema", pg_schema]) as client:
            got = await client.call_tool("get_evidence", {"id": tool_id, "thread": THREAD})
            assert not got.is_error, text_of(got)
            assert json.loads(text_of(got)) == raw == stored[0]  # the raw, not the compact
            assert got.structured_content == raw
            assert got.meta is not None
            assert got.meta["incident_memory/evidence"]["role"] == "tool"
            assert got.meta["incident_memory/evidence"]["committed"] is True

            text = await client.call_tool(
                "get_evidence", {"id": f"{THREAD}:-:human:1773458412.000200", "thread": THREAD}
            )
            assert json.loads(text_of(text)) == human

            staged = await client.call_tool("get_evidence", {"id": staged_id, "thread": THREAD})
            assert json.loads(text_of(staged)) == {"kind": "EventList", "items": []}
            assert staged.meta is not None and staged.meta["incident_memory/evidence"]["committed"] is False

            missing = await client.call_tool("get_evidence", {"id": f"{THREAD}:9:tools:0", "thread": THREAD})
            assert missing.is_error
            assert f"no evidence with id '{THREAD}:9:tools:0'" in text_of(missing)

        async with session(
            ["--backend", "recorded", "--dsn", pg_dsn, "--schema", "no_such_schema_x"]
        ) as client:
            elsewhere = await client.call_tool("get_evidence", {"id": tool_id, "thread": THREAD})
            assert elsewhere.is_error and "cannot read evidence from Postgres" in text_of(elsewhere)

    anyio.run(main)
    # get_evidence only reads: the row is unchanged
    after = pg_conn.execute(
        "SELECT content, compact FROM agent_messages WHERE id = %s", (tool_id,)
    ).fetchone()
    assert after == (raw, {"digest": 1})


def test_get_evidence_answers_only_rows_of_the_thread_it_serves(
    pg_dsn: str, pg_schema: str, pg_conn: psycopg.Connection
) -> None:
    """Another thread's raw is never answered: not by its id, not by a forged id under this thread."""
    other = "C0OTHER-1773000000.000100"
    secret_id = f"{other}:1:tools:0"
    _insert(pg_conn, "agent_messages", f"{THREAD}:1:tools:0", 1, "tool", {"mine": 1})
    pg_conn.execute(
        "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)"
        " VALUES (%s, %s, 1, 'tool', 'c', %s, NULL, 1, now())",
        (secret_id, other, Jsonb({"other_incident": "private raw"})),
    )
    pg_conn.commit()

    async def main() -> None:
        async with session(["--backend", "recorded", "--dsn", pg_dsn, "--schema", pg_schema]) as client:
            mine = await client.call_tool("get_evidence", {"id": f"{THREAD}:1:tools:0", "thread": THREAD})
            assert json.loads(text_of(mine)) == {"mine": 1}
            for asked in ({"id": secret_id, "thread": THREAD}, {"id": secret_id}):
                refused = await client.call_tool("get_evidence", asked)
                assert refused.is_error and "private raw" not in text_of(refused)
            # The id's thread part and the row's thread_ts must both match (SQL WHERE thread_ts AND id).
            pg_conn.execute(
                "UPDATE agent_messages SET id = %s WHERE id = %s", (f"{THREAD}:7:tools:0", secret_id)
            )
            pg_conn.commit()
            forged = await client.call_tool("get_evidence", {"id": f"{THREAD}:7:tools:0", "thread": THREAD})
            assert forged.is_error and "private raw" not in text_of(forged)

    anyio.run(main)
