"""The projection's store: a connection, its offsets, and a batch handed to the first plan that fits.

`apply_batch` keeps the exact sequential meaning of the operations (so a batch of 1 and a batch
of 5,000 give the same tables, which replays rely on). The COPY plan (`plan_copy`) takes three
round trips and applies to nearly every batch; the in-order plan (`plan_in_order`) applies to
every batch and is the reference. The SQL lives in `sql`, the round check in `rounds`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import psycopg
from psycopg import sql as pgsql

from services.projector.plan import BatchResult, Items, Plan, Target
from services.projector.plan_copy import CopyPlan
from services.projector.plan_in_order import InOrderPlan
from services.projector.profile_store import profile_threads, split_profile_ops, write_profiles

COPY = CopyPlan()
IN_ORDER = InOrderPlan()
PLANS: tuple[Plan, ...] = (COPY, IN_ORDER)  # the first that applies writes the batch


def connect(dsn: str, schema: str, *, connect_timeout: float = 10) -> psycopg.Connection:
    """A projection connection: not autocommit, search_path pinned to `schema`."""
    conn = psycopg.connect(dsn, connect_timeout=int(connect_timeout), autocommit=False)
    conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
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


def choose_plan(items: Items, plans: Sequence[Plan] = PLANS) -> Plan:
    """The first of `plans` that applies; the in-order plan, which applies to all, if none does."""
    return next((p for p in plans if p.applies(items)), IN_ORDER)


def apply_batch(
    conn: psycopg.Connection,
    items: Items,
    *,
    group: str,
    topic: str,
    partitions: Iterable[int],
    next_offsets: dict[int, int],
    schema: str,
    notify: bool = True,
    threads: Iterable[str] = (),
    plans: Sequence[Plan] = PLANS,
) -> BatchResult:
    """Apply `(item index, ops)` in order inside the caller's transaction, and save offsets.

    Returns the logical rejections and the offsets that were stored when the batch began (locked
    FOR UPDATE, so the caller can compare them with what it expected and roll back on a mismatch).
    Raises psycopg errors as they come; the caller decides whether the batch or Postgres is at fault.
    """
    target = Target(group, topic, schema, list(partitions), next_offsets, notify, list(threads))
    split = [(k, split_profile_ops(ops)) for k, ops in items]
    rows_items = [(k, rest) for k, (rest, _facts) in split]
    result = choose_plan(rows_items, plans).apply(conn, rows_items, target)
    rejected = {r.item for r in result.rejections}
    facts = [f for k, (_rest, fs) in split if k not in rejected for f in fs]
    write_profiles(conn, facts, profile_threads([(k, ops) for k, ops in items if k not in rejected]))
    return result


def notify_payload(schema: str, thread_ts: str, max_seq: int | None) -> str:
    """The NOTIFY payload, as `sql.NOTIFY` builds it (used by tests and listeners)."""
    return json.dumps({"schema": schema, "thread_ts": thread_ts, "max_seq": max_seq})
