"""Threads written straight into a schema's projection, in the projector's row shape (review tests, bench).

The review page reads the projection and nothing else, so these rows are what it would read after the
projector wrote them; the demo's thread (tests/review/conftest.py) covers the real pipeline's rows.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from schemas.tokens import count_value_tokens

T0 = datetime(2026, 3, 14, 3, 0, tzinfo=UTC)
SENTINEL = "__pwned"
PAYLOADS = (
    f"<script>window.{SENTINEL}=1</script>",
    f'<img src=x onerror="window.{SENTINEL}=2">',
    f'<a href="javascript:window.{SENTINEL}=3">click</a>',
    f'"><svg onload="window.{SENTINEL}=4">',
    f"javascript:window.{SENTINEL}=5",
)


def insert_row(conn: psycopg.Connection, row_id: str, thread_ts: str, round_: int | None, role: str,
               content: Any, compact: Any = None, tool_call_id: str | None = None, at: datetime = T0) -> None:  # fmt: skip
    tokens = count_value_tokens(content if compact is None else compact)
    conn.execute(
        "INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (row_id, thread_ts, round_, role, tool_call_id, json.dumps(content),
         None if compact is None else json.dumps(compact), tokens, at),
    )  # fmt: skip


def insert_incident(conn: psycopg.Connection, thread_ts: str, service: str, channel: str | None,
                    slack_ts: str | None = None, status: str = "investigating") -> None:  # fmt: skip
    conn.execute(
        "INSERT INTO incident_state (thread_ts, service, status, window_start, window_end, rounds, opened_at,"
        " updated_at) VALUES (%s, %s, %s, %s, %s, 1, %s, %s)",
        (thread_ts, service, status, T0, T0 + timedelta(minutes=15), T0, T0),
    )
    if channel is not None:
        conn.execute(
            "INSERT INTO slack_posts (post_id, phase, thread_ts, channel, slack_ts, root, recorded_at)"
            " VALUES (%s, 'posted', %s, %s, %s, true, %s)",
            (f"{thread_ts}:-:alert:0", thread_ts, channel, slack_ts or thread_ts, T0),
        )


def loki_raw(lines: list[tuple[str, str]], labels: dict[str, str] | None = None) -> dict[str, Any]:
    values = [[str(int((T0 + timedelta(seconds=i)).timestamp() * 1e9)), f"{ts} {text}"]
              for i, (ts, text) in enumerate(lines)]  # fmt: skip
    return {"status": "success", "data": {"resultType": "streams",
            "result": [{"stream": labels or {"app": "checkout"}, "values": values}]}}  # fmt: skip


def hostile_thread(conn: psycopg.Connection, thread_ts: str = "1710385200.000100") -> str:
    """A thread whose every attacker-controlled field carries script, `javascript:` and `onerror=`."""
    evil = " ".join(PAYLOADS)
    insert_incident(conn, thread_ts, f"checkout {PAYLOADS[0]}", "C0EVIL", status="investigating")
    alert = {"alertname": f"Boom{PAYLOADS[1]}", "service": PAYLOADS[2], "status": "firing",
             "alert": {"annotations": {"runbook_url": PAYLOADS[4], "summary": evil}}}  # fmt: skip
    insert_row(conn, f"{thread_ts}:-:alert:0", thread_ts, None, "alert", alert)
    insert_row(conn, f"{thread_ts}:-:human:1710385300.000200", thread_ts, None, "human",
               {"user": PAYLOADS[3], "text": evil, "mention": False})  # fmt: skip
    lines = [(f"2026-03-14T03:00:{i:02d}Z", f"ERROR {p}") for i, p in enumerate(PAYLOADS)]
    compact = {"evidence": f"{thread_ts}:1:tools:0", "summary": evil,
               "patterns": [f"5× 03:00:00–03:00:04 ERROR {PAYLOADS[1]}"]}  # fmt: skip
    insert_row(conn, f"{thread_ts}:1:tools:0", thread_ts, 1, "tool", loki_raw(lines, {"app": PAYLOADS[0]}),
               compact, tool_call_id="call_1")  # fmt: skip
    conn.execute(
        "INSERT INTO tool_digest_cache (thread_ts, tool, args_hash, message_id, tool_call_id, compact, tokens,"
        " created_at) VALUES (%s, 'query_loki', 'h', %s, 'call_1', %s, 1, %s)",
        (thread_ts, f"{thread_ts}:1:tools:0", json.dumps(compact), T0),
    )
    insert_row(conn, f"{thread_ts}:1:post:0", thread_ts, 1, "post", {"kind": "questions", "text": evil})
    conn.execute(
        "INSERT INTO slack_posts (post_id, phase, thread_ts, channel, slack_ts, root, recorded_at)"
        " VALUES (%s, 'posted', %s, %s, %s, false, %s)",
        (f"{thread_ts}:1:post:0", thread_ts, PAYLOADS[4], PAYLOADS[2], T0),
    )
    return thread_ts


def long_thread(conn: psycopg.Connection, thread_ts: str, messages: int, loki_lines: int = 0) -> str:
    """`messages` human turns (and one Loki row of `loki_lines` lines when asked): the benchmarks' thread."""
    insert_incident(conn, thread_ts, "checkout", "C0LONG")
    insert_row(conn, f"{thread_ts}:-:alert:0", thread_ts, None, "alert",
               {"alertname": "HighErrorRate", "service": "checkout", "status": "firing"})  # fmt: skip
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO agent_messages (id, thread_ts, round, role, content, tokens, created_at)"
            " VALUES (%s, %s, NULL, 'human', %s, %s, %s)",
            [(f"{thread_ts}:-:human:{i}", thread_ts,
              json.dumps({"user": f"U{i % 7}", "text": f"message {i}: checked pod checkout-{i % 5}, p99 {i}ms"}),
              14, T0 + timedelta(seconds=i)) for i in range(messages)],
        )  # fmt: skip
    if loki_lines:
        lines = [(f"2026-03-14T03:{(i // 60) % 60:02d}:{i % 60:02d}Z",
                  f"level=error msg=\"upstream reset\" conn={i} took={i % 97}ms") for i in range(loki_lines)]  # fmt: skip
        compact = {"summary": f"{loki_lines} lines, 1 patterns", "patterns": [
            f"{loki_lines}× 03:00:00–03:59:59 ERROR level=error msg=\"upstream reset\" conn=1 took=1ms"]}  # fmt: skip
        insert_row(conn, f"{thread_ts}:1:tools:0", thread_ts, 1, "tool", loki_raw(lines), compact, "call_1")
        conn.execute(
            "INSERT INTO tool_digest_cache (thread_ts, tool, args_hash, message_id, tool_call_id, compact,"
            " tokens, created_at) VALUES (%s, 'query_loki', 'h', %s, 'call_1', %s, 1, %s)",
            (thread_ts, f"{thread_ts}:1:tools:0", json.dumps(compact), T0),
        )
    return thread_ts
