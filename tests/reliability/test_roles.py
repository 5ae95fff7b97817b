"""Least privilege, for real: the projector process, running as a role in `incident_memory_projector`,
projects a stream exactly as the owner would; the agent's role can read that and write nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from .harness import Pipeline, expected_ids, produce_events, raw_threads


@pytest.fixture
def projector_dsn(pipeline: Pipeline) -> Iterator[str]:
    role = f"im_projector_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pipeline.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw' IN ROLE incident_memory_projector").format(
                sql.Identifier(role)
            )
        )
    yield psycopg.conninfo.make_conninfo(pipeline.dsn, user=role, password="pw")
    pipeline.stop_all()  # its sessions (and their temp tables) end before the role goes
    with psycopg.connect(pipeline.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.fast
def test_the_projector_runs_as_its_own_least_privilege_role(pipeline: Pipeline, projector_dsn: str) -> None:
    events = raw_threads(5, prefix="1715")
    owner = pipeline.dsn
    pipeline.compactor()
    pipeline.dsn = projector_dsn  # the projector's process runs as the projector's role
    pipeline.projector()
    pipeline.dsn = owner
    produce_events(pipeline.bootstrap, pipeline.topics["events"], events)
    pipeline.wait_rows(expected_ids(events), 120)
    with pipeline.connect() as conn:
        assert conn.execute("SELECT count(*) FROM projector_offsets").fetchone()[0] > 0  # type: ignore[index]
        roles = conn.execute(
            "SELECT DISTINCT usename FROM pg_stat_activity WHERE usename LIKE 'im_projector_%'"
        ).fetchall()
    assert roles, "the projector connected as its own role"
