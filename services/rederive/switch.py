"""Blue/green for readers: a schema of views (`live`) over the active projection, swapped in ONE transaction.

Every reader (the agent, the telemetry MCP server, the Slack poster, ingest's directories, `show`)
takes its schema as a parameter and reads through `search_path`; given the views' schema, each of
its statements reads one projection, all old or all new. The swap drops and recreates every view in
one transaction: DROP VIEW takes each view's ACCESS EXCLUSIVE lock, so a statement that started on
the old views finishes on them and one that starts after waits for the commit and sees only the new.
The swap waits at most `LOCK_WAIT` for a lock (a reader could hold one view while waiting for
another that the swap already holds); on a timeout it rolls back, so that reader goes on, and tries
again. A pointer table in the views' schema records the active projection and the previous one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg
from psycopg import errors, sql

from schemas import projections
from schemas.migrate import discover
from services.runtime.errors import UserFacingError

# What readers read (schemas/read_model.py and the services' own reads), in the order they lock them.
READ_TABLES = ("agent_messages", "tool_digest_cache", "incident_state", "round_staging", "slack_posts")
POINTER = projections.POINTER_TABLE
READER_ROLE = "incident_memory_reader"
LOCK_WAIT = "200ms"
_SWITCH_LOCK = 0x5E1EC7  # pg_advisory_xact_lock: one switch at a time


@dataclass(frozen=True)
class Pointer:
    active: str
    previous: str | None


def schema_exists(conn: psycopg.Connection, schema: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


def read_pointer(conn: psycopg.Connection, views: str) -> Pointer | None:
    """The active and previous projections behind `views`, or None before the first switch."""
    if not projections.table_exists(conn, views, POINTER):
        return None
    row = conn.execute(
        sql.SQL("SELECT active, previous FROM {}.{}").format(sql.Identifier(views), sql.Identifier(POINTER))
    ).fetchone()
    return None if row is None else Pointer(row[0], row[1])


def check_projection(conn: psycopg.Connection, schema: str) -> None:
    """A schema readers can be switched to: it exists, has every table, and every migration applied."""
    if not schema_exists(conn, schema):
        raise UserFacingError(f"schema {schema!r} does not exist")
    for table in READ_TABLES:
        if not projections.table_exists(conn, schema, table):
            raise UserFacingError(f"schema {schema!r} is not a projection: it has no table {table}")
    applied = {
        v
        for (v,) in conn.execute(
            sql.SQL("SELECT version FROM {}.schema_migrations").format(sql.Identifier(schema))
        ).fetchall()
    }
    pending = [m.version for m in discover() if m.version not in applied]
    if pending:
        raise UserFacingError(f"schema {schema!r} lacks migrations {', '.join(pending)}")


def switch(
    conn: psycopg.Connection,
    views: str,
    target: str,
    *,
    first_previous: str = "public",
    timeout: float = 30.0,
) -> Pointer:
    """Point every view of `views` at `target`, in one transaction; returns the new pointer.

    `conn` must be in autocommit mode (each attempt is its own transaction). The first switch creates
    the views' schema and records `first_previous` (what readers used before) as the previous one.
    """
    check_projection(conn, target)
    if views == target:
        raise UserFacingError(f"the views' schema {views!r} cannot be the projection behind them")
    for table in READ_TABLES:
        kind = conn.execute(
            "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", (f"{views}.{table}",)
        ).fetchone()
        if kind is not None and kind[0] != "v":
            raise UserFacingError(
                f"{views}.{table} is a table, not a view: {views!r} is a projection, not views"
            )
    deadline = time.monotonic() + timeout
    while True:
        try:
            with conn.transaction():
                return _switch_once(conn, views, target, first_previous)
        except errors.LockNotAvailable:
            if time.monotonic() > deadline:
                raise UserFacingError(
                    f"could not take the views of {views!r} within {timeout:g}s: a reader holds them"
                ) from None
            time.sleep(0.02)


def _switch_once(conn: psycopg.Connection, views: str, target: str, first_previous: str) -> Pointer:
    ident_views = sql.Identifier(views)
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SWITCH_LOCK,))
    conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_WAIT)))
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident_views))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {}.{} (one boolean PRIMARY KEY DEFAULT true CHECK (one),"
            " active text NOT NULL, previous text, switched_at timestamptz NOT NULL DEFAULT now())"
        ).format(ident_views, sql.Identifier(POINTER))
    )
    before = read_pointer(conn, views)
    for table in READ_TABLES:
        view = sql.Identifier(views, table)
        conn.execute(sql.SQL("DROP VIEW IF EXISTS {}").format(view))
        conn.execute(
            sql.SQL("CREATE VIEW {} AS SELECT * FROM {}").format(view, sql.Identifier(target, table))
        )
    if before is None:
        previous: str | None = first_previous if first_previous != target else None
    else:
        previous = before.active if before.active != target else before.previous
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.{} (one, active, previous, switched_at) VALUES (true, %s, %s, now()) "
            "ON CONFLICT (one) DO UPDATE SET active = EXCLUDED.active, previous = EXCLUDED.previous, "
            "switched_at = EXCLUDED.switched_at"
        ).format(ident_views, sql.Identifier(POINTER)),
        (target, previous),
    )
    role = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER_ROLE,)).fetchone()
    if role is not None:
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident_views, sql.Identifier(READER_ROLE))
        )
        conn.execute(
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                ident_views, sql.Identifier(READER_ROLE)
            )
        )
    return Pointer(target, previous)


def forget_previous(conn: psycopg.Connection, views: str) -> str:
    """Clear the previous projection from the pointer and return its name (the caller drops it)."""
    pointer = read_pointer(conn, views)
    if pointer is None or pointer.previous is None:
        raise UserFacingError(f"no previous projection is recorded behind {views!r}: nothing to drop")
    if pointer.previous == pointer.active:
        raise UserFacingError(f"{pointer.previous!r} is the active projection; it cannot be dropped")
    if pointer.previous == "public":
        raise UserFacingError("the previous projection is 'public'; drop its tables by hand if you mean to")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SWITCH_LOCK,))
        conn.execute(
            sql.SQL("UPDATE {}.{} SET previous = NULL").format(sql.Identifier(views), sql.Identifier(POINTER))
        )
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(pointer.previous)))
    return pointer.previous
