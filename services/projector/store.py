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

# The fast plan ships rows as ONE jsonb array parameter: the JSON columns are embedded as they are
# already serialised, and the server parses it in C, where psycopg's array dumper is Python.
_ROWS_FROM_JSON = (
    "SELECT e->>0 AS id, e->>1 AS thread_ts, (e->>2)::int AS round, e->>3 AS role, e->>4 AS tool_call_id,"
    " e->5 AS content, nullif(e->6, 'null'::jsonb) AS compact, (e->>7)::int AS tokens,"
    " (e->>8)::timestamptz AS created_at, (e->>9)::bigint AS pos, j.ord"
    " FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS j(e, ord)"
)

INSERT_STAGED_JSON = (
    f"INSERT INTO round_staging ({_ROW_COLUMNS}) SELECT {_ROW_COLUMNS} FROM ({_ROWS_FROM_JSON}) r"
    " WHERE NOT EXISTS (SELECT 1 FROM agent_messages m WHERE m.id = r.id)"
    " ORDER BY r.ord ON CONFLICT (id) DO NOTHING"
)

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

# The fast plan looks up, in one query, where every id the batch's markers list stands now...
LOOKUP = """
SELECT s.id, true, s.role, s.tool_call_id,
       CASE WHEN jsonb_typeof(s.content -> 'tool_calls') = 'array'
            THEN ARRAY(SELECT c ->> 'id' FROM jsonb_array_elements(s.content -> 'tool_calls') AS c) END
FROM round_staging s WHERE s.id = ANY(%s::text[])
UNION ALL
SELECT m.id, false, m.role, m.tool_call_id, NULL FROM agent_messages m WHERE m.id = ANY(%s::text[])
"""

# ...then publishes every visible row and every verified round in one statement, in batch order:
# a round's rows sort at its marker's position, in the marker's listed order.
PUBLISH = f"""
WITH pub AS (
    SELECT * FROM unnest(%s::text[], %s::bigint[], %s::int[]) AS p(id, k1, k2)
), moved AS (
    INSERT INTO agent_messages ({_ROW_COLUMNS})
    SELECT {_ROW_COLUMNS} FROM (
        SELECT r.id, r.thread_ts, r.round, r.role, r.tool_call_id, r.content, r.compact, r.tokens,
               r.created_at, r.pos AS k1, 0 AS k2
        FROM ({_ROWS_FROM_JSON}) r
        UNION ALL
        SELECT s.id, s.thread_ts, s.round, s.role, s.tool_call_id, s.content, s.compact, s.tokens,
               s.created_at, p.k1, p.k2
        FROM pub p JOIN round_staging s ON s.id = p.id
    ) u ORDER BY k1, k2
    ON CONFLICT (id) DO NOTHING
    RETURNING 1
), cleared AS (
    DELETE FROM round_staging r USING pub p WHERE r.id = p.id RETURNING 1
)
UPDATE incident_state i SET rounds = greatest(i.rounds, b.r)
FROM unnest(%s::text[], %s::int[]) AS b(thread_ts, r)
WHERE i.thread_ts = b.thread_ts
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


def _quote(text: str) -> str:
    """A JSON string literal; the common case (ids, thread_ts, roles) skips json.dumps."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text)


def _rows_json(rows: Sequence[Row], positions: Sequence[int] | None = None) -> str:
    """Rows as one JSON array of arrays, in the column order of _ROWS_FROM_JSON."""
    q = _quote
    parts = []
    for k, r in enumerate(rows):
        parts.append(
            f"[{q(r.id)},{q(r.thread_ts)},{'null' if r.round is None else r.round},{q(r.role)},"
            f"{'null' if r.tool_call_id is None else q(r.tool_call_id)},{r.content},"
            f'{"null" if r.compact is None else r.compact},{r.tokens},"{r.created_at.isoformat()}",'
            f"{0 if positions is None else positions[k]}]"
        )
    return "[" + ",".join(parts) + "]"


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


def verify_rounds(
    markers: Sequence[tuple[int, int, CommitRound]], found: Iterable[tuple[Any, ...]]
) -> tuple[list[tuple[int, int, CommitRound, list[str]]], list[Rejection]]:
    """Decide every marker of a batch, in order, as COMMIT_ROUND would one by one.

    `found` is the LOOKUP result. Returns the published rounds (with the ids that move out of
    staging) and the rejections. A published round's rows count as visible for later markers.
    """
    staged: dict[str, tuple[str, str | None, list[str] | None]] = {}
    visible: dict[str, tuple[str, str | None]] = {}
    for mid, is_staged, role, tcid, calls in found:
        if is_staged:
            staged[mid] = (role, tcid, calls)
        else:
            visible[mid] = (role, tcid)
    published: list[tuple[int, int, CommitRound, list[str]]] = []
    rejections: list[Rejection] = []
    for index, pos, op in markers:
        ids = op.message_ids
        missing = sorted(m for m in ids if m not in staged and m not in visible)
        answered = set()
        for m in ids:
            info = staged.get(m) or visible.get(m)
            if info is not None and info[0] == "tool" and info[1] is not None:
                answered.add(info[1])
        unanswered = sorted(
            f"{m} -> {call}"
            for m in ids
            if m in staged and staged[m][0] == "ai"
            for call in staged[m][2] or []
            if call not in answered
        )
        if missing or unanswered:
            rejections.append(Rejection(index, _round_reason(op, missing, unanswered)))
            continue
        moving = [m for m in ids if m in staged]
        for m in moving:
            role, tcid, _calls = staged.pop(m)
            visible[m] = (role, tcid)
        published.append((index, pos, op, moving))
    return published, rejections


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
    """The whole batch in two pipelined round trips (see fast_plan_applies for when this is exact)."""
    result = BatchResult()
    touched: set[str] = set(threads)
    staged: list[Row] = []
    visible: list[Row] = []
    visible_pos: list[int] = []
    digests: list[CacheDigest] = []
    states: list[UpsertState] = []
    markers: list[tuple[int, int, CommitRound]] = []
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
                markers.append((index, pos, op))
                touched.add(op.thread_ts)
    listed = sorted({m for _i, _p, op in markers for m in op.message_ids})
    with conn.pipeline():
        lock_cur = conn.cursor()
        lock_cur.execute(LOCK_OFFSETS, (group, topic, sorted(set(partitions))))
        cur = conn.cursor()
        if staged:
            cur.execute(INSERT_STAGED_JSON, (_rows_json(staged),))
        if digests:
            cur.execute(INSERT_DIGESTS, _digest_params(digests))
        if states:
            cur.executemany(UPSERT_STATE, [_state_params(st) for st in states])
        lookup_cur = conn.cursor()
        if listed:
            lookup_cur.execute(LOOKUP, (listed, listed))
    result.stored_offsets = {int(p): int(n) for p, n in lock_cur.fetchall()}
    published, result.rejections = verify_rounds(markers, lookup_cur.fetchall() if listed else [])
    pub_ids: list[str] = []
    pub_k1: list[int] = []
    pub_k2: list[int] = []
    bumps: dict[str, int] = {}
    for _index, marker_pos, op, moving in published:
        order = {m: k for k, m in enumerate(op.message_ids)}
        for m in moving:
            pub_ids.append(m)
            pub_k1.append(marker_pos)
            pub_k2.append(order[m] + 1)
        bumps[op.thread_ts] = max(bumps.get(op.thread_ts, 0), op.round)
        result.rounds_committed += 1 if moving else 0  # a marker delivered again publishes nothing
    with conn.pipeline():
        if visible or pub_ids:
            cur.execute(
                PUBLISH,
                [
                    pub_ids,
                    pub_k1,
                    pub_k2,
                    _rows_json(visible, visible_pos),
                    list(bumps),
                    list(bumps.values()),
                ],
            )
        if next_offsets:
            parts = sorted(next_offsets)
            cur.execute(SAVE_OFFSETS, (group, topic, parts, [next_offsets[p] for p in parts]))
        if notify and touched:
            cur.execute(NOTIFY, (NOTIFY_CHANNEL, schema, sorted(touched)))
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
