"""wait_until_projected: wakes on the projector's NOTIFY, checks the three tables, honours its deadline."""

from __future__ import annotations

import threading
import time

import psycopg

from deploy.local.testdata import T0, synthetic_human, synthetic_round
from schemas.read_model import wait_until_projected

from .helpers import apply_events

T = "1710406800.000100"


def _wait_in_thread(dsn: str, mid: str, schema: str, timeout: float) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def target() -> None:
        began = time.monotonic()
        out["ok"] = wait_until_projected(dsn, T, mid, timeout, schema=schema)
        out["elapsed"] = time.monotonic() - began

    thread = threading.Thread(target=target)
    thread.start()
    return thread, out


def _listening(conn: psycopg.Connection, timeout: float = 10) -> None:
    """Wait (with a deadline) until the waiter has made its first check and sits idle, LISTENing.

    Then the write below can only reach it through a notice: this test exercises the wake-up path.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'idle'"
            " AND query LIKE '%%tool_digest_cache%%'"
        ).fetchone()
        conn.commit()
        if n and n[0]:
            return
        time.sleep(0.01)
    raise AssertionError("waiter never listened")


def test_wakes_on_the_commit_of_its_message(pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str) -> None:
    human = synthetic_human(T, T0, 1)
    thread, out = _wait_in_thread(pg_dsn, human.message_id, pg_schema, timeout=20)
    _listening(pg_conn)
    apply_events(pg_conn, [synthetic_human(T, T0, 0)], pg_schema)  # another message first: not ours
    apply_events(pg_conn, [human], pg_schema)
    thread.join(25)
    assert out["ok"] is True
    assert out["elapsed"] < 20


def test_a_staged_tool_result_counts(pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str) -> None:
    staged = synthetic_round(T, 1, T0, marker=False)
    tool = next(e for e in staged if e.type == "tool_result_compacted")  # type: ignore[attr-defined]
    apply_events(pg_conn, staged, pg_schema)
    assert wait_until_projected(pg_dsn, T, tool.message_id, 5, schema=pg_schema) is True


def test_times_out_false_and_ignores_other_schemas(
    pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    began = time.monotonic()
    assert wait_until_projected(pg_dsn, T, f"{T}:-:human:never", 0.5, schema=pg_schema) is False
    assert 0.4 < time.monotonic() - began < 5


def test_accepts_a_connection(pg_dsn: str, pg_conn: psycopg.Connection, pg_schema: str) -> None:
    human = synthetic_human(T, T0, 7)
    apply_events(pg_conn, [human], pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert wait_until_projected(conn, T, human.message_id, 5, schema=pg_schema) is True
        assert not conn.closed
