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

import json
from collections.abc import Sequence

import psycopg
import psycopg.errors

from services.projector import sql
from services.projector.mapping import (
    CacheDigest,
    CommitRound,
    InsertRow,
    RecordPost,
    ReRender,
    Row,
    StageRow,
    UpsertState,
    copy_escape,
)
from services.projector.plan import BatchResult, Items, Rejection, Target, listed_ids
from services.projector.rounds import RoundLedger

_NULL = "\\N"

# Fewer visible rows than this go the batch table's way: a savepoint costs two more round trips,
# which a batch of a few rows (the live projector's) never earns back, while a replay's large batches
# gain (benchmarks/bench_replay.py and bench_projector.py measure both; BENCHMARKS.md, "Replay").
DIRECT_MIN_ROWS = 100


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
                if isinstance(op, StageRow) and op.row.id in listed_by_marker:
                    return False
                if isinstance(op, UpsertState) and op.thread_ts in committed_threads:
                    return False
                if isinstance(op, CommitRound):
                    listed_by_marker.update(op.message_ids)
                    committed_threads.add(op.thread_ts)
        return True

    def apply(self, conn: psycopg.Connection, items: Items, target: Target) -> BatchResult:
        result = BatchResult()
        touched: set[str] = set(target.threads)
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
                    if rows and _is_digest_of(op, rows[-1]):
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
        ledger = RoundLedger(listed, lookup_cur.fetchall() if listed else ())
        in_db_staging, in_db_visible = set(ledger.staged), set(ledger.visible)
        # The batch's staged rows count as staged (as if written first), unless already published.
        first_copy: dict[str, int] = {}
        for k, r in enumerate(rows):
            if k not in visible_pos and r.id not in first_copy:
                first_copy[r.id] = k
                ledger.stage(r)
        dest = ["s"] * len(rows)
        k1 = [0] * len(rows)
        k2 = [0] * len(rows)
        for k, p in visible_pos.items():
            dest[k], k1[k] = "v", p
        pub: list[tuple[str, int, int]] = []
        bumps: dict[str, int] = {}
        published_ids: set[str] = set()
        for index, marker_pos, op in markers:
            verdict = ledger.commit(op)
            if not verdict.published:
                result.rejections.append(Rejection(index, verdict.reason or "?"))
                continue
            order = {m: n for n, m in enumerate(op.message_ids)}
            for m in verdict.moving:
                if m in in_db_staging:
                    pub.append((m, marker_pos, order[m] + 1))
                else:
                    k = first_copy[m]
                    dest[k], k1[k], k2[k] = "v", marker_pos, order[m] + 1
            published_ids.update(verdict.moving)
            bumps[op.thread_ts] = max(bumps.get(op.thread_ts, 0), op.round)
            result.rounds_committed += (
                1 if verdict.moving else 0
            )  # a marker delivered again publishes nothing
        for k, r in enumerate(rows):
            if dest[k] == "s" and (r.id in published_ids or r.id in in_db_visible):
                dest[k] = "x"  # staged before, or visible already: this copy changes nothing
        batch_rows: Sequence[int] = range(len(rows))
        if not pub and _copy_visible(conn, rows, dest, k1, k2):
            # In agent_messages now: into the batch table only to carry a digest, as 'x', content null.
            batch_rows = [k for k in batch_rows if dest[k] != "v" or k in attached]
            dest = ["d" if d == "v" else d for d in dest]
        if batch_rows:
            with conn.cursor().copy(sql.COPY_BATCH) as copy:
                copy.write(_copy_lines(rows, batch_rows, dest, k1, k2, attached))
        with conn.pipeline():
            cur = conn.cursor()
            for statement, params in _state_waves(states):  # before the rounds bump them
                cur.execute(statement, params)
            published_with_notices = bool(rows or pub or bumps)
            if published_with_notices:
                cur.execute(
                    sql.PUBLISH_BATCH,
                    (
                        json.dumps(pub),
                        json.dumps(bumps),
                        sql.NOTIFY_CHANNEL,
                        target.schema,
                        json.dumps(sorted(touched) if target.notify else []),
                    ),
                )
            if "s" in dest:
                cur.execute(sql.STAGE_BATCH)
            if attached:
                cur.execute(sql.DIGESTS_FROM_BATCH)
            elif digests:
                cur.execute(sql.INSERT_DIGESTS, sql.digest_params(digests))
            if posts:
                cur.execute(sql.INSERT_POSTS, sql.post_params(posts))
            if target.next_offsets:
                parts = sorted(target.next_offsets)
                cur.execute(
                    sql.SAVE_OFFSETS,
                    (target.group, target.topic, parts, [target.next_offsets[p] for p in parts]),
                )
            if target.notify and touched and not published_with_notices:
                cur.execute(sql.NOTIFY, (sql.NOTIFY_CHANNEL, target.schema, sorted(touched)))
        return result


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


def _copy_visible(
    conn: psycopg.Connection, rows: list[Row], dest: list[str], k1: list[int], k2: list[int]
) -> bool:
    """COPY the rows visible at once straight into agent_messages, in their (k1, k2) order, as
    PUBLISH_BATCH would insert them (the same seqs); False if nothing went in (fewer than
    DIRECT_MIN_ROWS, or one of them is there already). A row published before (a delivery repeated)
    breaks the unique id: the savepoint undoes the COPY and the batch takes PUBLISH_BATCH, whose
    ON CONFLICT skips it. Only for a batch whose markers move no row out of round_staging."""
    order = sorted((k for k in range(len(rows)) if dest[k] == "v"), key=lambda k: (k1[k], k2[k]))
    if len(order) < DIRECT_MIN_ROWS:
        return False
    first = {rows[k].id: k for k in reversed(order)}  # the first of a repeated id wins, as ON CONFLICT
    try:
        with conn.transaction(), conn.cursor().copy(sql.COPY_VISIBLE) as copy:
            copy.write("".join(f"{rows[k].copy_text}\n" for k in order if first[rows[k].id] == k))
    except psycopg.errors.UniqueViolation:
        return False
    return True


def _copy_lines(
    rows: list[Row],
    which: Sequence[int],
    dest: list[str],
    k1: list[int],
    k2: list[int],
    digests: dict[int, CacheDigest],
) -> str:
    """The batch table's rows `which` as one COPY text payload (Row.copy_text is rendered with the row)."""
    lines = []
    for k in which:
        r = rows[k]
        d = digests.get(k)
        head = (
            f"{k}\tx\t0\t0\t{_null_content(r.copy_text)}"
            if dest[k] == "d"
            else f"{k}\t{dest[k]}\t{k1[k]}\t{k2[k]}\t{r.copy_text}"
        )
        lines.append(
            f"{head}\t{_NULL if d is None else copy_escape(d.tool)}\t"
            f"{_NULL if d is None else copy_escape(d.args_hash)}\n"
        )
    return "".join(lines)


def _null_content(copy_text: str) -> str:
    """A row's COPY fields with its content as JSON null, so COPY parses no raw twice. Content is the
    sixth of sql._ROW_COLUMNS, the order Row.copy_text renders them in."""
    start = -1
    for _ in range(5):
        start = copy_text.index("\t", start + 1)
    end = copy_text.index("\t", start + 1)
    return copy_text[: start + 1] + "null" + copy_text[end:]


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
