"""The live writers follow `rederive --switch` (reliability: `make test-reliability`).

A live compactor and projector run with `--follow-switch VIEWS`. A re-derivation through a new Loki
version (a COMPACTOR_PLUGINS plugin) makes NAME; more events arrive, so NAME lags; then `--switch NAME`:
both writers stop cleanly, re-execute themselves on NAME's app id, topics and group (the compactor with
the plugin the run record names), NAME catches up and takes the new events, compacted by the new
version; the old schema stops growing. `--switch previous` moves them back: the old schema catches up
with every event it missed. Each projection ends with exactly one row per event: nothing lost or
doubled across two moves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from deploy.local.pipeline import Proc, fresh_schema, fresh_topics
from schemas.events import ToolResult

from .harness import Pipeline, expected_ids, produce_events, raw_threads, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

CLI = str(Path(sys.executable).parent / "incident-memory")
REPO = Path(__file__).resolve().parents[2]
NEW_LOKI = {
    "COMPACTOR_PLUGINS": json.dumps({"loki_next": "tests.rederive.plugin_compactors:draft"}),
    "COMPACTOR_TOOL_MAP": json.dumps({"query_loki": "loki_next"}),
}
NEW_FORMAT = '"format": "loki/2"'


def _rows(dsn: str, schema: str) -> dict[str, str | None]:
    """id -> compact (as text) of every row in `schema`."""
    query = sql.SQL("SELECT id, compact::text FROM {}.agent_messages")
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {r[0]: r[1] for r in conn.execute(query.format(sql.Identifier(schema)))}


def _loki_ids(events: list[Any]) -> set[str]:
    return {e.message_id for e in events if isinstance(e, ToolResult) and e.tool == "query_loki"}


def _count(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.agent_messages").format(sql.Identifier(schema))
        ).fetchone()
    return int(row[0]) if row else 0


def _moved(proc: Proc, schema: str, starts: int) -> bool:
    """`proc` said it moves to `schema`, and its re-executed self is ready (its ready line again)."""
    text = proc.text()
    ready = "streams resumed" if proc.name.startswith("compactor") else "assigned"
    return f"moves to {schema!r}" in text and text.count(ready) > starts


def test_the_live_writers_follow_the_switch_and_back_losing_and_doubling_nothing(
    stack: Any, tmp_path: Path
) -> None:
    name, views = f"rw_{uuid.uuid4().hex[:8]}", f"v_{uuid.uuid4().hex[:8]}"
    with fresh_topics(stack.kafka_bootstrap_servers) as topics, fresh_schema(stack.database_url) as base:
        pipe = Pipeline(stack.kafka_bootstrap_servers, stack.database_url, base, topics, tmp_path)
        env = {"PYTHONPATH": str(REPO), "INCIDENT_MEMORY_STATE_DIR": str(tmp_path / "state")}

        def cli(*argv: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
            return subprocess.run([CLI, *argv], env={**pipe.env, **env, **(extra_env or {})},
                                  capture_output=True, text=True, timeout=600)  # fmt: skip

        try:
            follow = ["--follow-switch", views]
            compactor = pipe.compactor(env=env, extra=[*follow, "--base-projection", base])
            projector = pipe.projector(extra=follow, env=env)
            pipe.wait_ready(compactor, projector, timeout=90)
            prefix = f"17{uuid.uuid4().int % 100:02d}"
            soak, late, after, back = (
                raw_threads(n, prefix=f"{prefix}{k}") for k, n in enumerate((6, 1, 1, 1))
            )

            produce_events(pipe.bootstrap, topics["events"], soak)
            pipe.wait_rows(expected_ids(soak), 180)

            made = cli("rederive", "--into", name, "--events-topic", topics["events"], "--selections-topic",
                       pipe.names.selections, "--against", base, "--no-diff", "--no-progress",
                       extra_env=NEW_LOKI)  # fmt: skip
            assert made.returncode == 0, made.stderr[-3000:]
            produce_events(pipe.bootstrap, topics["events"], late)  # NAME lags by these
            pipe.wait_rows(expected_ids(soak + late), 120)

            starts = (compactor.text().count("streams resumed"), projector.text().count("assigned"))
            switched = cli("rederive", "--switch", name, "--views", views)
            assert switched.returncode == 0, switched.stderr
            wait_until(lambda: _moved(compactor, name, starts[0]), 120, "the compactor moved to NAME")
            wait_until(lambda: _moved(projector, name, starts[1]), 120, "the projector moved to NAME")
            assert compactor.alive() and projector.alive()

            produce_events(pipe.bootstrap, topics["events"], after)
            in_new = expected_ids(soak + late + after)
            wait_until(
                lambda: in_new <= set(_rows(pipe.dsn, name)), 180, "NAME caught up and took the new events"
            )
            rows = _rows(pipe.dsn, name)
            assert set(rows) == in_new and _count(pipe.dsn, name) == len(in_new)
            loki_after = [rows[i] for i in _loki_ids(after)]
            assert loki_after and all(c is not None and NEW_FORMAT in c for c in loki_after), loki_after[:1]
            assert not expected_ids(after) & set(_rows(pipe.dsn, base)), "the old writers must have stopped"

            starts = (compactor.text().count("streams resumed"), projector.text().count("assigned"))
            returned = cli("rederive", "--switch", "previous", "--views", views)
            assert returned.returncode == 0, returned.stderr
            wait_until(lambda: _moved(compactor, base, starts[0]), 120, "the compactor moved back")
            wait_until(lambda: _moved(projector, base, starts[1]), 120, "the projector moved back")
            produce_events(pipe.bootstrap, topics["events"], back)
            in_old = expected_ids(soak + late + after + back)
            wait_until(lambda: in_old <= set(_rows(pipe.dsn, base)), 180, "the old schema caught up")
            old = _rows(pipe.dsn, base)
            assert set(old) == in_old and _count(pipe.dsn, base) == len(in_old)
            assert all(NEW_FORMAT not in (c or "") for c in old.values())
            assert not expected_ids(back) & set(_rows(pipe.dsn, name)), "NAME's writers must have moved away"
            assert compactor.starts == 1 and projector.starts == 1  # they moved by themselves: no restart
        finally:
            pipe.stop_all()
            cli("rederive", "--drop-old", "--views", views)  # NAME is previous now
            with psycopg.connect(pipe.dsn, autocommit=True) as conn:
                for schema in (views, name):
                    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
