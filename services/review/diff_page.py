"""A re-derivation's diff as a page: the projection served (before) against another schema (after, e.g.
`rederive --into NAME`'s), through the same pure diff `rederive` prints (schemas/compact_diff.py), with
the two compacts of each changed row side by side. Dead letters are not read here (they are on Kafka;
`rederive`'s own report counts them), so a digest that failed into the DLQ shows as a missing row.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from schemas.compact_diff import Row, Snapshot, diff
from services.review import model, queries

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
SHOWN_ROWS = 50


def _rows(conn: psycopg.Connection, schema: str) -> dict[str, Row]:
    query = sql.SQL(queries.DIFF_ROWS).format(sql.Identifier(schema))
    return {r[0]: Row(*r) for r in conn.execute(query).fetchall()}


def diff_view(conn: psycopg.Connection, before: str, after: str) -> dict[str, Any] | None:
    """None when `after` is not a schema name holding a projection."""
    if not SCHEMA_NAME.match(after):
        return None
    exists = conn.execute(queries.SCHEMA_EXISTS, (after,)).fetchone()
    if not exists or not exists[0]:
        return None
    old, new = _rows(conn, before), _rows(conn, after)
    report = diff(Snapshot(before, old), Snapshot(after, new)).to_json()
    pairs: list[dict[str, Any]] = []
    for thread in report["threads"]:
        for rid in thread["changed"]:
            if len(pairs) >= SHOWN_ROWS:
                break
            lost = [f"{f['kind']} {f['value']} at {f['where']}" for f in thread["lost_facts"].get(rid, [])]
            pairs.append({
                "id": rid, "thread_ts": thread["thread_ts"], "lost": lost,
                "before": model.pretty(old[rid].compact), "after": model.pretty(new[rid].compact),
                "tokens": [old[rid].tokens, new[rid].tokens],
            })  # fmt: skip
    changed = sum(len(t["changed"]) for t in report["threads"])
    return {**report, "pairs": pairs, "changed": changed, "shown": len(pairs)}
