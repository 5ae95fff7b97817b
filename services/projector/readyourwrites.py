"""Read-your-writes for the agent: wait until the projector has written a given message.

The projector NOTIFYs `agent_messages_projected` with {schema, thread_ts, max_seq}
in the transaction that writes a thread's rows, so the notice arrives exactly
when the rows become readable. The waiter LISTENs first, checks once, then only
re-checks when a notice for its thread arrives: no polling loop.

A message counts as projected once it is in agent_messages, in round_staging
(a row of a round not yet committed, e.g. the agent's own tool result) or in
tool_digest_cache.
"""

from __future__ import annotations

import json
import time

import psycopg
from psycopg import sql

from services.projector.store import NOTIFY_CHANNEL

_CHECK = """
SELECT EXISTS (SELECT 1 FROM {s}.agent_messages WHERE id = %(id)s)
    OR EXISTS (SELECT 1 FROM {s}.round_staging WHERE id = %(id)s)
    OR EXISTS (SELECT 1 FROM {s}.tool_digest_cache WHERE thread_ts = %(thread_ts)s AND message_id = %(id)s)
"""


def _is_projected(conn: psycopg.Connection, schema: str, thread_ts: str, message_id: str) -> bool:
    query = sql.SQL(_CHECK).format(s=sql.Identifier(schema))
    record = conn.execute(query, {"id": message_id, "thread_ts": thread_ts}).fetchone()
    if not conn.autocommit:
        conn.commit()  # end the snapshot so the next check sees later commits, and notices get delivered
    return bool(record and record[0])


def _concerns(payload: str, schema: str, thread_ts: str) -> bool:
    try:
        notice = json.loads(payload)
    except ValueError:
        return True  # an unreadable notice: re-check rather than miss ours
    return bool(notice.get("thread_ts") == thread_ts and notice.get("schema", schema) == schema)


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
