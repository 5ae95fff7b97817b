"""Which projection readers see, and which writers keep it current: the pointer and the run record.

Readers reach the projection through a schema of views (`live` by default) whose pointer table names
the active projection (`rederive --switch` swaps both in one transaction). A re-derived projection's
schema holds its run record, which names the compactor app id, the compacted and dead-letter topics and
the projector group that write it. A compactor or projector started with `--follow-switch VIEWS` reads
both here, so it writes whatever projection readers see, and moves when the switch does. These are
statements of the contract, below the services: no writer imports `rederive`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg import sql

POINTER_TABLE = "projection_pointer"
RUN_TABLE = "rederive_run"
DEFAULT_VIEWS_SCHEMA = "live"


@dataclass(frozen=True)
class Writers:
    """What writes one projection: the pipeline behind a schema."""

    schema: str
    events_topic: str
    compacted_topic: str
    dlq_topic: str
    compactor_app_id: str
    projector_group: str
    # the compactor settings (COMPACTOR_PLUGINS, _TOOL_MAP, _BUDGETS) it was made with, and the versions
    # they gave: a following compactor adopts the settings and moves only if its code gives the versions
    compactor_settings: dict[str, str] = field(default_factory=dict)
    compactor_versions: dict[str, str] = field(default_factory=dict)


def table_exists(conn: psycopg.Connection, schema: str, table: str) -> bool:
    """Whether `schema.table` exists (a table or a view)."""
    found = conn.execute("SELECT to_regclass(%s)", (str(sql.Identifier(schema, table).as_string(conn)),))
    row = found.fetchone()
    return row is not None and row[0] is not None


def active_projection(conn: psycopg.Connection, views: str) -> str | None:
    """The schema behind the views of `views`, or None before the first switch."""
    if not table_exists(conn, views, POINTER_TABLE):
        return None
    row = conn.execute(
        sql.SQL("SELECT active FROM {}").format(sql.Identifier(views, POINTER_TABLE))
    ).fetchone()
    return None if row is None else str(row[0])


def rederived_writers(conn: psycopg.Connection, schema: str) -> Writers | None:
    """The writers named by `schema`'s run record, or None for a schema no re-derivation made."""
    if not table_exists(conn, schema, RUN_TABLE):
        return None
    row = conn.execute(
        sql.SQL(
            "SELECT events_topic, compacted_topic, dlq_topic, app_id, projector_group, {} FROM {} LIMIT 1"
        ).format(
            sql.SQL(
                "compactor_settings, compactor_versions"
                if _has_column(conn, schema, "compactor_versions")
                else "NULL, NULL"
            ),
            sql.Identifier(schema, RUN_TABLE),
        )
    ).fetchone()
    if row is None:
        return None
    events, compacted, dlq, app_id, group = (str(v) for v in row[:5])
    return Writers(schema, events, compacted, dlq, app_id, group, dict(row[5] or {}), dict(row[6] or {}))


def _has_column(conn: psycopg.Connection, schema: str, column: str) -> bool:
    found = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
        " AND column_name = %s",
        (schema, RUN_TABLE, column),
    ).fetchone()
    return found is not None
