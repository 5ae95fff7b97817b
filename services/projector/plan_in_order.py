"""The in-order plan: every operation in arrival order, one statement each (writes of a kind merged).

It applies to every batch, so it is the reference meaning the COPY plan must equal. Round
markers are judged by `rounds.RoundLedger`, fed in the same order as the statements run, so
a batch takes one round trip, or two when it holds markers (the listed ids are looked up first).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from schemas.read_model import NOTIFY_CHANNEL
from services.projector import row_format, sql
from services.projector.mapping import (
    CacheDigest,
    CommitRound,
    Op,
    RecordPost,
    ReRender,
    Row,
    UpsertState,
)
from services.projector.plan import BatchResult, Items, Rejection, Target, listed_ids
from services.projector.rounds import RoundLedger


class _Pending:
    """Plain writes waiting to be sent as one statement per table, in arrival order."""

    def __init__(self) -> None:
        self.visible: list[Row] = []
        self.staged: list[Row] = []
        self.digests: list[CacheDigest] = []
        self.states: list[UpsertState] = []
        self.posts: list[RecordPost] = []

    def add(self, op: Op) -> bool:
        if isinstance(op, Row):
            (self.staged if op.staged else self.visible).append(op)
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
            cur.execute(sql.INSERT_VISIBLE, row_format.row_params(self.visible))
        if self.staged:
            cur.execute(sql.INSERT_STAGED, row_format.row_params(self.staged))
        if self.digests:
            cur.execute(sql.INSERT_DIGESTS, sql.columns(CacheDigest, self.digests))
        if self.states:  # one by one: one statement may not upsert the same key twice
            cur.executemany(sql.UPSERT_STATE, [sql.state_params(s) for s in self.states])
        if self.posts:
            cur.execute(sql.INSERT_POSTS, sql.columns(RecordPost, self.posts))
        self.visible, self.staged, self.digests, self.states, self.posts = [], [], [], [], []


class InOrderPlan:
    name = "in_order"

    def applies(self, items: Items) -> bool:
        return True

    def apply(self, conn: psycopg.Connection, items: Items, target: Target) -> BatchResult:
        result = BatchResult()
        listed = listed_ids(items)
        lock_cur = conn.cursor()
        ledger = RoundLedger(listed)
        if listed:  # the round check needs to know where the listed ids stand before the batch
            lookup_cur = conn.cursor()
            with conn.pipeline():
                lock_cur.execute(
                    sql.LOCK_OFFSETS, (target.group, target.topic, sorted(set(target.partitions)))
                )
                lookup_cur.execute(sql.LOOKUP_BATCH, (json.dumps(listed),))
            result.stored_offsets = {int(p): int(n) for p, n in lock_cur.fetchall()}
            ledger = RoundLedger(listed, lookup_cur.fetchall())
        re_renders: list[tuple[int, ReRender, psycopg.Cursor[Any]]] = []
        touched: set[str] = set(target.threads)
        with conn.pipeline():
            if not listed:
                lock_cur.execute(
                    sql.LOCK_OFFSETS, (target.group, target.topic, sorted(set(target.partitions)))
                )
            cur = conn.cursor()
            pending = _Pending()
            for index, ops in items:
                for op in ops:
                    touched.add(op.thread_ts)
                    if pending.add(op):
                        if isinstance(op, Row) and op.staged:
                            ledger.stage(op)
                        continue
                    pending.flush(cur)
                    if isinstance(op, CommitRound):
                        verdict = ledger.commit(op)
                        if not verdict.published:
                            result.rejections.append(Rejection(index, verdict.reason or "?"))
                            continue
                        cur.execute(
                            sql.PUBLISH_ROUND,
                            {"ids": list(op.message_ids), "round": op.round, "thread_ts": op.thread_ts},
                        )
                        result.rounds_committed += (
                            1 if verdict.moving else 0
                        )  # a marker again publishes nothing
                    elif isinstance(op, ReRender):
                        control = conn.cursor()
                        control.execute(
                            sql.RE_RENDER,
                            {
                                "compact": op.compact,
                                "tokens": op.tokens,
                                "id": op.target_id,
                                "event_id": op.event_id,
                                "made_round": op.made_round,
                                "policy": op.policy,
                            },
                        )
                        re_renders.append((index, op, control))
            pending.flush(cur)
            if target.next_offsets:
                parts = sorted(target.next_offsets)
                cur.execute(
                    sql.SAVE_OFFSETS,
                    (target.group, target.topic, parts, [target.next_offsets[p] for p in parts]),
                )
            if target.notify and touched:
                cur.execute(sql.NOTIFY, (NOTIFY_CHANNEL, target.schema, sorted(touched)))
        if not listed:
            result.stored_offsets = {int(p): int(n) for p, n in lock_cur.fetchall()}
        for index, op, control in re_renders:
            record = control.fetchone()
            if record is None or record[0] == 0:
                result.rejections.append(
                    Rejection(index, f"re-render target {op.target_id!r} is not projected")
                )
        result.rejections.sort(key=lambda r: r.item)
        return result
