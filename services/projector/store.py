"""The SQL that carries projection operations into Postgres, a batch at a time.

`apply_batch` keeps the exact sequential meaning of the operations (so a batch
of 1 and a batch of 5,000 give the same tables, which replays rely on). When
the batch allows it (`fast_plan_applies`, nearly always) it takes three round
trips: lock the offsets and look up the ids the batch's round markers list;
COPY every row into a temporary table, each marked with where it goes; then
one pipeline that publishes (rows visible at once, rounds whose marker is in
the batch, rounds moved out of round_staging), stages the rest, and writes
digests, incident_state, offsets and notices from that table. Otherwise it
runs the operations in order, one statement each, through one pipeline.

All statements use unqualified table names: the connection's search_path is
the projection's schema (see `connect`); the batch table lives in pg_temp.
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
    RecordPost,
    ReRender,
    Row,
    StageRow,
    UpsertState,
    copy_escape,
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

INSERT_POSTS = (
    "INSERT INTO slack_posts (post_id, phase, thread_ts, channel, slack_ts, root, recorded_at)"
    " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::boolean[],"
    " %s::timestamptz[]) ON CONFLICT (post_id, phase) DO NOTHING"
)


def _post_params(posts: Sequence[RecordPost]) -> list[list[Any]]:
    return [
        [p.post_id for p in posts],
        [p.phase for p in posts],
        [p.thread_ts for p in posts],
        [p.channel for p in posts],
        [p.slack_ts for p in posts],
        [p.root for p in posts],
        [p.recorded_at for p in posts],
    ]


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
        self.posts: list[RecordPost] = []

    def add(self, op: Op) -> bool:
        if isinstance(op, InsertRow):
            self.visible.append(op.row)
        elif isinstance(op, StageRow):
            self.staged.append(op.row)
        elif isinstance(op, CacheDigest):
            self.digests.append(op)
        elif isinstance(op, UpsertState):
            self.states.append(op)
        elif isinstance(op, RecordPost):
            self.posts.append(op)
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
        if self.posts:
            cur.execute(INSERT_POSTS, _post_params(self.posts))
        self.visible, self.staged, self.digests, self.states, self.posts = [], [], [], [], []


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

    `found` is the LOOKUP_BATCH result (plus the batch's own staged rows). Returns the published rounds (with the ids that move out of
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


# --- the COPY plan ------------------------------------------------------------------------
#
# Every row of the batch is COPYed (text format, built in one string) into a temporary table,
# each marked with where it goes: 'v' into agent_messages at position (k1, k2), 's' into
# round_staging, 'x' nowhere (a copy of a row already staged, which the marker moves instead).
# A round whose marker arrives in the same batch as its rows goes straight into agent_messages:
# the batch is one transaction, so the round still becomes visible at once, with its offsets.

BATCH_COLUMNS = (
    "ord, dest, k1, k2, id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at,"
    " tool, args_hash"
)

CREATE_BATCH_TABLE = """
CREATE TEMP TABLE IF NOT EXISTS projector_batch (
    ord integer NOT NULL, dest "char" NOT NULL, k1 bigint NOT NULL, k2 integer NOT NULL,
    id text NOT NULL, thread_ts text NOT NULL, round integer, role text NOT NULL, tool_call_id text,
    content jsonb NOT NULL, compact jsonb, tokens integer NOT NULL, created_at timestamptz NOT NULL,
    tool text, args_hash text
) ON COMMIT DELETE ROWS
"""

# Emptied at the start too: savepoints of one transaction (the one-by-one fallback) share it.
CLEAR_BATCH_TABLE = "DELETE FROM pg_temp.projector_batch"

COPY_BATCH = f"COPY pg_temp.projector_batch ({BATCH_COLUMNS}) FROM STDIN"

PUBLISH_BATCH = f"""
WITH pub AS (
    SELECT e->>0 AS id, (e->>1)::bigint AS k1, (e->>2)::int AS k2 FROM jsonb_array_elements(%s::jsonb) AS e
), moved AS (
    INSERT INTO agent_messages ({_ROW_COLUMNS})
    SELECT {_ROW_COLUMNS} FROM (
        SELECT {_ROW_COLUMNS}, k1, k2 FROM pg_temp.projector_batch WHERE dest = 'v'
        UNION ALL
        SELECT s.id, s.thread_ts, s.round, s.role, s.tool_call_id, s.content, s.compact, s.tokens,
               s.created_at, p.k1, p.k2
        FROM pub p JOIN round_staging s ON s.id = p.id
    ) u ORDER BY k1, k2
    ON CONFLICT (id) DO NOTHING
    RETURNING thread_ts, seq
), cleared AS (
    DELETE FROM round_staging r USING pub p WHERE r.id = p.id RETURNING 1
), bumped AS (
    UPDATE incident_state i SET rounds = greatest(i.rounds, (b.value)::int)
    FROM jsonb_each_text(%s::jsonb) AS b
    WHERE i.thread_ts = b.key
    RETURNING 1
), top AS (
    SELECT thread_ts, max(seq) AS max_seq FROM moved GROUP BY thread_ts
)
-- NOTIFY as NOTIFY does, but a thread this statement wrote to takes its max seq from RETURNING
-- (the snapshot of the subquery predates these rows) instead of one more index probe.
SELECT count(pg_notify(%s, json_build_object(
    'schema', %s::text, 'thread_ts', t.t,
    'max_seq', coalesce(top.max_seq, (SELECT max(seq) FROM agent_messages m WHERE m.thread_ts = t.t)))::text))
FROM jsonb_array_elements_text(%s::jsonb) AS t(t) LEFT JOIN top ON top.thread_ts = t.t
"""

# Where every id the batch's markers list stands now: staged (with the ai rows' tool call ids) or visible.
LOOKUP_BATCH = """
WITH listed AS (SELECT ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)) AS ids)
SELECT s.id, true, s.role, s.tool_call_id,
       CASE WHEN jsonb_typeof(s.content -> 'tool_calls') = 'array'
            THEN ARRAY(SELECT c ->> 'id' FROM jsonb_array_elements(s.content -> 'tool_calls') AS c) END
FROM round_staging s, listed l WHERE s.id = ANY(l.ids)
UNION ALL
SELECT m.id, false, m.role, m.tool_call_id, NULL FROM agent_messages m, listed l WHERE m.id = ANY(l.ids)
"""

# A row already published (a duplicate delivered after its round committed) is not staged again.
STAGE_BATCH = f"""
INSERT INTO round_staging ({_ROW_COLUMNS})
SELECT {_ROW_COLUMNS} FROM pg_temp.projector_batch b
WHERE b.dest = 's' AND NOT EXISTS (SELECT 1 FROM agent_messages m WHERE m.id = b.id)
ORDER BY b.ord ON CONFLICT (id) DO NOTHING
"""

DIGESTS_FROM_BATCH = """
INSERT INTO tool_digest_cache (thread_ts, tool, args_hash, message_id, tool_call_id, compact, tokens, created_at)
SELECT thread_ts, tool, args_hash, id, tool_call_id, compact, tokens, created_at
FROM pg_temp.projector_batch WHERE args_hash IS NOT NULL
ORDER BY ord ON CONFLICT (thread_ts, tool, args_hash) DO NOTHING
"""

# Many upserts in one statement; a statement may not touch one key twice, so the batch's states
# go in waves (the n-th state of every thread in wave n), which keeps each thread's order, and
# a wave goes in two statements, by whether an alert re-firing keeps the opening time.
_UPSERT_STATES = """
INSERT INTO incident_state AS s (thread_ts, service, status, window_start, window_end, rounds, opened_at, updated_at)
SELECT e->>0, e->>1, e->>2, (e->>3)::timestamptz, (e->>4)::timestamptz, 0, (e->>5)::timestamptz,
       (e->>6)::timestamptz
FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS u(e, ord)
ORDER BY ord
ON CONFLICT (thread_ts) DO UPDATE SET
    service = EXCLUDED.service,
    status = EXCLUDED.status,
    window_start = EXCLUDED.window_start,
    window_end = EXCLUDED.window_end,
    opened_at = {opened_at},
    updated_at = EXCLUDED.updated_at
WHERE s.updated_at <= EXCLUDED.updated_at
"""
UPSERT_STATES_KEEP_OPENED = _UPSERT_STATES.format(opened_at="s.opened_at")
UPSERT_STATES_MOVE_OPENED = _UPSERT_STATES.format(opened_at="EXCLUDED.opened_at")

_NULL = "\\N"


def _copy_lines(
    rows: Sequence[Row],
    dest: Sequence[str],
    k1: Sequence[int],
    k2: Sequence[int],
    digests: dict[int, CacheDigest],
) -> str:
    """The batch table's rows as one COPY text payload (Row.copy_text is rendered with the row)."""
    lines = []
    for k, r in enumerate(rows):
        d = digests.get(k)
        lines.append(
            f"{k}\t{dest[k]}\t{k1[k]}\t{k2[k]}\t{r.copy_text}\t"
            f"{_NULL if d is None else copy_escape(d.tool)}\t{_NULL if d is None else copy_escape(d.args_hash)}\n"
        )
    return "".join(lines)


def _state_waves(states: Sequence[UpsertState]) -> list[tuple[str, tuple[str]]]:
    """(statement, JSON parameter) per wave and kind; no statement names one thread twice."""
    waves: list[list[UpsertState]] = []
    seen: dict[str, int] = {}
    for st in states:
        n = seen.get(st.thread_ts, 0)
        seen[st.thread_ts] = n + 1
        if n == len(waves):
            waves.append([])
        waves[n].append(st)
    out = []
    for wave in waves:
        for keep, statement in ((True, UPSERT_STATES_KEEP_OPENED), (False, UPSERT_STATES_MOVE_OPENED)):
            part = [
                [
                    st.thread_ts,
                    st.service,
                    st.status,
                    st.window_start.isoformat(),
                    st.window_end.isoformat(),
                    st.opened_at.isoformat(),
                    st.updated_at.isoformat(),
                ]
                for st in wave
                if st.keep_opened_at is keep
            ]
            if part:
                out.append((statement, (json.dumps(part),)))
    return out


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
    """The whole batch in three round trips: lock + look up, COPY, write (see fast_plan_applies)."""
    result = BatchResult()
    touched: set[str] = set(threads)
    rows: list[Row] = []
    visible_pos: dict[int, int] = {}  # row index -> op position, for rows visible at once
    digests: list[CacheDigest] = []
    attached: dict[int, CacheDigest] = {}  # row index -> the digest of that very row
    states: list[UpsertState] = []
    posts: list[RecordPost] = []
    markers: list[tuple[int, int, CommitRound]] = []
    pos = 0
    for index, ops in items:
        for op in ops:
            pos += 1
            if isinstance(op, InsertRow):
                visible_pos[len(rows)] = pos
                rows.append(op.row)
                touched.add(op.row.thread_ts)
            elif isinstance(op, StageRow):
                rows.append(op.row)
                touched.add(op.row.thread_ts)
            elif isinstance(op, CacheDigest):
                digests.append(op)
                last = rows[-1] if rows else None
                if (
                    last is not None
                    and last.id == op.message_id
                    and last.compact == op.compact
                    and last.tokens == op.tokens
                    and last.tool_call_id == op.tool_call_id
                    and last.created_at == op.created_at
                    and last.thread_ts == op.thread_ts
                ):
                    attached[len(rows) - 1] = op
            elif isinstance(op, UpsertState):
                states.append(op)
                touched.add(op.thread_ts)
            elif isinstance(op, RecordPost):
                posts.append(op)
            elif isinstance(op, CommitRound):
                markers.append((index, pos, op))
                touched.add(op.thread_ts)
    if len(attached) != len(digests):
        attached = {}  # a digest that is not its row's: insert them all apart, in order
    listed = sorted({m for _i, _p, op in markers for m in op.message_ids})
    with conn.pipeline():
        conn.execute(CREATE_BATCH_TABLE)
        conn.execute(CLEAR_BATCH_TABLE)
        lock_cur = conn.cursor()
        lock_cur.execute(LOCK_OFFSETS, (group, topic, sorted(set(partitions))))
        lookup_cur = conn.cursor()
        if listed:
            lookup_cur.execute(LOOKUP_BATCH, (json.dumps(listed),))
    result.stored_offsets = {int(p): int(n) for p, n in lock_cur.fetchall()}
    found = lookup_cur.fetchall() if listed else []
    in_db_staging = {r[0] for r in found if r[1]}
    in_db_visible = {r[0] for r in found if not r[1]}
    # The batch's staged rows count as staged (as if written first), unless already published.
    first_copy: dict[str, int] = {}
    batch_found: list[tuple[Any, ...]] = []
    for k, r in enumerate(rows):
        if k in visible_pos or r.id in first_copy:
            continue
        first_copy[r.id] = k
        if r.id not in in_db_staging and r.id not in in_db_visible:
            batch_found.append(
                (r.id, True, r.role, r.tool_call_id, list(r.call_ids) if r.role == "ai" else None)
            )
    published, result.rejections = verify_rounds(markers, [*found, *batch_found])
    dest = ["s"] * len(rows)
    k1 = [0] * len(rows)
    k2 = [0] * len(rows)
    for k, p in visible_pos.items():
        dest[k], k1[k] = "v", p
    pub: list[tuple[str, int, int]] = []
    bumps: dict[str, int] = {}
    for _index, marker_pos, op, moving in published:
        order = {m: n for n, m in enumerate(op.message_ids)}
        for m in moving:
            if m in in_db_staging:
                pub.append((m, marker_pos, order[m] + 1))
            else:
                k = first_copy[m]
                dest[k], k1[k], k2[k] = "v", marker_pos, order[m] + 1
        bumps[op.thread_ts] = max(bumps.get(op.thread_ts, 0), op.round)
        result.rounds_committed += 1 if moving else 0  # a marker delivered again publishes nothing
    published_ids = {m for _i, _p, _op, moving in published for m in moving}
    for k, r in enumerate(rows):
        if dest[k] == "s" and (r.id in published_ids or r.id in in_db_visible):
            dest[k] = "x"  # staged before, or visible already: this copy changes nothing
    if rows:
        with conn.cursor().copy(COPY_BATCH) as copy:
            copy.write(_copy_lines(rows, dest, k1, k2, attached))
    with conn.pipeline():
        cur = conn.cursor()
        for statement, params in _state_waves(states):  # before the rounds bump them
            cur.execute(statement, params)
        published_with_notices = bool(rows or pub or bumps)
        if published_with_notices:
            cur.execute(
                PUBLISH_BATCH,
                (
                    json.dumps(pub),
                    json.dumps(bumps),
                    NOTIFY_CHANNEL,
                    schema,
                    json.dumps(sorted(touched) if notify else []),
                ),
            )
        if "s" in dest:
            cur.execute(STAGE_BATCH)
        if attached:
            cur.execute(DIGESTS_FROM_BATCH)
        elif digests:
            cur.execute(INSERT_DIGESTS, _digest_params(digests))
        if posts:
            cur.execute(INSERT_POSTS, _post_params(posts))
        if next_offsets:
            parts = sorted(next_offsets)
            cur.execute(SAVE_OFFSETS, (group, topic, parts, [next_offsets[p] for p in parts]))
        if notify and touched and not published_with_notices:
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
