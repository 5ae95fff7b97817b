"""Migrations on the real PostgreSQL: idempotent, as designed, and edited ones refused."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from schemas.migrate import MigrationError, apply_migrations, discover

DESIGNED = {  # table -> columns that 001_initial.sql promises (later migrations may add more)
    "agent_messages": {"id", "thread_ts", "seq", "round", "role", "tool_call_id", "content", "compact", "tokens",
                       "created_at"},
    "incident_state": {"thread_ts", "service", "status", "window_start", "window_end", "rounds", "opened_at",
                       "updated_at"},
    "round_staging": {"id", "thread_ts", "round", "role", "tool_call_id", "content", "compact", "tokens",
                      "created_at"},
    "tool_digest_cache": {"thread_ts", "tool", "args_hash", "message_id", "tool_call_id", "compact", "tokens",
                          "created_at"},
    "projector_offsets": {"consumer_group", "topic", "partition", "next_offset"},
    "schema_migrations": {"version", "name", "checksum", "applied_at"},
}  # fmt: skip


@pytest.fixture
def fresh_schema(pg_dsn: str) -> Iterator[str]:
    """An empty, not-yet-created schema name (pg_schema is already migrated)."""
    name = f"m_{uuid.uuid4().hex[:16]}"
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_apply_twice_into_a_fresh_schema(pg_dsn: str, fresh_schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert apply_migrations(conn, fresh_schema) == [m.version for m in discover()]
        assert apply_migrations(conn, fresh_schema) == []
        recorded = conn.execute(
            sql.SQL("SELECT version, checksum FROM {}.schema_migrations ORDER BY version").format(
                sql.Identifier(fresh_schema)
            )
        ).fetchall()
    assert recorded == [(m.version, m.checksum) for m in discover()]


def test_tables_land_in_the_given_schema(pg_dsn: str, fresh_schema: str, pg_schema: str) -> None:
    count = "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute(count, (fresh_schema,)).fetchone()
        assert row is not None and row[0] == 0
        apply_migrations(conn, fresh_schema)
        fresh, other = (conn.execute(count, (s,)).fetchone() for s in (fresh_schema, pg_schema))
    assert fresh is not None and other is not None
    assert fresh[0] == other[0] >= len(DESIGNED)


def test_tables_and_columns_exist_as_designed(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    rows = pg_conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s", (pg_schema,)
    ).fetchall()
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(table, set()).add(column)
    for table, columns in DESIGNED.items():
        assert columns <= found.get(table, set()), f"{table}: missing {columns - found.get(table, set())}"


def test_agent_messages_constraints(pg_conn: psycopg.Connection) -> None:
    insert = (
        "INSERT INTO agent_messages (id, thread_ts, round, role, content, tokens, created_at)"
        " VALUES (%s, 'T', NULL, %s, '{}'::jsonb, 1, now()) ON CONFLICT (id) DO NOTHING RETURNING seq"
    )
    first = pg_conn.execute(insert, ("T:-:human:1", "human")).fetchone()
    again = pg_conn.execute(insert, ("T:-:human:1", "human")).fetchone()
    second = pg_conn.execute(insert, ("T:-:human:2", "human")).fetchone()
    assert first is not None and second is not None and again is None  # idempotent by id
    assert second[0] > first[0]  # seq orders visibility
    with pytest.raises(psycopg.errors.CheckViolation):
        pg_conn.execute(insert, ("T:-:bogus:1", "bogus"))
    pg_conn.rollback()


def test_an_edited_applied_migration_is_refused(pg_dsn: str, pg_schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.schema_migrations SET checksum = 'edited' WHERE version = %s").format(
                sql.Identifier(pg_schema)
            ),
            (discover()[0].version,),
        )
        with pytest.raises(MigrationError, match="was edited after it was applied"):
            apply_migrations(conn, pg_schema)
    # and the CLI says so in one line, exiting non-zero
    env = {**os.environ, "DATABASE_URL": pg_dsn}
    result = subprocess.run(
        [sys.executable, "-m", "services.cli", "migrate", "--schema", pg_schema, "--no-topics"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "was edited after it was applied" in result.stderr


def test_concurrent_runners_apply_once(pg_dsn: str, fresh_schema: str) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                results.append(apply_migrations(conn, fresh_schema))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert sorted(len(r) for r in results) == [0, 0, 0, len(discover())]


# --- least privilege (migration 004): an owner migrates, the projector writes, the rest only read --


@pytest.fixture
def service_roles(pg_dsn: str) -> Iterator[dict[str, str]]:
    """Login roles in the migrations' group roles, as an operator would give each service one."""
    suffix = uuid.uuid4().hex[:8]
    roles = {"agent": f"im_agent_{suffix}", "projector": f"im_projector_{suffix}"}
    groups = {"agent": "incident_memory_reader", "projector": "incident_memory_projector"}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for kind, role in roles.items():
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw' IN ROLE {}").format(
                    sql.Identifier(role), sql.Identifier(groups[kind])
                )
            )
    yield {k: psycopg.conninfo.make_conninfo(pg_dsn, user=r, password="pw") for k, r in roles.items()}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for role in roles.values():
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


PROJECTION = ("agent_messages", "incident_state", "round_staging", "tool_digest_cache", "projector_offsets",
              "slack_posts")  # fmt: skip


def test_the_agents_role_reads_and_cannot_insert_update_or_delete(
    pg_schema: str, service_roles: dict[str, str]
) -> None:
    with psycopg.connect(
        service_roles["agent"], autocommit=True, options=f"-c search_path={pg_schema}"
    ) as conn:
        assert apply_migrations(conn, pg_schema) == []  # an up-to-date schema: a check, creating nothing
        for table in PROJECTION:
            conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
        for statement in (
            "INSERT INTO agent_messages (id, thread_ts, role, content, tokens, created_at)"
            " VALUES ('T:1:ai:0', 'T', 'ai', '{}', 0, now())",
            "UPDATE agent_messages SET compact = '{}'",
            "DELETE FROM agent_messages",
            "DELETE FROM projector_offsets",
            "UPDATE incident_state SET status = 'resolved'",
            "TRUNCATE agent_messages",
            "DROP TABLE agent_messages",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_the_projectors_role_writes_the_projection_and_its_offsets(
    pg_schema: str, service_roles: dict[str, str]
) -> None:
    with psycopg.connect(service_roles["projector"], options=f"-c search_path={pg_schema}") as conn:
        conn.execute(
            "INSERT INTO agent_messages (id, thread_ts, role, content, tokens, created_at)"
            " VALUES ('T:-:human:1', 'T', 'human', '{}', 1, now())"  # the identity sequence too
        )
        conn.execute("UPDATE agent_messages SET compact = '{}' WHERE id = 'T:-:human:1'")
        conn.execute(
            "INSERT INTO projector_offsets (consumer_group, topic, partition, next_offset) VALUES ('g', 't', 0, 1)"
        )
        conn.execute("CREATE TEMP TABLE batch (id text) ON COMMIT DROP")  # the COPY plan's batch table
        conn.commit()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DROP TABLE agent_messages")
