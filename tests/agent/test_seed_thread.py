"""Done-when: the seed thread played through the real projector, compactor and agent processes.

Round 1 (alert): three tool calls, a hypothesis, the judge rejects it with 2 questions, the
questions are posted. Four human messages arrive (round NULL). A mention starts round 2: one
tool call (the trace a human quoted), a grounded hypothesis, the summary posted -> 20 rows.
The agent is killed with SIGKILL during round 2 (after its tool call, before the commit) and
rerun: the same 20 rows, and no tool called twice (the rerun takes the digest from the cache).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from deploy.local import loopback_http
from deploy.local.pipeline import Pipeline, Proc, free_port
from schemas.events import ToolResult
from schemas.ids import canonical_args_hash
from schemas.tokens import count_value_tokens
from services.projector.show import fetch_rows

from .seedplay import alert_events, alert_wake, human_events, mention_wake, produce, read_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SEED_SHAPE = [
    ("alert", None),
    *[("ai", 1), ("tool", 1), ("tool", 1), ("tool", 1), ("ai", 1), ("ai", 1), ("judge", 1), ("post", 1)],
    *[("human", None)] * 5,
    *[("ai", 2), ("tool", 2), ("ai", 2), ("ai", 2), ("judge", 2), ("post", 2)],
]


def _rows(dsn: str, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        return conn.execute(
            "SELECT id, role, round, tool_call_id, content, compact, tokens FROM agent_messages ORDER BY seq"
        ).fetchall()


def _start(pipe: Pipeline, group: str, delay: str, port: int = 0) -> Proc:
    return pipe.agent(
        group=group, metrics_port=port or None,
        extra=["--model", "local", "--judge-model", "local", "--step-delay", delay, "--log-level", "INFO"],
    )  # fmt: skip


def _healthz(port: int) -> tuple[int, dict[str, Any]] | None:
    try:
        resp = loopback_http.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    except httpx.HTTPError:
        return None
    return resp.status_code, resp.json()


def _pipeline(pipe: Pipeline) -> None:
    """The compactor and the projector the agent's rows go through."""
    pipe.compactor()
    pipe.projector()


def _model_calls(pipe: Pipeline, round_: int) -> list[dict[str, Any]]:
    return [
        rec
        for p in pipe.procs
        if p.name == "agent"
        for rec in p.logs()
        if rec.get("msg") == "model call" and rec.get("round") == round_
    ]


def _logged(pipe: Pipeline, message: str, **fields: Any) -> bool:
    return any(
        rec.get("msg") == message and all(rec.get(k) == v for k, v in fields.items())
        for p in pipe.procs
        if p.name == "agent"
        for rec in p.logs()
    )


def test_seed_thread_two_rounds_and_kill9_rerun(
    kafka_bootstrap: str, pg_dsn: str, pg_schema: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    pipe = Pipeline(kafka_bootstrap, pg_dsn, pg_schema, topic_names, tmp_path)
    group = f"agent-{pg_schema}"
    try:
        _pipeline(pipe)
        port = free_port()
        # Slowed down from the start (a pause after each node), so round 2 can be killed mid-round by the
        # same process: one agent start fewer than stopping it after round 1 and starting a slow one.
        _start(pipe, group, "1.5", port)
        # /healthz is the loop's heartbeat, not prometheus_client's catch-all.
        health = pipe.wait_until(lambda: (h := _healthz(port)) and h[0] == 200 and h, 60, "agent /healthz")
        assert health[1]["ok"] is True and "loop" in health[1]["detail"]
        assert loopback_http.get(f"http://127.0.0.1:{port}/nope", timeout=2).status_code == 404

        # Round 1: the alert.
        produce(kafka_bootstrap, topic_names["events"], alert_events())
        produce(kafka_bootstrap, topic_names["wake"], [alert_wake()])
        pipe.wait_until(lambda: len(_rows(pg_dsn, pg_schema)) >= 9, 120, "round 1 (9 rows)")

        # Four humans while the bot is silent: round NULL, no wake.
        produce(kafka_bootstrap, topic_names["events"], human_events(mention=False))
        pipe.wait_until(lambda: len(_rows(pg_dsn, pg_schema)) >= 13, 60, "4 human rows")

        # Round 2, killed mid-round.
        produce(kafka_bootstrap, topic_names["events"], human_events(mention=True))
        produce(kafka_bootstrap, topic_names["wake"], [mention_wake()])
        pipe.wait_until(lambda: _tool_called_r2(pipe), 90, "round 2's tool call")
        killed = pipe.procs[-1]
        killed.kill9()
        assert len(_rows(pg_dsn, pg_schema)) == 14, "round 2 must not be visible before its commit"

        # Rerun: the wake offset was never committed, so round 2 runs again from the database.
        _start(pipe, group, "0")
        pipe.wait_until(lambda: len(_rows(pg_dsn, pg_schema)) >= 20, 120, "round 2 (20 rows)")
        rows = _rows(pg_dsn, pg_schema)
        with psycopg.connect(pg_dsn, autocommit=True, options=f"-c search_path={pg_schema}") as conn:
            shown = fetch_rows(conn, rows[0][0].split(":")[0])
    finally:
        pipe.stop_all()

    if os.environ.get("AGENT_TEST_DUMP"):
        Path(os.environ["AGENT_TEST_DUMP"]).write_text(json.dumps([list(r) for r in rows], default=str))
    assert [(r[1], r[2]) for r in rows] == SEED_SHAPE
    by_id = {r[0]: r for r in rows}
    judge1, post1 = by_id[f"{rows[0][0].split(':')[0]}:1:judge:0"], rows[8]
    assert judge1[4]["grounded"] is False and len(judge1[4]["questions"]) == 2
    assert post1[4]["kind"] == "questions"
    assert rows[19][4]["kind"] == "summary" and rows[18][4]["grounded"] is True
    assert rows[14][4]["tool_calls"][0]["name"] == "query_tempo"
    # round 1's first turn is the alert's playbook (its calls, before any model call), labelled as such
    assert rows[1][4]["model"] == "playbook:kube-oom" and len(rows[1][4]["tool_calls"]) == 3
    models = {r[0]: r[4].get("model") for r in rows if isinstance(r[4], dict)}
    assert all(m in (None, "local-deterministic") for i, m in models.items() if i != rows[1][0])

    # Round 2's whole model input per call (messages with the preamble, plus the tool schemas
    # sent beside investigate and the response_format beside hypothesis and judge) vs the raw.
    calls = _model_calls(pipe, 2)
    inputs = [int(rec["input_tokens"]) for rec in calls]
    raw_total = sum(count_value_tokens(r[4]) for r in rows)
    print(
        f"round-2 model inputs {[(c['node'], c['message_tokens'], c['tool_schema_tokens']) for c in calls]}"
    )
    assert {c["node"] for c in calls} == {"investigate", "hypothesis", "judge"}
    for c in calls:
        parts = c["message_tokens"] + c["tool_schema_tokens"] + c["response_format_tokens"]
        assert c["input_tokens"] == parts
        assert (c["tool_schema_tokens"] > 0) == (c["node"] == "investigate")
        # a structured answer's JSON Schema is sent as response_format, and counted (invariant 10)
        assert (c["response_format_tokens"] > 0) == (c["node"] in ("hypothesis", "judge"))
    assert max(inputs) < 2500
    assert raw_total > 40000
    # The show table's totals: the raw over 40,000, the context (coalesce(compact, content)) under 2,500.
    assert len(shown) == 20
    assert sum(r.raw_tokens for r in shown) > 40000
    assert sum(r.context_tokens for r in shown) < 2500, [(r.what, r.context_tokens) for r in shown]

    # No tool called twice: one ToolResult per (thread, tool, canonical args) on the events topic.
    results = [e for e in read_all(kafka_bootstrap, topic_names["events"]) if isinstance(e, ToolResult)]
    counts = Counter((e.thread_ts, e.tool, canonical_args_hash(e.args)) for e in results)
    assert len(counts) == 4 and set(counts.values()) == {1}, counts
    assert _logged(pipe, "tool cache hit"), "the rerun must take the tempo digest from the cache"


def _tool_called_r2(pipe: Pipeline) -> bool:
    return any(
        rec.get("msg") == "tool called" and ":2:tools:" in str(rec.get("message_id"))
        for p in pipe.procs
        if p.name == "agent"
        for rec in p.logs()
    )
