"""GroupDirectory: which incident an Alertmanager group last had, from ingest's memory or the read model."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import psycopg
from psycopg.types.json import Jsonb

from services.ingest.alerts import Window, map_webhook
from services.ingest.directory import GroupDirectory

from .helpers import group_notification

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def _project(
    conn: psycopg.Connection, thread: str, key: str, status: str, opened: datetime, updated: datetime
) -> None:
    """The two rows the projector writes for an alert (agent_messages alert row, incident_state)."""
    conn.execute(
        "INSERT INTO agent_messages (id, thread_ts, role, content, tokens, created_at)"
        " VALUES (%s, %s, 'alert', %s, 1, %s)",
        (f"{thread}:-:alert:0", thread, Jsonb({"alert": {"groupKey": key}}), opened),
    )
    conn.execute(
        "INSERT INTO incident_state (thread_ts, service, status, window_start, window_end, opened_at, updated_at)"
        " VALUES (%s, 'checkout', %s, %s, %s, %s, %s)",
        (thread, status, opened, opened, opened, updated),
    )
    conn.commit()


def test_the_read_model_answers_with_the_groups_newest_incident(
    pg_dsn: str, pg_schema: str, pg_conn: psycopg.Connection
) -> None:
    later = datetime(2026, 3, 14, 11, 0, tzinfo=UTC)
    _project(pg_conn, "1773478800.000001", "g", "resolved", T0, datetime(2026, 3, 14, 9, 20, tzinfo=UTC))
    _project(pg_conn, "1773486000.000001", "g", "open", later, later)
    _project(pg_conn, "1773478800.000002", "other", "open", T0, T0)
    groups = GroupDirectory(pg_dsn, pg_schema, recent_ttl_s=0)
    try:
        newest = groups.known("g")
        assert newest is not None and (newest.thread_ts, newest.opened_at, newest.resolved_at) == (
            "1773486000.000001",
            later,
            None,
        )
        pg_conn.execute("DELETE FROM incident_state WHERE thread_ts = '1773486000.000001'")
        pg_conn.commit()
        older = groups.known("g")
        assert older is not None and older.resolved_at == datetime(2026, 3, 14, 9, 20, tzinfo=UTC)
        assert groups.known("never-seen") is None
        indexes = pg_conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = 'agent_messages_alert_group'",
            (pg_schema,),
        ).fetchall()
        assert len(indexes) == 1 and "'groupKey'" in indexes[0][0]  # migration 005: the lookup's index
    finally:
        groups.close()


def test_its_own_decisions_come_first_and_expire() -> None:
    groups = GroupDirectory(None, recent_ttl_s=0.2)  # no database: memory only
    group = map_webhook(group_notification("firing", "g", "2026-03-14T09:00:00Z"), Window(), groups.known)
    assert groups.known("g") is None
    groups.decided(group)
    assert groups.known("g") == group.incident
    time.sleep(0.25)
    assert groups.known("g") is None


def test_a_database_that_does_not_answer_means_a_stateless_mapping_not_an_error() -> None:
    groups = GroupDirectory("postgresql://nobody@127.0.0.1:1/none", recent_ttl_s=0)
    started = time.monotonic()
    assert groups.known("g") is None
    group = map_webhook(group_notification("firing", "g", "2026-03-14T09:00:00Z"), Window(), groups.known)
    assert group.thread_ts.startswith("1773478800.")
    assert time.monotonic() - started < 5
