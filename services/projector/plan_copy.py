"""The COPY plan: a whole batch in three round trips, for the batches where order allows it.

Lock the offsets and look up the ids the batch's round markers list; COPY every row into a
temporary table, each marked with where it goes; then one pipeline that publishes (rows visible
at once, rounds whose marker is in the batch, rounds moved out of round_staging), stages the rest,
and writes digests, incident_state, offsets and notices from that table. A round whose marker
arrives in the same batch as its rows goes straight into agent_messages: the batch is one
transaction, so the round still becomes visible at once, with its offsets.

When no marker of the batch moves a row out of round_staging, every row the batch publishes is
in it, so those rows (at least DIRECT_MIN_ROWS of them) are COPYed into agent_messages
themselves, in publishing order, before the temporary table (`_copy_visible`): written once, by
COPY's multi-row inserts, instead of twice.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
import psycopg.errors

from schemas.read_model import NOTIFY_CHANNEL
from services.projector import sql
from services.projector.mapping import (
    CacheDigest,
    CommitRound,
    RecordPost,
    ReRender,
    Row,
    UpsertState,
)
from services.projector.plan import BatchResult, Items, Rejection, Target, listed_ids
from services.projector.rounds import RoundLedger
from services.projector.row_format import NULL, copy_escape, line_of, with_null_content

# Fewer visible rows than this go the batch table's way: a savepoint costs two more round trips,
# which a batch of a few rows (the live projector's) never earns back, while a replay's large batches
# gain (benchmarks/bench_replay.py and bench_projector.py measure both; BENCHMARKS.md, "Replay").
DIRECT_MIN_ROWS = 100


class Dest(enum.Enum):
    """Where one row of the batch goes. The value is its code in the batch table's `dest` column."""

    VISIBLE = "v"  # into agent_messages by PUBLISH_BATCH, at position (k1, k2)
    STAGED = "s"  # into round_staging by STAGE_BATCH
    NOWHERE = "x"  # a copy of a row staged before or visible already: changes nothing
    COPIED = "c"  # COPYed into agent_messages already (`_copy_visible`); in the table as 'x'

    @property
    def code(self) -> str:
        return "x" if self is Dest.COPIED else self.value


@dataclass
class _Batch:
    """The batch's operations, sorted by kind, with each row's place in the batch's order."""

    rows: list[Row] = field(default_factory=list)
    visible_pos: dict[int, int] = field(default_factory=dict)  # row index -> op position (visible at once)
    digests: list[CacheDigest] = field(default_factory=list)
    attached: dict[int, CacheDigest] = field(default_factory=dict)  # row index -> the digest of that row
    states: list[UpsertState] = field(default_factory=list)
    posts: list[RecordPost] = field(default_factory=list)
    markers: list[tuple[int, int, CommitRound]] = field(default_factory=list)  # (item, op position, marker)
    touched: set[str] = field(default_factory=set)


@dataclass
class _Routes:
    """Each row's destination and publishing position, and what the markers move out of round_staging."""

    dest: list[Dest]
    k1: list[int]
    k2: list[int]
    pub: list[tuple[str, int, int]] = field(default_factory=list)  # (staged id, k1, k2)
    bumps: dict[str, int] = field(default_factory=dict)  # thread -> the highest round published


class CopyPlan:
    name = "copy"

    def applies(self, items: Items) -> bool:
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
                if isinstance(op, Row) and op.staged and op.id in listed_by_marker:
                    return False
                if isinstance(op, UpsertState) and op.thread_ts in committed_threads:
                    return False
                if isinstance(op, CommitRound):
                    listed_by_marker.update(op.message_ids)
                    committed_threads.add(op.thread_ts)
        return True

    def apply(self, conn: psycopg.Connection, items: Items, target: Target) -> BatchResult:
        """Three round trips: lock and look up; COPY the rows; one pipeline of the rest."""
        batch = _collect(items, target)
        result = BatchResult()
        listed = listed_ids(items)
        with conn.pipeline():
            conn.execute(sql.CREATE_BATCH_TABLE)
            conn.execute(sql.CLEAR_BATCH_TABLE)
            lock_cur = conn.cursor()
            lock_cur.execute(sql.LOCK_OFFSETS, (target.group, target.topic, sorted(set(target.partitions))))
            lookup_cur = conn.cursor()
            if listed:
                lookup_cur.execute(sql.LOOKUP_BATCH, (json.dumps(listed),))
        result.stored_offsets = {int(p): int(n) for p, n in lock_cur.fetchall()}
        routes = _route(batch, RoundLedger(listed, lookup_cur.fetchall() if listed else ()), result)
        _copy_rows(conn, batch, routes)
        _write_the_rest(conn, batch, routes, target)
        return result


def _collect(items: Items, target: Target) -> _Batch:
    """Sort the batch's operations by kind, numbering them in arrival order (the publishing order)."""
    b = _Batch(touched=set(target.threads))
    pos = 0
    for index, ops in items:
        for op in ops:
            pos += 1
            if isinstance(op, Row):
                if not op.staged:
                    b.visible_pos[len(b.rows)] = pos
                b.rows.append(op)
                b.touched.add(op.thread_ts)
            elif isinstance(op, CacheDigest):
                b.digests.append(op)
                if b.rows and _is_digest_of(op, b.rows[-1]):
                    b.attached[len(b.rows) - 1] = op
            elif isinstance(op, UpsertState):
                b.states.append(op)
                b.touched.add(op.thread_ts)
            elif isinstance(op, RecordPost):
                b.posts.append(op)
            elif isinstance(op, CommitRound):
                b.markers.append((index, pos, op))
                b.touched.add(op.thread_ts)
    if len(b.attached) != len(b.digests):
        b.attached = {}  # a digest that is not its row's: insert them all apart, in order
    return b


def _route(b: _Batch, ledger: RoundLedger, result: BatchResult) -> _Routes:
    """Judge the markers (rejections and round counts into `result`) and give every row its place."""
    in_db_staging, in_db_visible = set(ledger.staged), set(ledger.visible)
    # The batch's staged rows count as staged (as if written first), unless already published.
    first_copy: dict[str, int] = {}
    for k, r in enumerate(b.rows):
        if k not in b.visible_pos and r.id not in first_copy:
            first_copy[r.id] = k
            ledger.stage(r)
    n = len(b.rows)
    routes = _Routes([Dest.STAGED] * n, [0] * n, [0] * n)
    for k, p in b.visible_pos.items():
        routes.dest[k], routes.k1[k] = Dest.VISIBLE, p
    published_ids: set[str] = set()
    for index, marker_pos, op in b.markers:
        verdict = ledger.commit(op)
        if not verdict.published:
            result.rejections.append(Rejection(index, verdict.reason or "?"))
            continue
        order = {m: i for i, m in enumerate(op.message_ids)}
        for m in verdict.moving:
            if m in in_db_staging:
                routes.pub.append((m, marker_pos, order[m] + 1))
            else:
                k = first_copy[m]
                routes.dest[k], routes.k1[k], routes.k2[k] = Dest.VISIBLE, marker_pos, order[m] + 1
        published_ids.update(verdict.moving)
        routes.bumps[op.thread_ts] = max(routes.bumps.get(op.thread_ts, 0), op.round)
        result.rounds_committed += 1 if verdict.moving else 0  # a marker delivered again publishes nothing
    for k, r in enumerate(b.rows):
        if routes.dest[k] is Dest.STAGED and (r.id in published_ids or r.id in in_db_visible):
            routes.dest[k] = Dest.NOWHERE  # staged before, or visible already: this copy changes nothing
    return routes


def _copy_rows(conn: psycopg.Connection, b: _Batch, routes: _Routes) -> None:
    """COPY the rows: the visible ones straight into agent_messages when that is allowed and worth
    it (then marked COPIED), and into the batch table every row that still has somewhere to go."""
    which: Sequence[int] = range(len(b.rows))
    if not routes.pub and _copy_visible(conn, b.rows, routes):
        # In agent_messages now: into the batch table only to carry a digest, content null.
        which = [k for k in which if routes.dest[k] is not Dest.VISIBLE or k in b.attached]
        routes.dest = [Dest.COPIED if d is Dest.VISIBLE else d for d in routes.dest]
    if which:
        with conn.cursor().copy(sql.COPY_BATCH) as copy:
            copy.write(_copy_lines(b.rows, which, routes, b.attached))


def _write_the_rest(conn: psycopg.Connection, b: _Batch, routes: _Routes, target: Target) -> None:
    """One pipeline: states, publishing (with its notices), staging, digests, posts, offsets."""
    with conn.pipeline():
        cur = conn.cursor()
        for statement, params in _state_waves(b.states):  # before the rounds bump them
            cur.execute(statement, params)
        published_with_notices = bool(b.rows or routes.pub or routes.bumps)
        if published_with_notices:
            notified = sorted(b.touched) if target.notify else []
            cur.execute(
                sql.PUBLISH_BATCH,
                (
                    json.dumps(routes.pub),
                    json.dumps(routes.bumps),
                    NOTIFY_CHANNEL,
                    target.schema,
                    json.dumps(notified),
                ),
            )
        if Dest.STAGED in routes.dest:
            cur.execute(sql.STAGE_BATCH)
        if b.attached:
            cur.execute(sql.DIGESTS_FROM_BATCH)
        elif b.digests:
            cur.execute(sql.INSERT_DIGESTS, sql.columns(CacheDigest, b.digests))
        if b.posts:
            cur.execute(sql.INSERT_POSTS, sql.columns(RecordPost, b.posts))
        if target.next_offsets:
            parts = sorted(target.next_offsets)
            cur.execute(
                sql.SAVE_OFFSETS, (target.group, target.topic, parts, [target.next_offsets[p] for p in parts])
            )
        if target.notify and b.touched and not published_with_notices:
            cur.execute(sql.NOTIFY, (NOTIFY_CHANNEL, target.schema, sorted(b.touched)))


def _is_digest_of(digest: CacheDigest, row: Row) -> bool:
    """Whether the digest repeats the row just before it (then it is COPYed on the row's line)."""
    return (
        row.id == digest.message_id
        and row.compact == digest.compact
        and row.tokens == digest.tokens
        and row.tool_call_id == digest.tool_call_id
        and row.created_at == digest.created_at
        and row.thread_ts == digest.thread_ts
    )


def _copy_visible(conn: psycopg.Connection, rows: list[Row], routes: _Routes) -> bool:
    """COPY the rows visible at once straight into agent_messages, in their (k1, k2) order, as
    PUBLISH_BATCH would insert them (the same seqs); False if nothing went in (fewer than
    DIRECT_MIN_ROWS, or one of them is there already). A row published before (a delivery repeated)
    breaks the unique id: the savepoint undoes the COPY and the batch takes PUBLISH_BATCH, whose
    ON CONFLICT skips it. Only for a batch whose markers move no row out of round_staging."""
    dest, k1, k2 = routes.dest, routes.k1, routes.k2
    order = sorted((k for k in range(len(rows)) if dest[k] is Dest.VISIBLE), key=lambda k: (k1[k], k2[k]))
    if len(order) < DIRECT_MIN_ROWS:
        return False
    first = {rows[k].id: k for k in reversed(order)}  # the first of a repeated id wins, as ON CONFLICT
    try:
        with conn.transaction(), conn.cursor().copy(sql.COPY_VISIBLE) as copy:
            copy.write("".join(f"{line_of(rows[k])}\n" for k in order if first[rows[k].id] == k))
    except psycopg.errors.UniqueViolation:
        return False
    return True


def _copy_lines(
    rows: list[Row], which: Sequence[int], routes: _Routes, digests: dict[int, CacheDigest]
) -> str:
    """The batch table's rows `which` as one COPY text payload, in sql.BATCH_COLUMNS' order."""
    lines = []
    for k in which:
        r, d, dest = rows[k], digests.get(k), routes.dest[k]
        head = (
            f"{k}\t{dest.code}\t0\t0\t{with_null_content(line_of(r))}"
            if dest is Dest.COPIED
            else f"{k}\t{dest.code}\t{routes.k1[k]}\t{routes.k2[k]}\t{line_of(r)}"
        )
        lines.append(
            f"{head}\t{NULL if d is None else copy_escape(d.tool)}\t"
            f"{NULL if d is None else copy_escape(d.args_hash)}\n"
        )
    return "".join(lines)


def _state_waves(states: list[UpsertState]) -> list[tuple[str, tuple[str]]]:
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
        for keep, statement in (
            (True, sql.UPSERT_STATES_KEEP_OPENED),
            (False, sql.UPSERT_STATES_MOVE_OPENED),
        ):
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
