"""The seed thread's rounds in one process: the agent's own graph, fed the way the services feed it.

No Kafka and no Postgres, and no stand-in for what decides a token: events are compacted by the
compactor's own `compact_event` (default selector), projected into rows by the projector's own
`map_event`, loaded into the agent's `LoadedContext` (coalesce(compact, content), the repair),
re-rendered by the agent's `plan_round`, and the tools are the telemetry MCP server's, reached
through the agent's `McpToolbox` over stdio. What it replaces are only the transports: the Kafka
producer (`Emitter.send` applies the events in order) and the Postgres tables (`Projection`).
The staging of a round until its marker, and the tool-digest cache, are modelled as the projector
does them, so a round sees exactly what it would see on the real stack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from deploy.local.seed import SEED_RECORDING
from schemas.events import EventBase, ToolResult, Wake
from schemas.ids import canonical_args_hash
from schemas.row_description import describe
from services.agent.config import AgentConfig, McpServer, default_cli
from services.agent.graph import RoundGraph
from services.agent.guard import guard_for
from services.agent.mcp_client import McpToolbox
from services.agent.round import alert_context, plan_round, playbook_plan
from services.agent.round_state import RoundDeps
from services.agent.stand_in_model import MODEL_NAME, DeterministicStandInModel
from services.agent.toolpath import CachedDigest, ToolPath
from services.compaction.selector import default_selector
from services.compactor.stream import compact_event
from services.compactor.turns import with_turn_compact
from services.context_render.context import (
    ContextRow,
    IncidentState,
    LoadedContext,
    answer_ids,
    repair_dangling_tool_calls,
)
from services.context_render.preamble import Trigger, render_preamble, trigger_time
from services.projector.mapping import (
    CacheDigest,
    CommitRound,
    ReRender,
    Row,
    UpsertState,
    map_event,
)
from services.projector.show import ShownRow
from services.runtime.kafka_client import KafkaClient

from .seedplay import alert_events, alert_wake, human_events, mention_wake


@dataclass
class Projection:
    """agent_messages, round_staging, incident_state and tool_digest_cache, as the projector keeps them."""

    rows: list[Row] = field(default_factory=list)
    staged: dict[str, Row] = field(default_factory=dict)
    state: UpsertState | None = None
    rounds: int = 0
    cache: dict[tuple[str, str, str], CacheDigest] = field(default_factory=dict)

    def apply(self, event: EventBase) -> None:
        for op in map_event(event):
            if isinstance(op, Row) and op.staged:
                self.staged.setdefault(op.id, op)
            elif isinstance(op, Row) and op.id not in {r.id for r in self.rows}:
                self.rows.append(op)
            elif isinstance(op, CommitRound):
                self.rows.extend(self.staged.pop(mid) for mid in op.message_ids if mid in self.staged)
                self.rounds = max(self.rounds, op.round)
            elif isinstance(op, ReRender):
                self.rows = [
                    replace(r, compact=op.compact, tokens=op.tokens) if r.id == op.target_id else r
                    for r in self.rows
                ]
            elif isinstance(op, UpsertState):
                keep = self.state.opened_at if self.state and op.keep_opened_at else op.opened_at
                self.state = replace(op, opened_at=keep)
            elif isinstance(op, CacheDigest):
                self.cache.setdefault((op.thread_ts, op.tool, op.args_hash), op)

    def context(self, thread_ts: str) -> LoadedContext:
        """loadContext: coalesce(compact, content) in seq order, repaired, with incident_state beside it."""
        rows = [
            ContextRow(
                r.id,
                r.role,
                r.tool_call_id,
                json.loads(r.compact or r.content),
                r.tokens,
                answer_ids(json.loads(r.content).get("answers")) if r.role == "post" else None,
            )
            for r in self.rows
            if r.thread_ts == thread_ts
        ]
        state = None
        if self.state is not None:
            s = self.state
            state = IncidentState(s.service, s.status, s.window_start, s.window_end, self.rounds, s.opened_at)
        return LoadedContext(thread_ts, tuple(repair_dangling_tool_calls(rows)), state)

    def content(self, message_id: str) -> Any:
        for row in [*self.rows, *self.staged.values()]:
            if row.id == message_id:
                return json.loads(row.content)
        return None

    def shown(self) -> list[ShownRow]:
        """The `show` table's rows: raw tokens of content beside the row's tokens in context."""
        from schemas.tokens import count_value_tokens

        out = []
        for seq, r in enumerate(self.rows, 1):
            content = json.loads(r.content)
            compact = json.loads(r.compact) if r.compact else None
            what = describe(r.role, content, compact, None)
            out.append(ShownRow(seq, r.round, r.role, what, count_value_tokens(content), r.tokens))
        return out


class Emitter:
    """The producer, in order: a raw tool result goes through the compactor, everything to the projection."""

    def __init__(self, projection: Projection) -> None:
        self.projection = projection
        self.selector = default_selector()

    def send(self, *events: EventBase, timeout: float = 30.0) -> None:
        for event in events:
            if isinstance(event, ToolResult):
                event = compact_event(
                    event, recorded=lambda _key: None, selector=self.selector, budget=None
                ).event
            else:  # a human message or an alert: redacted, its pastes compacted, as the stream does
                event = with_turn_compact(event) or event
            self.projection.apply(event)


class LocalToolPath(ToolPath):
    """The agent's tool path with its two table reads answered by the projection."""

    projection: Projection

    async def lookup(self, thread_ts: str, tool: str, args: dict[str, Any]) -> CachedDigest | None:
        key = (thread_ts, self.config.compactor_for(tool), canonical_args_hash(args))
        hit = self.projection.cache.get(key)
        return None if hit is None else CachedDigest(hit.message_id, json.loads(hit.compact))

    async def wait_for_digest(self, thread_ts: str, message_id: str) -> Any:
        for digest in self.projection.cache.values():
            if digest.thread_ts == thread_ts and digest.message_id == message_id:
                return json.loads(digest.compact)
        raise AssertionError(f"no digest for {message_id}")


@dataclass
class Seeded:
    """One in-process thread: the projection, and every model call as (round, node, input tokens)."""

    config: AgentConfig = field(
        default_factory=lambda: AgentConfig(
            kafka=KafkaClient.plaintext("unused:9092"), database_url="postgresql://unused"
        )
    )
    projection: Projection = field(default_factory=Projection)
    calls: list[tuple[int, str, int]] = field(default_factory=list)

    async def run(self, toolbox: McpToolbox, wake: Wake) -> None:
        """What run_round does once the trigger is projected: plan, re-render, preamble, graph."""
        emitter = Emitter(self.projection)
        ctx = self.projection.context(wake.thread_ts)
        now = datetime.now(UTC)
        round_, plan = plan_round(ctx, self.config, now, wake.trigger_message_id)
        if plan.events:
            emitter.send(*plan.events)
            ctx = self.projection.context(wake.thread_ts)
        trigger = Trigger(wake.reason, wake.trigger_message_id, wake.user)
        preamble = render_preamble(ctx, round_, trigger, trigger_time(ctx, trigger) or now)
        guard = guard_for(ctx, self.config, toolbox)
        tools = LocalToolPath(self.config, None, toolbox, emitter, alert_context(ctx), guard)  # type: ignore[arg-type]
        tools.projection = self.projection

        async def read_raw(evidence_id: str) -> Any:
            return self.projection.content(evidence_id)

        model = DeterministicStandInModel()
        deps = RoundDeps(
            config=self.config,
            ctx=ctx,
            round=round_,
            preamble=preamble,
            agent_model=model,
            judge_model=model,
            agent_model_name=MODEL_NAME,
            judge_model_name=MODEL_NAME,
            toolbox=toolbox,
            tools=tools,
            emitter=emitter,  # type: ignore[arg-type]
            raw_reader=read_raw,
            playbook=playbook_plan(ctx, toolbox) if wake.reason == "alert" else None,
        )
        await RoundGraph(deps).run()
        self.calls.extend((round_, node, tokens) for node, tokens in deps.model_inputs)

    async def play_seed(self, toolbox: McpToolbox) -> None:
        """The seed thread's two rounds: the alert's, then the mention's after the humans' messages."""
        for event in alert_events():
            self.projection.apply(event)
        await self.run(toolbox, alert_wake())
        for event in [*human_events(mention=False), *human_events(mention=True)]:
            self.projection.apply(event)
        await self.run(toolbox, mention_wake())


def telemetry_server() -> McpServer:
    """The telemetry MCP server the agent starts by default (recorded back end), over stdio."""
    return McpServer(
        name="telemetry",
        command=[default_cli(), "telemetry-mcp", "--backend", "recorded", "--unscoped"],
        env={"TELEMETRY_MCP_RECORDING": SEED_RECORDING},
    )
