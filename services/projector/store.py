"""The SQL that carries projection operations into Postgres, a batch at a time.

`apply_batch` keeps the exact sequential meaning of the operations (so a batch
of 1 and a batch of 5,000 give the same tables, which replays rely on) while
sending them in few statements: consecutive plain writes are grouped into one
array-parameter statement per table, and the whole batch goes through one
psycopg pipeline, so a batch costs about one network round trip.

All statements use unqualified table names: the connection's search_path is
the projection's schema (see `connect`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from services.projector.mapping import (
    CacheDigest,
    CommitRound,
    InsertRow,
    Op,
    ReRender,
    Row,
    StageRow,
    UpsertState,
)

NOTIFY_CHANNEL = "agent_messages_projected"

_ROW_ARRAYS = (
    "unnest(%s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s::jsonb[], %s::jsonb[],"
    " %s::int[], %s::timestamptz[]) WITH ORDINALITY"
    " AS r(id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at, ord)"
)
_ROW_COLUMNS = "id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at"

INSERT_VISIBLE = (
    f"INSERT INTO agent_messages ({_ROW_COLUMNS}) SELECT {_ROW_COLUMNS} FROM {_ROW_ARRAYS}"
    " ORDER BY r.ord ON CONFLICT (id) DO NOTHING"
)

# A row already published (a duplicate delivered after its round committed) is not staged again.
INSERT_STAGED = (
    f"INSERT INTO round_staging ({_ROW_COLUMNS}) SELECT {_ROW_COLUMNS} FROM {_ROW_ARRAYS}"
    " WHERE NOT EXISTS (SELECT 1 FROM agent_messages m WHERE m.id = r.id)"
    " ORDER BY r.ord ON CONFLICT (id) DO NOTHING"
)

INSERT_DIGESTS = (
    "INSERT INTO tool_digest_cache (thread_ts, tool, args_hash, message_id, tool_call_id, compact, tokens,"
    " created_at) SELECT thread_ts, tool, args_hash, message_id, tool_call_id, compact, tokens, created_at"
    " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::jsonb[], %s::int[],"
    " %s::timestamptz[]) WITH ORDINALITY"
    " AS d(thread_ts, tool, args_hash, message_id, tool_call_id, compact, tokens, created_at, ord)"
    " ORDER BY d.ord ON CONFLICT (thread_ts, tool, args_hash) DO NOTHING"
)

# The newest fact by event time wins, so a duplicate of an old event delivered late changes nothing.
UPSERT_STATE = """
INSERT INTO incident_state AS s (thread_ts, service, status, window_start, window_end, rounds, opened_at, updated_at)
VALUES (%(thread_ts)s, %(service)s, %(status)s, %(window_start)s, %(window_end)s, 0, %(opened_at)s, %(updated_at)s)
ON CONFLICT (thread_ts) DO UPDATE SET
    service = EXCLUDED.service,
    status = EXCLUDED.status,
    window_start = EXCLUDED.window_start,
    window_end = EXCLUDED.window_end,
    opened_at = CASE WHEN %(keep_opened_at)s THEN s.opened_at ELSE EXCLUDED.opened_at END,
    updated_at = EXCLUDED.updated_at
WHERE s.updated_at <= EXCLUDED.updated_at
"""

# One statement: verify the round is complete, publish it in the marker's order, clear staging,
# bump incident_state.rounds. Data-modifying CTEs share one snapshot and all run, or none do (ok=false).
COMMIT_ROUND = """
WITH listed AS (
    SELECT l.id, l.ord FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS l(id, ord)
), staged AS (
    SELECT s.*, l.ord FROM listed l JOIN round_staging s ON s.id = l.id
), visible AS (
    SELECT m.id, m.role, m.tool_call_id FROM listed l JOIN agent_messages m ON m.id = l.id
), missing AS (
    SELECT l.id FROM listed l
    WHERE NOT EXISTS (SELECT 1 FROM staged s WHERE s.id = l.id)
      AND NOT EXISTS (SELECT 1 FROM visible v WHERE v.id = l.id)
), answered AS (
    SELECT tool_call_id FROM staged WHERE role = 'tool' AND tool_call_id IS NOT NULL
    UNION
    SELECT tool_call_id FROM visible WHERE role = 'tool' AND tool_call_id IS NOT NULL
), unanswered AS (
    SELECT s.id || ' -> ' || coalesce(c ->> 'id', '?') AS what
    FROM staged s
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(s.content -> 'tool_calls') = 'array' THEN s.content -> 'tool_calls'
             ELSE '[]'::jsonb END) AS c
    WHERE s.role = 'ai' AND NOT EXISTS (SELECT 1 FROM answered a WHERE a.tool_call_id = c ->> 'id')
), verdict AS (
    SELECT NOT EXISTS (SELECT 1 FROM missing) AND NOT EXISTS (SELECT 1 FROM unanswered) AS ok
), moved AS (
    INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)
    SELECT s.id, s.thread_ts, s.round, s.role, s.tool_call_id, s.content, s.compact, s.tokens, s.created_at
    FROM staged s, verdict v WHERE v.ok ORDER BY s.ord
    ON CONFLICT (id) DO NOTHING
    RETURNING 1
), cleared AS (
    DELETE FROM round_staging r USING listed l, verdict v WHERE v.ok AND r.id = l.id RETURNING 1
), bumped AS (
    UPDATE incident_state i SET rounds = greatest(i.rounds, %(round)s)
    FROM verdict v WHERE v.ok AND i.thread_ts = %(thread_ts)s RETURNING 1
)
SELECT v.ok,
       (SELECT array_agg(id ORDER BY id) FROM missing),
       (SELECT array_agg(what ORDER BY what) FROM unanswered),
       (SELECT count(*) FROM moved)
FROM verdict v
"""

# The fast plan's one statement: every visible row and every round of the batch, in batch order.
# `pos` is the operation's position in the batch; a round's rows sort at its marker's position,
# in the marker's listed order. Verification is per marker, exactly as COMMIT_ROUND does it.
PUBLISH = """
WITH v AS (
    SELECT * FROM unnest(%s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s::jsonb[], %s::jsonb[],
                         %s::int[], %s::timestamptz[], %s::bigint[])
        AS v(id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at, pos)
), listed AS (
    SELECT * FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[], %s::int[])
        AS l(pos, thread_ts, round, id, ord)
), staged AS (
    SELECT s.*, l.pos, l.ord FROM listed l JOIN round_staging s ON s.id = l.id
), visible AS (
    SELECT l.pos, m.id, m.role, m.tool_call_id FROM listed l JOIN agent_messages m ON m.id = l.id
), missing AS (
    SELECT l.pos, l.id FROM listed l
    WHERE NOT EXISTS (SELECT 1 FROM staged s WHERE s.pos = l.pos AND s.id = l.id)
      AND NOT EXISTS (SELECT 1 FROM visible x WHERE x.pos = l.pos AND x.id = l.id)
), answered AS (
    SELECT pos, tool_call_id FROM staged WHERE role = 'tool' AND tool_call_id IS NOT NULL
    UNION
    SELECT pos, tool_call_id FROM visible WHERE role = 'tool' AND tool_call_id IS NOT NULL
), unanswered AS (
    SELECT s.pos, s.id || ' -> ' || coalesce(c ->> 'id', '?') AS what
    FROM staged s
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(s.content -> 'tool_calls') = 'array' THEN s.content -> 'tool_calls'
             ELSE '[]'::jsonb END) AS c
    WHERE s.role = 'ai'
      AND NOT EXISTS (SELECT 1 FROM answered a WHERE a.pos = s.pos AND a.tool_call_id = c ->> 'id')
), verdict AS (
    SELECT m.pos, m.thread_ts, m.round,
           NOT EXISTS (SELECT 1 FROM missing x WHERE x.pos = m.pos)
           AND NOT EXISTS (SELECT 1 FROM unanswered u WHERE u.pos = m.pos) AS ok
    FROM (SELECT DISTINCT pos, thread_ts, round FROM listed) m
), moved AS (
    INSERT INTO agent_messages (id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at)
    SELECT id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at FROM (
        SELECT v.id, v.thread_ts, v.round, v.role, v.tool_call_id, v.content, v.compact, v.tokens,
               v.created_at, v.pos AS k1, 0 AS k2
        FROM v
        UNION ALL
        SELECT s.id, s.thread_ts, s.round, s.role, s.tool_call_id, s.content, s.compact, s.tokens,
               s.created_at, s.pos, s.ord
        FROM staged s JOIN verdict d ON d.pos = s.pos AND d.ok
    ) u ORDER BY k1, k2
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), cleared AS (
    DELETE FROM round_staging r USING listed l, verdict d
    WHERE d.pos = l.pos AND d.ok AND r.id = l.id RETURNING 1
), bumped AS (
    UPDATE incident_state i SET rounds = greatest(i.rounds, b.r)
    FROM (SELECT thread_ts, max(round) AS r FROM verdict WHERE ok GROUP BY thread_ts) b
    WHERE i.thread_ts = b.thread_ts RETURNING 1
)
SELECT d.pos, d.ok,
       (SELECT array_agg(x.id ORDER BY x.id) FROM missing x WHERE x.pos = d.pos),
       (SELECT array_agg(u.what ORDER BY u.what) FROM unanswered u WHERE u.pos = d.pos),
       (SELECT count(*) FROM moved mv JOIN listed l ON l.id = mv.id AND l.pos = d.pos)
FROM verdict d ORDER BY d.pos
"""

RE_RENDER = """
WITH visible AS (
    UPDATE agent_messages SET compact = %(compact)s::jsonb, tokens = %(tokens)s
    WHERE id = %(id)s RETURNING 1
), staged AS (
    UPDATE round_staging SET compact = %(compact)s::jsonb, tokens = %(tokens)s
    WHERE id = %(id)s RETURNING 1
)
SELECT (SELECT count(*) FROM visible) + (SELECT count(*) FROM staged)
"""

LOCK_OFFSETS = (
    "SELECT partition, next_offset FROM projector_offsets"
    " WHERE consumer_group = %s AND topic = %s AND partition = ANY(%s::int[]) FOR UPDATE"
)

SAVE_OFFSETS = """
INSERT INTO projector_offsets (consumer_group, topic, partition, next_offset)
SELECT %s, %s, p, n FROM unnest(%s::int[], %s::bigint[]) AS t(p, n)
ON CONFLICT (consumer_group, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset
"""

NOTIFY = """
SELECT pg_notify(%s, json_build_object(
    'schema', %s::text, 'thread_ts', t,
    'max_seq', (SELECT max(seq) FROM agent_messages m WHERE m.thread_ts = t))::text)
FROM unnest(%s::text[]) AS t
"""


@dataclass(frozen=True)
class Rejection:
    """An operation the database refused on logical grounds (not an error): the event goes to the DLQ."""

    item: int
    reason: str


@dataclass
class BatchResult:
    rejections: list[Rejection] = field(default_factory=list)
    rounds_committed: int = 0
    stored_offsets: dict[int, int] = field(default_factory=dict)  # as locked at the start of the batch


def connect(dsn: str, schema: str, *, connect_timeout: float = 10) -> psycopg.Connection:
    """A projection connection: not autocommit, search_path pinned to `schema`."""
    conn = psycopg.connect(dsn, connect_timeout=int(connect_timeout), autocommit=False)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    conn.commit()
    return conn


def load_offsets(conn: psycopg.Connection, group: str, topic: str) -> dict[int, int]:
    """The next offset to read per partition, as last committed with the rows."""
    with conn.transaction():
        records = conn.execute(
            "SELECT partition, next_offset FROM projector_offsets WHERE consumer_group = %s AND topic = %s",
            (group, topic),
        ).fetchall()
    return {int(p): int(n) for p, n in records}


def _row_params(rows: Sequence[Row]) -> list[list[Any]]:
    return [
        [r.id for r in rows],
        [r.thread_ts for r in rows],
        [r.round for r in rows],
        [r.role for r in rows],
        [r.tool_call_id for r in rows],
        [r.content for r in rows],
        [r.compact for r in rows],
        [r.tokens for r in rows],
        [r.created_at for r in rows],
    ]


def _digest_params(digests: Sequence[CacheDigest]) -> list[list[Any]]:
    return [
        [d.thread_ts for d in digests],
        [d.tool for d in digests],
        [d.args_hash for d in digests],
        [d.message_id for d in digests],
        [d.tool_call_id for d in digests],
        [d.compact for d in digests],
        [d.tokens for d in digests],
        [d.created_at for d in digests],
    ]


def _state_params(op: UpsertState) -> dict[str, Any]:
    return {
        "thread_ts": op.thread_ts,
        "service": op.service,
        "status": op.status,
        "window_start": op.window_start,
        "window_end": op.window_end,
        "opened_at": op.opened_at,
        "updated_at": op.updated_at,
        "keep_opened_at": op.keep_opened_at,
    }


class _Pending:
    """Plain writes waiting to be sent as one statement per table, in arrival order."""

    def __init__(self) -> None:
        self.visible: list[Row] = []
        self.staged: list[Row] = []
        self.digests: list[CacheDigest] = []
        self.states: list[UpsertState] = []

    def add(self, op: Op) -> bool:
        if isinstance(op, InsertRow):
            self.visible.append(op.row)
        elif isinstance(op, StageRow):
            self.staged.append(op.row)
        elif isinstance(op, CacheDigest):
            self.digests.append(op)
        elif isinstance(op, UpsertState):
            self.states.append(op)
        else:
            return False
        return True

    def flush(self, cur: psycopg.Cursor[Any]) -> None:
        # Order between these tables does not matter: staging skips ids already visible, and a
        # visible id and a staged id never coincide (the id carries the round).
        if self.visible:
            cur.execute(INSERT_VISIBLE, _row_params(self.visible))
        if self.staged:
            cur.execute(INSERT_STAGED, _row_params(self.staged))
        if self.digests:
            cur.execute(INSERT_DIGESTS, _digest_params(self.digests))
        if self.states:  # one by one: one statement may not upsert the same key twice
            cur.executemany(UPSERT_STATE, [_state_params(s) for s in self.states])
        self.visible, self.staged, self.digests, self.states = [], [], [], []


def apply_batch(
    conn: psycopg.Connection,
    items: Sequence[tuple[int, Sequence[Op]]],
    *,
    group: str,
    topic: str,
    partitions: Iterable[int],
    next_offsets: dict[int, int],
    schema: str,
    notify: bool = True,
    threads: Iterable[str] = (),
) -> BatchResult:
    """Apply `(item index, ops)` in order inside the caller's transaction, and save offsets.

    Returns the logical rejections and the offsets that were stored when the batch began (locked
    FOR UPDATE, so the caller can compare them with what it expected and roll back on a mismatch).
    Raises psycopg errors as they come; the caller decides whether the batch or Postgres is at fault.
    """
    if fast_plan_applies(items):
        return _apply_fast(
            conn,
            items,
            group=group,
            topic=topic,
            partitions=partitions,
            next_offsets=next_offsets,
            schema=schema,
            notify=notify,
            threads=threads,
        )
    result = BatchResult()
    controls: list[tuple[int, Op, psycopg.Cursor[Any]]] = []
    touched: set[str] = set(threads)
    with conn.pipeline():
        lock_cur = conn.cursor()
        lock_cur.execute(LOCK_OFFSETS, (group, topic, sorted(set(partitions))))
        cur = conn.cursor()
        pending = _Pending()
        for index, ops in items:
            for op in ops:
                touched.add(op.row.thread_ts if isinstance(op, InsertRow | StageRow) else op.thread_ts)
                if pending.add(op):
                    continue
                pending.flush(cur)
                control = conn.cursor()
                if isinstance(op, CommitRound):
                    control.execute(
                        COMMIT_ROUND,
                        {"ids": list(op.message_ids), "round": op.round, "thread_ts": op.thread_ts},
                    )
                elif isinstance(op, ReRender):
                    control.execute(
                        RE_RENDER, {"compact": op.compact, "tokens": op.tokens, "id": op.target_id}
                    )
                controls.append((index, op, control))
        pending.flush(cur)
        if next_offsets:
            parts = sorted(next_offsets)
            cur.execute(SAVE_OFFSETS, (group, topic, parts, [next_offsets[p] for p in parts]))
        if notify and touched:
            cur.execute(NOTIFY, (NOTIFY_CHANNEL, schema, sorted(touched)))
    result.stored_offsets = {int(p): int(n) for p, n in lock_cur.fetchall()}
    for index, op, control in controls:
        record = control.fetchone()
        if isinstance(op, CommitRound):
            assert record is not None
            ok, missing, unanswered, moved = record
            if ok:
                result.rounds_committed += 1 if moved else 0  # a marker delivered again publishes nothing
            else:
                result.rejections.append(Rejection(index, _round_reason(op, missing, unanswered)))
        elif isinstance(op, ReRender) and (record is None or record[0] == 0):
            result.rejections.append(Rejection(index, f"re-render target {op.target_id!r} is not projected"))
    return result


def fast_plan_applies(items: Sequence[tuple[int, Sequence[Op]]]) -> bool:
    """Whether writing all staged rows first, then one publish statement, means the same as in order.

    It does unless the batch re-renders (order against its target matters), stages a row a marker
    EARLIER in the batch lists (in order, that marker finds the row missing), or upserts the state
    of a thread after one of its rounds committed (in order, that bump finds no state row).
    """
    listed_by_marker: set[str] = set()
    committed_threads: set[str] = set()
    for _index, ops in items:
        for op in ops:
            if isinstance(op, ReRender):
                return False
            if isinstance(op, StageRow) and op.row.id in listed_by_marker:
                return False
            if isinstance(op, UpsertState) and op.thread_ts in committed_threads:
                return False
            if isinstance(op, CommitRound):
                listed_by_marker.update(op.message_ids)
                committed_threads.add(op.thread_ts)
    return True


def _apply_fast(
    conn: psycopg.Connection,
    items: Sequence[tuple[int, Sequence[Op]]],
    *,
    group: str,
    topic: str,
    partitions: Iterable[int],
    next_offsets: dict[int, int],
    schema: str,
    notify: bool,
    threads: Iterable[str],
) -> BatchResult:
    """The whole batch in about six statements (see fast_plan_applies for when this is exact)."""
    result = BatchResult()
    touched: set[str] = set(threads)
    staged: list[Row] = []
    visible: list[Row] = []
    visible_pos: list[int] = []
    digests: list[CacheDigest] = []
    states: list[UpsertState] = []
    markers: dict[int, tuple[int, CommitRound]] = {}
    listed: list[list[Any]] = [[], [], [], [], []]
    pos = 0
    for index, ops in items:
        for op in ops:
            pos += 1
            if isinstance(op, InsertRow):
                visible.append(op.row)
                visible_pos.append(pos)
                touched.add(op.row.thread_ts)
            elif isinstance(op, StageRow):
                staged.append(op.row)
                touched.add(op.row.thread_ts)
            elif isinstance(op, CacheDigest):
                digests.append(op)
            elif isinstance(op, UpsertState):
                states.append(op)
                touched.add(op.thread_ts)
            elif isinstance(op, CommitRound):
                markers[pos] = (index, op)
                touched.add(op.thread_ts)
                for k, mid in enumerate(op.message_ids, start=1):
                    for column, value in zip(listed, (pos, op.thread_ts, op.round, mid, k), strict=True):
                        column.append(value)
    with conn.pipeline():
        lock_cur = conn.cursor()
        lock_cur.execute(LOCK_OFFSETS, (group, topic, sorted(set(partitions))))
        cur = conn.cursor()
        if staged:
            cur.execute(INSERT_STAGED, _row_params(staged))
        if digests:
            cur.execute(INSERT_DIGESTS, _digest_params(digests))
        if states:
            cur.executemany(UPSERT_STATE, [_state_params(st) for st in states])
        publish_cur = conn.cursor()
        if visible or markers:
            publish_cur.execute(PUBLISH, [*_row_params(visible), visible_pos, *listed])
        if next_offsets:
            parts = sorted(next_offsets)
            cur.execute(SAVE_OFFSETS, (group, topic, parts, [next_offsets[p] for p in parts]))
        if notify and touched:
            cur.execute(NOTIFY, (NOTIFY_CHANNEL, schema, sorted(touched)))
    result.stored_offsets = {int(p): int(n) for p, n in lock_cur.fetchall()}
    if visible or markers:
        for marker_pos, ok, missing, unanswered, moved in publish_cur.fetchall():
            index, op = markers[int(marker_pos)]
            if ok:
                result.rounds_committed += 1 if moved else 0
            else:
                result.rejections.append(Rejection(index, _round_reason(op, missing, unanswered)))
    return result


def _round_reason(op: CommitRound, missing: list[str] | None, unanswered: list[str] | None) -> str:
    reason = f"round {op.round} of {op.thread_ts} cannot be published"
    if missing:
        reason += f"; listed ids not projected: {', '.join(missing[:5])}"
    if unanswered:
        reason += f"; tool calls without a listed tool row: {', '.join(unanswered[:5])}"
    return reason + " (its rows stay in round_staging)"


def notify_payload(schema: str, thread_ts: str, max_seq: int | None) -> str:
    """The NOTIFY payload, as `NOTIFY` builds it (used by tests and listeners)."""
    return json.dumps({"schema": schema, "thread_ts": thread_ts, "max_seq": max_seq})
