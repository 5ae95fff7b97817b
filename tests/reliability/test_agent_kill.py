"""kill -9 the agent mid-round (after a tool call, before the round's marker), restart it, check everything.

The real agent process (local deterministic model, the recorded telemetry MCP server) runs the seed
thread's first round through the real compactor and projector, as tests/agent does; its helpers are
reused here. The wake offset was never committed, so the restarted agent runs the round again.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

import pytest
from agent.seedplay import alert_events, alert_wake
from agent.seedplay import produce as produce_seed
from agent.test_seed_thread import SEED_SHAPE, _logged, _pipeline, _rows, _start

from schemas.events import EventBase, RoundCommitted, ToolResult, canonical_json, parse_event

from .harness import Pipeline, assert_compacts_identical, check_invariants, read_all, wait_until

pytestmark = pytest.mark.reliability
ROUND_1 = SEED_SHAPE[:9]  # alert, ai (3 tool calls), 3 tool, ai, ai, judge, post


def _thread_events(pipe: Pipeline) -> list[EventBase]:
    out = []
    for m in read_all(pipe.bootstrap, pipe.topics["events"]):
        with contextlib.suppress(ValueError):
            out.append(parse_event(m.value()))
    return out


def _tool_called_r1(pipe: Pipeline) -> bool:
    return any(
        rec.get("msg") == "tool called" and ":1:tools:" in str(rec.get("message_id"))
        for p in pipe.procs
        if p.name == "agent"
        for rec in p.logs()
    )


# Not `fast`: the restarted agent gets its partition back only when the killed member's group session
# expires (librdkafka's 45 s default), so this takes about a minute. tests/agent's seed test (in `make
# test`) kills the agent too.
def test_kill_9_agent_mid_round_then_restart(
    pipeline: Pipeline, tmp_path: Path, record: dict[str, object]
) -> None:
    group = f"agent-{pipeline.schema}"
    try:
        _pipeline(pipeline)
        _start(pipeline, group, "1.5")  # slow: killable mid-round
        produce_seed(pipeline.bootstrap, pipeline.topics["events"], alert_events())
        produce_seed(pipeline.bootstrap, pipeline.topics["wake"], [alert_wake()])
        wait_until(lambda: _tool_called_r1(pipeline), 180, "round 1's first tool call", every=0.2)
        victim = pipeline.procs[-1]
        victim.kill9()
        at_kill = [(r[1], r[2]) for r in _rows(pipeline.dsn, pipeline.schema)]
        emitted_before = {e.message_id for e in _thread_events(pipeline)}
        assert at_kill == ROUND_1[:1], f"half a round visible after the kill: {at_kill}"
        assert any(":1:" in i for i in emitted_before), "the kill must land after the round started emitting"
        assert not any(i.endswith(":1:commit:0") for i in emitted_before), (
            "the kill must land before the commit"
        )

        _start(pipeline, group, "0")
        rows = wait_until(
            lambda: len(r := _rows(pipeline.dsn, pipeline.schema)) >= len(ROUND_1) and r,
            240,
            "round 1 after the restart",
            every=0.5,
        )
        cache_hit = _logged(pipeline, "tool cache hit")
    finally:
        pipeline.stop_all()

    assert [(r[1], r[2]) for r in rows] == ROUND_1
    events = _thread_events(pipeline)
    # Deterministic ids: the killed attempt's events are the rerun's, so nothing of it is orphaned.
    row_ids = {r[0] for r in rows}
    published = {e.message_id for e in events if not isinstance(e, RoundCommitted)}
    assert published == row_ids, published ^ row_ids
    assert emitted_before <= published | {e.message_id for e in events}
    counts = check_invariants(pipeline, row_ids)  # no dup, no missing, no half round, no tool re-run
    results = [e for e in events if isinstance(e, ToolResult)]
    per_call = Counter((e.thread_ts, e.tool, canonical_json(e.args)) for e in results)
    assert set(per_call.values()) == {1}, f"a tool was called twice: {per_call}"
    assert len(per_call) == 3
    assert_compacts_identical(pipeline, results)
    record.update(counts, rows_at_kill=len(at_kill), events_before_kill=len(emitted_before),
                  tool_results=len(results), rerun_cache_hit=cache_hit)  # fmt: skip
