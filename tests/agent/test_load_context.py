"""loadContext on the real database: ONE SQL statement reads a thread's messages (invariant 4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from schemas.tokens import count_value_tokens
from services.context_render.context import load_context, to_messages

T = "1773458070.000100"
T0 = datetime(2026, 3, 14, 3, 14, 30, tzinfo=UTC)


class CountingCursor(psycopg.Cursor[Any]):
    """Records every statement sent through a cursor of this connection."""

    statements: list[str] = []

    def execute(self, query: Any, params: Any = None, **kw: Any) -> CountingCursor:
        CountingCursor.statements.append(str(query))
        super().execute(query, params, **kw)
        return self


def _insert(conn: psycopg.Connection, rows: list[tuple[str, int | None, str, str | None, Any, Any]]) -> None:
    for k, (rid, round_, role, call, content, compact) in enumerate(rows):
        conn.execute(
            "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens,"
            " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                rid, T, round_, role, call, Jsonb(content), None if compact is None else Jsonb(compact),
                count_value_tokens(compact if compact is not None else content), T0 + timedelta(seconds=k),
            ),
        )  # fmt: skip
    conn.execute(
        "INSERT INTO incident_state VALUES (%s, 'checkout-api', 'investigating', %s, %s, 2, %s, %s)",
        (T, T0 - timedelta(minutes=15), T0, T0, T0),
    )
    conn.commit()


def test_load_context_reads_the_messages_with_one_statement(pg_dsn: str, pg_schema: str) -> None:
    raw = {"lines": ["FATAL ERROR: JS heap out of memory"] * 500}
    calls = {"text": "querying", "tool_calls": [{"id": "c1", "name": "query_loki", "args": {}}]}
    dangling = {"text": "querying", "tool_calls": [{"id": "c2", "name": "query_tempo", "args": {}}]}
    with psycopg.connect(pg_dsn, options=f"-c search_path={pg_schema}") as setup:
        _insert(
            setup,
            [
                (f"{T}:-:alert:0", None, "alert", None, {"alertname": "KubePodOOMKilled"}, None),
                (f"{T}:1:investigate:0", 1, "ai", None, calls, None),
                (f"{T}:1:tools:0", 1, "tool", "c1", raw, {"summary": "500x FATAL"}),
                (f"{T}:-:human:1", None, "human", None, {"user": "U1", "text": "trace?"}, None),
                (f"{T}:2:investigate:0", 2, "ai", None, dangling, None),
            ],
        )
    conn = psycopg.connect(pg_dsn, options=f"-c search_path={pg_schema}", cursor_factory=CountingCursor)
    try:
        CountingCursor.statements.clear()
        ctx = load_context(conn, T)
    finally:
        conn.close()
    on_messages = [s for s in CountingCursor.statements if "agent_messages" in s]
    assert len(on_messages) == 1, CountingCursor.statements
    assert "coalesce(compact, content)" in on_messages[0] and "ORDER BY seq" in on_messages[0]
    assert len(CountingCursor.statements) == 2  # the messages, and incident_state beside them
    # the compact is what comes back, never the raw; the dangling ai turn is dropped, not answered
    assert [r.id for r in ctx.rows] == [
        f"{T}:-:alert:0",
        f"{T}:1:investigate:0",
        f"{T}:1:tools:0",
        f"{T}:-:human:1",
    ]
    assert ctx.rows[2].value == {"summary": "500x FATAL"}
    assert ctx.state is not None and ctx.state.rounds == 2 and ctx.last_round() == 2
    assert "FATAL ERROR" not in "".join(str(m.content) for m in to_messages(ctx.rows))
