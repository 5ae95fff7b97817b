"""Soak: concurrent incident threads, mentions arriving while the compactor scales 1 -> 2 workers,
then replay the compacted topic into a fresh schema and compare it with the live projection.

Size knobs (env): SOAK_THREADS (100), SOAK_EVENTS (50000), SOAK_DEADLINE seconds (480).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from deploy.local.testdata import T0, interleave, synthetic_human, synthetic_round
from schemas.events import CompactedToolResult, EventBase, ToolResult

from .harness import CLI, LagSampler, Pipeline, check_invariants, expected_ids, produce_events, raw_thread

pytestmark = pytest.mark.reliability


def _raw(events: list[EventBase]) -> list[EventBase]:
    out: list[EventBase] = []
    for e in events:
        if isinstance(e, CompactedToolResult):
            e = ToolResult(thread_ts=e.thread_ts, message_id=e.message_id, event_time=e.event_time, round=e.round,
                           tool_call_id=e.tool_call_id, tool=e.tool, args={**e.args, "round": e.round},
                           raw=e.raw, alert_context={"service": "checkout-api"})  # fmt: skip
        out.append(e)
    return out


def soak_thread(ts: str, rounds: int, chatter: int = 0) -> list[EventBase]:
    """alert, then `rounds` x (a mention, a 3-tool round), and `chatter` silent human messages (round
    NULL) after the first rounds: 1 + 10 * rounds + chatter events."""
    events = raw_thread(ts)[:1]
    for r in range(1, rounds + 1):
        at = T0 + timedelta(minutes=5 * r)
        events.append(synthetic_human(ts, at, r, mention=True))
        events += _raw(synthetic_round(ts, r, at + timedelta(seconds=30)))
        if r <= chatter:
            events.append(synthetic_human(ts, at + timedelta(minutes=2), 500 + r))
    events += [
        synthetic_human(ts, T0 + timedelta(hours=24, minutes=k), 900 + k) for k in range(chatter - rounds)
    ]
    return events


def _table(conn: psycopg.Connection, schema: str, query: str) -> list[tuple[object, ...]]:
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return conn.execute(query).fetchall()


def _by_thread(rows: list[tuple[object, ...]]) -> dict[object, list[object]]:
    out: dict[object, list[object]] = {}
    for r in rows:
        out.setdefault(r[1], []).append(r[0])
    return out


def test_soak_scale_out_then_replay_equals_live(pipeline: Pipeline, record: dict[str, object]) -> None:
    n_threads = int(os.environ.get("SOAK_THREADS", "100"))
    n_events = int(os.environ.get("SOAK_EVENTS", "50000"))
    deadline = float(os.environ.get("SOAK_DEADLINE", "480"))
    per_thread_events = n_events // n_threads
    rounds = max(1, (per_thread_events - 1) // 10)
    chatter = max(0, per_thread_events - 1 - 10 * rounds)  # tops each thread up to exactly its share
    events = interleave([soak_thread(f"1715{k:06d}.000100", rounds, chatter) for k in range(n_threads)])
    assert len(events) == n_threads * per_thread_events
    expected = expected_ids(events)
    pipeline.compactor("c0")
    pipeline.projector(batch_size=2000)
    lag = LagSampler(pipeline.bootstrap, {"compactor": (pipeline.names.group("compactor"), pipeline.topics["events"]),
                                          "projector": (pipeline.group, pipeline.topics["compacted"])})  # fmt: skip
    lag.start()
    start = time.monotonic()
    producing = threading.Thread(
        target=produce_events, args=(pipeline.bootstrap, pipeline.topics["events"], events)
    )
    producing.start()
    lag_at_end: int | None = None
    second: Pipeline | object | None = None
    produced_in: float | None = None
    while True:
        elapsed = time.monotonic() - start
        rows = len(pipeline.ids())
        if not producing.is_alive():
            lag_at_end = lag_at_end if lag_at_end is not None else len(expected) - rows
            produced_in = produced_in if produced_in is not None else round(elapsed, 1)
        if second is None and rows > len(expected) // 4:
            second = pipeline.compactor("c1")  # scale 1 -> 2 workers mid-soak, mentions still arriving
        if expected <= set(pipeline.ids()):
            break
        assert elapsed < deadline, f"soak not done in {deadline}s: {rows}/{len(expected)} rows"
        time.sleep(0.5)
    took = time.monotonic() - start
    producing.join(60)
    lag.stop()
    assert second is not None, "the second worker must join while events still flow"
    counts = check_invariants(pipeline, expected)
    with pipeline.connect() as conn:
        per_thread: dict[str, int] = dict(
            conn.execute("SELECT thread_ts, count(*) FROM agent_messages GROUP BY 1").fetchall()
        )
    want: dict[str, int] = {}
    for i in expected:
        want[i.split(":")[0]] = want.get(i.split(":")[0], 0) + 1
    assert per_thread == want  # events in == rows out, per thread
    record.update(counts, events=len(events), threads=n_threads, seconds=round(took, 1),
                  events_per_s=round(len(events) / took), rows_behind_when_producer_done=lag_at_end,
                  produced_in_s=produced_in, **lag.summary())  # fmt: skip
    assert len(lag.samples) >= took / 3, "lag must be sampled throughout the soak"
    (Path(__file__).parent / "soak_lag.json").write_text(json.dumps(lag.samples))  # the series, for plotting

    # Replay equivalence: re-derive everything into a fresh schema and compare with the live one.
    into = f"r_{uuid.uuid4().hex[:12]}"
    try:
        t0 = time.monotonic()
        subprocess.run([CLI, "replay", "--from-beginning", "--into", into, "--topic", pipeline.topics["compacted"],
                        "--dlq-topic", pipeline.topics["dlq"], "--no-progress"],
                       env=pipeline.env, check=True, capture_output=True, timeout=300)  # fmt: skip
        record["replay_seconds"] = round(time.monotonic() - t0, 1)
        cols = "id, thread_ts, round, role, tool_call_id, content, compact, tokens, created_at"
        with psycopg.connect(pipeline.dsn, autocommit=True) as conn:
            live = _table(conn, pipeline.schema, f"SELECT {cols} FROM agent_messages ORDER BY seq")
            again = _table(conn, into, f"SELECT {cols} FROM agent_messages ORDER BY seq")
            assert sorted(again, key=str) == sorted(live, key=str)  # every column but seq equal
            record["replay_global_seq_order_equal"] = again == live
            assert _by_thread(again) == _by_thread(live)  # seq order equal within every thread
            state = "SELECT * FROM incident_state ORDER BY thread_ts"
            assert _table(conn, into, state) == _table(conn, pipeline.schema, state)
    finally:
        with psycopg.connect(pipeline.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(into)))
