"""A blue/green switch under a stream of wakes: the real agent never reads a mix (reliability).

Two projections of one events topic are kept current side by side: the live compactor and projector
write the base schema; `rederive --into NAME --follow` writes NAME through new Loki and Prometheus
versions (COMPACTOR_PLUGINS), so those tool rows differ between the two. The real agent process
(deterministic local model, the recorded telemetry MCP server) reads the views, and runs the seed
thread's rounds on a stream of wakes (with a context budget that never re-renders a row, so the rows
that differ keep differing) while `rederive --switch` flips the views between the two
projections over and over. At DEBUG the agent logs each context it loads, row by row with tokens.
Once both projections hold every event, each load is checked: every row that differs between them
must come from the same projection. Both projections must have been read.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import threading
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from agent.seedplay import alert_events, alert_wake, human_events, mention_wake
from agent.seedplay import produce as produce_seed
from psycopg import sql

from deploy.local.pipeline import Proc
from schemas.events import HumanMessage, Wake
from schemas.ids import message_id
from services.context_render.context import row_digest

from .harness import Pipeline, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]

CLI = str(Path(sys.executable).parent / "incident-memory")
REPO = Path(__file__).resolve().parents[2]
NEW_VERSIONS = {
    "COMPACTOR_PLUGINS": json.dumps(
        {
            "loki_next": "tests.rederive.plugin_compactors:draft",
            "prometheus_next": "tests.rederive.plugin_compactors:prometheus_draft",
        }
    ),
    "COMPACTOR_TOOL_MAP": json.dumps({"query_loki": "loki_next", "query_prometheus": "prometheus_next"}),
}
EXTRA_MENTIONS = 10


def _digests(dsn: str, schema: str) -> dict[str, str]:
    """id -> the digest of what the model sees of the row, as the agent logs it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = sql.SQL("SELECT id, coalesce(compact, content) FROM {}.agent_messages")
        return {r[0]: row_digest(r[1]) for r in conn.execute(query.format(sql.Identifier(schema)))}


def _caught_up(dsn: str, name: str) -> bool:
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            query = sql.SQL("SELECT caught_up_at FROM {}.rederive_run").format(sql.Identifier(name))
            row = conn.execute(query).fetchone()
    except psycopg.Error:
        return False
    return row is not None and row[0] is not None


def _committed_rounds(agent: Proc) -> set[int]:
    return {int(r["round"]) for r in agent.logs() if r.get("msg") == "round committed"}


def _sides(load: dict[str, str], old: dict[str, str], new: dict[str, str], differ: set[str]) -> set[str]:
    """Which projections a load's differing rows came from: one side, or a mix (or "neither")."""
    return {
        "old" if digest == old[i] else "new" if digest == new[i] else "neither"
        for i, digest in load.items()
        if i in differ
    }


def _more_rounds_than(agent: Proc, n: int) -> bool:
    return len(_committed_rounds(agent)) > n


def _more_mentions(k: int) -> tuple[list[HumanMessage], list[Wake]]:
    """Mentions after the seed's, each a wake of its own (a human asking again)."""
    (last,) = human_events(mention=True)
    humans, wakes = [], []
    for i in range(1, k + 1):
        ts = f"{float(last.ts) + 60 * i:.6f}"
        human = HumanMessage(
            thread_ts=last.thread_ts, message_id=message_id(last.thread_ts, None, "human", ts),
            event_time=last.event_time + timedelta(minutes=i), user=last.user, ts=ts,
            text=f"<@U0BOT> anything new on the OOM? ({i})", mention=True,
        )  # fmt: skip
        humans.append(human)
        wakes.append(
            Wake(
                thread_ts=human.thread_ts,
                message_id=message_id(human.thread_ts, None, "wake", ts),
                event_time=human.event_time,
                reason="mention",
                trigger_message_id=human.message_id,
                user=human.user,
            )
        )
    return humans, wakes


def test_the_agent_never_reads_a_mix_while_the_views_flip(
    pipeline: Pipeline, tmp_path: Path, record: dict[str, object]
) -> None:
    pipe = pipeline
    name, views = f"sw_{uuid.uuid4().hex[:8]}", f"v_{uuid.uuid4().hex[:8]}"
    env = {**pipe.env, "PYTHONPATH": str(REPO), "INCIDENT_MEMORY_STATE_DIR": str(tmp_path / "state")}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CLI, *argv], env=env, capture_output=True, text=True, timeout=120)

    stop = threading.Event()
    flips: dict[str, int] = {"ok": 0, "refused": 0}
    try:
        pipe.compactor()
        pipe.projector()
        pipe.wait_ready(*pipe.procs, timeout=90)
        produce_seed(pipe.bootstrap, pipe.topics["events"], alert_events())
        rederive = pipe.start(
            "rederive",
            [CLI, "rederive", "--into", name, "--events-topic", pipe.topics["events"], "--selections-topic",
             pipe.names.selections, "--against", pipe.schema, "--no-diff", "--no-progress", "--follow"],
            env={**env, **NEW_VERSIONS},
        )  # fmt: skip
        wait_until(lambda: _caught_up(pipe.dsn, name), 300, "the re-derivation caught up", every=0.5)
        first = cli("rederive", "--switch", pipe.schema, "--views", views)
        assert first.returncode == 0, first.stderr
        agent = pipe.agent(
            group=f"agent-{name}",
            extra=["--schema", views, "--model", "local", "--judge-model", "local", "--step-delay", "0.2",
                   "--context-budget", "1000000",
                   "--log-level", "DEBUG"],
        )  # fmt: skip
        pipe.wait_ready(agent, timeout=90)

        def flip() -> None:
            targets = [name, pipe.schema]
            i = 0
            while not stop.wait(0.4):
                done = cli("rederive", "--switch", targets[i % 2], "--views", views)
                if done.returncode == 0:
                    flips["ok"] += 1
                    i += 1
                else:  # NAME more than --max-lag behind for a moment: try again
                    flips["refused"] += 1

        flipper = threading.Thread(target=flip, daemon=True)
        flipper.start()
        produce_seed(pipe.bootstrap, pipe.topics["wake"], [alert_wake()])
        wait_until(lambda: 1 in _committed_rounds(agent), 240, "round 1", every=0.5)
        produce_seed(pipe.bootstrap, pipe.topics["events"], human_events(mention=False))
        produce_seed(pipe.bootstrap, pipe.topics["events"], human_events(mention=True))
        produce_seed(pipe.bootstrap, pipe.topics["wake"], [mention_wake()])
        wait_until(lambda: 2 in _committed_rounds(agent), 240, "round 2", every=0.5)
        humans, wakes = _more_mentions(EXTRA_MENTIONS)
        for human, wake in zip(humans, wakes, strict=True):
            produce_seed(pipe.bootstrap, pipe.topics["events"], [human])
            produce_seed(pipe.bootstrap, pipe.topics["wake"], [wake])
            rounds = len(_committed_rounds(agent))
            wait_until(functools.partial(_more_rounds_than, agent, rounds), 240, "the next round", every=0.5)
        stop.set()
        flipper.join(60)
        assert rederive.alive(), rederive.tail()

        # Both projections now hold every event (the rederive follows the live tail).
        def same_rows() -> bool:
            return set(_digests(pipe.dsn, pipe.schema)) == set(_digests(pipe.dsn, name))

        wait_until(same_rows, 120, "both projections to hold every event", every=0.5)
        old, new = _digests(pipe.dsn, pipe.schema), _digests(pipe.dsn, name)
        differ = {i for i in old if old[i] != new[i]}
        assert len(differ) >= 2, "the new versions must change several rows of the thread"

        loads = [r["rows"] for r in agent.logs() if r.get("msg") == "context rows"]
        sides = [_sides(load, old, new, differ) for load in loads]
        # A load of rows that are the same in both (the alert alone) tells nothing; any other is one side.
        mixed = [load for load, side in zip(loads, sides, strict=True) if len(side) > 1 or "neither" in side]
        assert loads and not mixed, mixed[:2]
        seen = {side: sum(1 for s in sides if s == {side}) for side in ("old", "new")}
        assert seen["old"] > 0 and seen["new"] > 0, (seen, flips)
        assert flips["ok"] >= 4, flips
        # The check has teeth: a load with one differing row from each projection is caught.
        a, b = sorted(differ)[:2]
        assert _sides({a: old[a], b: new[b]}, old, new, differ) == {"old", "new"}
        record.update(loads=len(loads), loads_old=seen["old"], loads_new=seen["new"], rows_differing=len(differ),
                      switches=flips["ok"], switches_refused=flips["refused"])  # fmt: skip
    finally:
        stop.set()
        pipe.stop_all()
        cli("rederive", "--switch", pipe.schema, "--views", views)
        cli("rederive", "--drop-old", "--views", views)
        with psycopg.connect(pipe.dsn, autocommit=True) as conn:
            for schema in (views, name):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
