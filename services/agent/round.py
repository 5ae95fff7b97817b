"""One round of one thread, from a wake to its acked marker.

Wait until the trigger is projected, load the context (one query), re-render a long
thread if it is over budget, render the preamble, run the graph. Nothing lives in
the process: a round that dies is simply run again and produces the same ids.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from langchain_core.language_models import BaseChatModel
from psycopg import sql

from schemas import read_model
from schemas.events import AnsweredMention, Wake
from schemas.tokens import count_tokens
from services.agent import metrics
from services.agent.coalesce import unanswered, wake_done
from services.agent.config import EVIDENCE_TOOL, AgentConfig
from services.agent.graph import RoundGraph
from services.agent.guard import guard_for
from services.agent.mcp_client import McpToolbox, ToolCallError
from services.agent.playbooks import (
    PlaybookPlan,
    alert_labels,
    choose,
    load_playbooks,
    offered_params,
    plan_calls,
)
from services.agent.recall_step import recall_step
from services.agent.round_state import RawReader, RoundDeps
from services.agent.toolpath import ProjectionTimeout, ToolPath
from services.boundary.redact import redact_value
from services.context_render.context import LoadedContext, load_context, row_digest
from services.context_render.discussion import DiscussionPolicy, plan_discussion
from services.context_render.preamble import Trigger, pinned_window, render_preamble, trigger_time
from services.context_render.rerender import Plan, plan_rerenders
from services.runtime.emitter import EventEmitter
from services.runtime.logs import about

log = logging.getLogger("agent.round")


class TriggerNotProjected(RuntimeError):
    """The wake's trigger never reached the projection in time."""


@dataclass(frozen=True)
class Models:
    agent: BaseChatModel
    judge: BaseChatModel
    agent_name: str
    judge_name: str


@dataclass
class RoundResult:
    thread_ts: str
    round: int | None
    outcome: str  # committed | skipped
    message_ids: list[str] = field(default_factory=list)
    model_inputs: list[tuple[str, int]] = field(default_factory=list)
    preamble_tokens: int = 0
    context_tokens: int = 0
    seconds: float = 0.0


def connect(config: AgentConfig) -> psycopg.Connection:
    conn = psycopg.connect(config.database_url, autocommit=True, connect_timeout=10)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(config.schema)))
    return conn


def _log_loaded(ctx: LoadedContext) -> None:
    """What the agent read: its size, and at DEBUG a digest of each row as the model sees it (which
    projection a row came from shows there, e.g. across a blue/green switch)."""
    log.info("context loaded", extra=about(ctx.thread_ts, None, rows=len(ctx.rows), tokens=ctx.token_sum))
    if log.isEnabledFor(logging.DEBUG):
        digests = {r.id: row_digest(r.value) for r in ctx.rows}
        log.debug("context rows", extra=about(ctx.thread_ts, None, rows=digests))


def alert_context(ctx: LoadedContext) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in ctx.rows:
        if row.role == "alert" and isinstance(row.value, dict):
            out = {"service": row.value.get("service"), "alertname": row.value.get("alertname")}
            break
    window = pinned_window(ctx)
    if window:
        out.update(window_start=window[0], window_end=window[1])
    if ctx.state is not None:
        out.setdefault("service", ctx.state.service)
    return out


async def _wait_rerendered(conn: psycopg.Connection, targets: dict[str, int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    ids = list(targets)
    while True:
        rows = await asyncio.to_thread(lambda: conn.execute(read_model.ROW_TOKENS, (ids,)).fetchall())
        if all(targets.get(i) == t for i, t in rows) and len(rows) == len(ids):
            return
        if time.monotonic() > deadline:
            raise ProjectionTimeout(f"re-renderings of {len(ids)} rows not projected within {timeout}s")
        await asyncio.sleep(0.05)


async def _wait_visible(conn: psycopg.Connection, message_id: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(lambda: conn.execute(read_model.ROW_EXISTS, (message_id,)).fetchone())
        if found:
            return True
        await asyncio.sleep(0.05)
    return False


def playbook_plan(ctx: LoadedContext, toolbox: McpToolbox) -> PlaybookPlan | None:
    """The alert's playbook calls: deterministic work before any model call (alert rounds only)."""
    alert = next((r.value for r in ctx.rows if r.role == "alert" and isinstance(r.value, dict)), None)
    if alert is None:
        return None
    alertname, labels = alert_labels(alert)
    playbook = choose(load_playbooks(), alertname, labels)
    if playbook is None:
        return None
    offered = offered_params(toolbox.tool_specs(exclude=(EVIDENCE_TOOL,)))
    return plan_calls(playbook, labels, pinned_window(ctx), offered)


def plan_round(
    ctx: LoadedContext, config: AgentConfig, now: datetime, trigger_id: str | None = None
) -> tuple[int, Plan]:
    """The round a wake starts, and the re-renderings (invariant 10) its context needs first:
    old rounds' rows by `plan_rerenders`, a long discussion's turns by `plan_discussion`."""
    round_ = ctx.last_round() + 1
    rounds = plan_rerenders(ctx.rows, round_, config.context_budget, now)
    policy = discussion_policy(config, trigger_id)
    turns = plan_discussion(ctx.rows, policy, round_, now)
    saved = sum(e.tokens - _tokens_of(ctx, e.target_id) for e in turns)
    return round_, Plan((*rounds.events, *turns), rounds.tokens_before, rounds.tokens_after + saved)


def discussion_policy(config: AgentConfig, trigger_id: str | None) -> DiscussionPolicy:
    """The discussion's share of the agent model's input budget (docs/context-budget.md)."""
    budget = int(config.input_budget_for(config.models.agent) * config.discussion_share)
    return DiscussionPolicy(budget, config.recent_share, config.turn_limit, trigger_id)


def _tokens_of(ctx: LoadedContext, row_id: str) -> int:
    return next((r.tokens for r in ctx.rows if r.id == row_id), 0)


async def run_round(
    wake: Wake, config: AgentConfig, models: Models, toolbox: McpToolbox, emitter: EventEmitter
) -> RoundResult:
    """Run the round a wake asks for; idempotent (a rerun re-emits the same ids)."""
    started = time.perf_counter()
    await _await_trigger(wake, config)
    conn = await asyncio.to_thread(connect, config)
    try:
        ctx = await _load(conn, wake.thread_ts)
        if wake_done(ctx.rows, wake.reason, wake.trigger_message_id):
            log.info("wake already answered; skipped", extra=about(wake.thread_ts, wake.trigger_message_id))
            return RoundResult(wake.thread_ts, None, "skipped")
        now = datetime.now(UTC)
        round_, plan = plan_round(ctx, config, now, wake.trigger_message_id)
        if plan.events:
            await _rerender(conn, plan, config, emitter, wake.thread_ts)
            ctx = await _load(conn, wake.thread_ts)
        deps = round_deps(wake, config, models, toolbox, emitter, conn, ctx, round_, now)
        log.info("round started", extra=about(wake.thread_ts, wake.trigger_message_id, round=round_))
        final = await RoundGraph(deps).run()
        return await _committed(conn, wake, deps, list(final.get("emitted", [])), started)
    finally:
        await asyncio.to_thread(conn.close)


async def _await_trigger(wake: Wake, config: AgentConfig) -> None:
    """Wait until the wake's trigger is in the projection: the round reads the thread from there."""
    from schemas.read_model import wait_until_projected

    projected = await asyncio.to_thread(
        wait_until_projected,
        config.database_url,
        wake.thread_ts,
        wake.trigger_message_id,
        config.projection_timeout,
        config.schema,
    )
    if not projected:
        raise TriggerNotProjected(
            f"trigger {wake.trigger_message_id} not projected in {config.projection_timeout}s"
        )


async def _load(conn: psycopg.Connection, thread_ts: str) -> LoadedContext:
    """The thread's context: one query (invariant: the agent reads its context in one query)."""
    ctx = await asyncio.to_thread(load_context, conn, thread_ts)
    _log_loaded(ctx)
    return ctx


async def _rerender(
    conn: psycopg.Connection, plan: Plan, config: AgentConfig, emitter: EventEmitter, thread_ts: str
) -> None:
    """Emit the plan's re-renderings and wait until the projection shows them (invariant 10)."""
    await asyncio.to_thread(emitter.send, *plan.events)
    for event in plan.events:
        metrics.RERENDERS.labels(event.policy).inc()
    await _wait_rerendered(conn, {e.target_id: e.tokens for e in plan.events}, config.projection_timeout)
    log.info(
        "re-rendered",
        extra=about(
            thread_ts, None, rows=len(plan.events), before=plan.tokens_before, after=plan.tokens_after
        ),
    )


def raw_reader(conn: psycopg.Connection, toolbox: McpToolbox, thread_ts: str) -> RawReader:
    """The judge's reader of the raw a claim cites: the evidence tool when offered, else the store."""

    async def read_raw(evidence_id: str) -> Any:
        """The raw a claim cites, for the judge: redacted, whichever server answered (invariant 13)."""
        if toolbox.has(EVIDENCE_TOOL):
            try:
                return redact_value(await toolbox.call(EVIDENCE_TOOL, {"id": evidence_id}, thread=thread_ts))
            except ToolCallError:
                pass
        record = await asyncio.to_thread(
            lambda: conn.execute(read_model.RAW_CONTENT, {"id": evidence_id}).fetchone()
        )
        return None if record is None else redact_value(record[0])

    return read_raw


def round_deps(
    wake: Wake,
    config: AgentConfig,
    models: Models,
    toolbox: McpToolbox,
    emitter: EventEmitter,
    conn: psycopg.Connection,
    ctx: LoadedContext,
    round_: int,
    now: datetime,
) -> RoundDeps:
    """What the graph needs for this round: the preamble, the tool path, the playbook, the recall."""
    answers = tuple(AnsweredMention(message_id=m.message_id, user=m.user) for m in unanswered(ctx.rows))
    trigger = Trigger(wake.reason, wake.trigger_message_id, wake.user, answers)
    return RoundDeps(
        config=config,
        ctx=ctx,
        round=round_,
        preamble=render_preamble(ctx, round_, trigger, trigger_time(ctx, trigger) or now),
        agent_model=models.agent,
        judge_model=models.judge,
        agent_model_name=models.agent_name,
        judge_model_name=models.judge_name,
        toolbox=toolbox,
        tools=ToolPath(config, conn, toolbox, emitter, alert_context(ctx), guard_for(ctx, config, toolbox)),
        emitter=emitter,
        raw_reader=raw_reader(conn, toolbox, wake.thread_ts),
        playbook=playbook_plan(ctx, toolbox) if wake.reason == "alert" else None,
        answers=answers,
        recall=recall_step(conn, ctx, emitter, wake),
    )


async def _committed(
    conn: psycopg.Connection, wake: Wake, deps: RoundDeps, ids: list[str], started: float
) -> RoundResult:
    """Wait for the round's last row to be visible, count it, log it, and say what it was."""
    thread_ts, round_ = wake.thread_ts, deps.round
    visible = await _wait_visible(conn, ids[-1], deps.config.projection_timeout)
    if not visible:
        log.warning("round acked but not yet visible", extra=about(thread_ts, ids[-1], round=round_))
    seconds = time.perf_counter() - started
    metrics.ROUND_SECONDS.observe(seconds)
    metrics.ROUNDS.labels("committed").inc()
    metrics.TRIGGER_TO_COMMIT_SECONDS.labels(wake.reason).observe(metrics.trigger_age(wake))
    log.info(
        "round committed",
        extra=about(
            thread_ts,
            ids[-1],
            round=round_,
            rows=len(ids),
            seconds=round(seconds, 3),
            model_inputs=deps.model_inputs,
        ),
    )
    return RoundResult(
        thread_ts,
        round_,
        "committed",
        ids,
        deps.model_inputs,
        count_tokens(deps.preamble),
        deps.ctx.token_sum,
        seconds,
    )
