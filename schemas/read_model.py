"""The read model: every statement that reads the projection, and the wait for a write to land in it.

The projector writes `agent_messages`, `round_staging`, `tool_digest_cache`, `incident_state` and
`slack_posts`; every service that reads them (the agent, the telemetry MCP server, ingest's
directories, `show` and `threads`) reads through the statements here, so the tables' shape is known
in one place below the services, and no service imports the projector to read what it wrote.

Read-your-writes: the projector NOTIFYs `NOTIFY_CHANNEL` with {schema, thread_ts, max_seq} in the
transaction that writes a thread's rows, so the notice arrives exactly when the rows become readable.
`wait_until_projected` LISTENs first, checks once, then re-checks only when a notice for its thread
arrives: no polling loop. A message counts as projected once it is in agent_messages, in
round_staging (a row of a round not yet committed, e.g. the agent's own tool result) or in
tool_digest_cache.
"""

from __future__ import annotations

import json
import time

import psycopg
from psycopg import sql

NOTIFY_CHANNEL = "agent_messages_projected"

# --- the agent's context: ONE query (invariant 4), and its incident -----------------------------------
# The sixth column: the mentions a post answers (its raw's `answers`, never shown to the model), so the
# agent tells an answered mention from an unanswered one from this same query (services/agent/coalesce.py).
CONTEXT_ROWS = (
    "SELECT id, role, tool_call_id, coalesce(compact, content), tokens, "
    "CASE WHEN role = 'post' THEN content -> 'answers' END "
    "FROM agent_messages WHERE thread_ts = %s ORDER BY seq"
)
INCIDENT_STATE = (
    "SELECT service, status, window_start, window_end, rounds, opened_at "
    "FROM incident_state WHERE thread_ts = %s"
)
# --- one row's raw, visible or still staged (evidence, a retried round) --------------------------------
RAW_CONTENT = (
    "SELECT content FROM agent_messages WHERE id = %(id)s "
    "UNION ALL SELECT content FROM round_staging WHERE id = %(id)s LIMIT 1"
)
EVIDENCE_VISIBLE = (
    "SELECT id, thread_ts, round, role, tool_call_id, content FROM agent_messages WHERE id = %s"
)
EVIDENCE_STAGED = "SELECT id, thread_ts, round, role, tool_call_id, content FROM round_staging WHERE id = %s"
# --- a thread's tool scope (services/boundary/scope.py): its alert, window and latest mention --------
THREAD_ALERT = (
    "SELECT content FROM agent_messages WHERE thread_ts = %s AND role = 'alert' ORDER BY seq LIMIT 1"
)
THREAD_WINDOW = "SELECT window_start, window_end FROM incident_state WHERE thread_ts = %s"
THREAD_LAST_MENTION = (
    "SELECT content->>'ts' FROM agent_messages WHERE thread_ts = %s AND role = 'human' "
    "AND content->>'mention' = 'true' ORDER BY seq DESC LIMIT 1"
)
# --- evidence of one thread only: a row of another thread is never answered ---------------------------
EVIDENCE_VISIBLE_IN_THREAD = (
    "SELECT id, thread_ts, round, role, tool_call_id, content FROM agent_messages "
    "WHERE thread_ts = %s AND id = %s"
)
EVIDENCE_STAGED_IN_THREAD = (
    "SELECT id, thread_ts, round, role, tool_call_id, content FROM round_staging "
    "WHERE thread_ts = %s AND id = %s"
)
ROW_TOKENS = "SELECT id, tokens FROM agent_messages WHERE id = ANY(%s)"
ROW_EXISTS = "SELECT 1 FROM agent_messages WHERE id = %s"
# --- search_thread: one thread's human turns by full text (index: migration 007) ------------------------
# Any word of the query matches (the terms OR-ed). Turns holding every word come first, then by rank
# (normalised by length, so a long paste that repeats one word does not bury a short turn), then the newer.
# `matches` counts every match, beyond the LIMIT.
SEARCH_THREAD = """
WITH q AS (
    SELECT plainto_tsquery('english', %(query)s) AS every,
           to_tsquery('english', replace(plainto_tsquery('english', %(query)s)::text, ' & ', ' | ')) AS any
), hit AS (
    SELECT m.id, m.seq, m.content, to_tsvector('english'::regconfig, m.content ->> 'text') AS tsv
    FROM agent_messages m, q
    WHERE m.thread_ts = %(thread_ts)s AND m.role = 'human'
      AND to_tsvector('english'::regconfig, m.content ->> 'text') @@ q.any
)
SELECT hit.id, hit.content ->> 'user', hit.content ->> 'ts', hit.content ->> 'text', count(*) OVER () AS matches
FROM hit, q
ORDER BY hit.tsv @@ q.every DESC, ts_rank(hit.tsv, q.any, 1) DESC, hit.seq DESC
LIMIT %(limit)s
"""
# --- `show` and `threads` ------------------------------------------------------------------------------
THREAD_TABLE = """
SELECT m.seq, m.round, m.role, m.id, m.tool_call_id, m.content, m.compact, m.tokens, c.tool
FROM agent_messages m
LEFT JOIN tool_digest_cache c ON c.message_id = m.id
WHERE m.thread_ts = %s
ORDER BY m.seq
"""
ONE_ROW = "SELECT content, compact, tokens FROM agent_messages WHERE id = %s AND thread_ts = %s"
THREADS = """
SELECT s.thread_ts, s.service, s.status, s.rounds, s.opened_at,
       count(m.id) AS rows, coalesce(sum(m.tokens), 0) AS context_tokens
FROM incident_state s
LEFT JOIN agent_messages m ON m.thread_ts = s.thread_ts
GROUP BY s.thread_ts, s.service, s.status, s.rounds, s.opened_at
ORDER BY s.opened_at DESC, s.thread_ts
"""
# --- ingest's directories ------------------------------------------------------------------------------
# The incident whose alert post opened this Slack thread.
THREAD_OF_SLACK_POST = "SELECT thread_ts FROM slack_posts WHERE channel = %s AND slack_ts = %s AND root AND phase <> 'intent' LIMIT 1"
# The newest incident an alert of this group opened (index: migration 005); resolved_at NULL while open.
INCIDENT_OF_ALERT_GROUP = """
SELECT s.thread_ts, s.opened_at, CASE WHEN s.status = 'resolved' THEN s.updated_at END
FROM agent_messages a JOIN incident_state s ON s.thread_ts = a.thread_ts
WHERE a.role = 'alert' AND a.content -> 'alert' ->> 'groupKey' = %s
ORDER BY s.opened_at DESC LIMIT 1
"""

# --- read-your-writes ----------------------------------------------------------------------------------
PROJECTED = """
SELECT EXISTS (SELECT 1 FROM {s}.agent_messages WHERE id = %(id)s)
    OR EXISTS (SELECT 1 FROM {s}.round_staging WHERE id = %(id)s)
    OR EXISTS (SELECT 1 FROM {s}.tool_digest_cache WHERE thread_ts = %(thread_ts)s AND message_id = %(id)s)
"""


def _is_projected(conn: psycopg.Connection, schema: str, thread_ts: str, message_id: str) -> bool:
    query = sql.SQL(PROJECTED).format(s=sql.Identifier(schema))
    record = conn.execute(query, {"id": message_id, "thread_ts": thread_ts}).fetchone()
    if not conn.autocommit:
        conn.commit()  # end the snapshot so the next check sees later commits, and notices get delivered
    return bool(record and record[0])


def _concerns(payload: str, schema: str, thread_ts: str) -> bool:
    """A notice for our thread, from any schema: a reader of a schema of views (`incident-memory
    rederive --switch`) is told about the schema behind them, which it does not know by name. A
    notice from another projection of the same thread costs one cheap re-check, never a missed wake."""
    try:
        notice = json.loads(payload)
    except ValueError:
        return True  # an unreadable notice: re-check rather than miss ours
    return bool(notice.get("thread_ts") == thread_ts)


def wait_until_projected(
    dsn_or_conn: str | psycopg.Connection,
    thread_ts: str,
    message_id: str,
    timeout: float,
    schema: str = "public",
) -> bool:
    """True once `message_id` is projected, False if `timeout` seconds pass first.

    A connection passed in must not be inside a transaction (notices are only delivered
    between transactions); a DSN gets a private autocommit connection, closed afterwards.
    """
    own = isinstance(dsn_or_conn, str)
    conn = psycopg.connect(dsn_or_conn, autocommit=True) if isinstance(dsn_or_conn, str) else dsn_or_conn
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise ValueError("wait_until_projected needs a connection outside any transaction")
    deadline = time.monotonic() + timeout
    try:
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
        if not conn.autocommit:
            conn.commit()
        if _is_projected(conn, schema, thread_ts, message_id):
            return True
        while (remaining := deadline - time.monotonic()) > 0:
            # Drain the generator before checking: it holds the connection's lock while it runs.
            ours = False
            for notice in conn.notifies(timeout=remaining, stop_after=1):
                ours = ours or _concerns(notice.payload, schema, thread_ts)
            if ours and _is_projected(conn, schema, thread_ts, message_id):
                return True
        return False
    finally:
        if own:
            conn.close()
        elif not conn.closed:
            conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
            if not conn.autocommit:
                conn.commit()


def thread_scope_facts(
    conn: psycopg.Connection, thread_ts: str
) -> tuple[tuple[str, str] | None, object, str | None]:
    """(pinned window, the alert's Alertmanager payload, the latest mention's Slack ts) of a thread.

    What services/boundary/scope.py derives a thread's tool scope from; the agent and the telemetry
    MCP server both read it here, so they derive the same scope from the same rows.
    """
    state = conn.execute(THREAD_WINDOW, (thread_ts,)).fetchone()
    alert = conn.execute(THREAD_ALERT, (thread_ts,)).fetchone()
    mention = conn.execute(THREAD_LAST_MENTION, (thread_ts,)).fetchone()
    window: tuple[str, str] | None = None
    if state is not None:
        window = (state[0].isoformat(), state[1].isoformat())
    elif alert is not None and isinstance(alert[0], dict) and alert[0].get("window_start"):
        window = (str(alert[0]["window_start"]), str(alert[0]["window_end"]))
    payload = alert[0].get("alert") if alert is not None and isinstance(alert[0], dict) else None
    return window, payload, None if mention is None else str(mention[0])
