"""The agent's check of every tool call before it runs (services/boundary/scope.py, invariant 13).

The scope is derived from the loaded context (the alert, its pinned window, the latest mention)
with the deployment's `TOOL_SCOPE` policy; the telemetry MCP server derives the same from the
projection and checks again. Only the tools offered to investigate may run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from services.agent.config import EVIDENCE_TOOL, AgentConfig
from services.agent.mcp_client import McpToolbox
from services.boundary.scope import Checked, ScopePolicy, check_call
from services.context_render.context import LoadedContext
from services.context_render.preamble import pinned_window


def latest_mention_ts(ctx: LoadedContext) -> str | None:
    mentions = [
        r.value.get("ts")
        for r in ctx.rows
        if r.role == "human" and isinstance(r.value, dict) and r.value.get("mention")
    ]
    return str(mentions[-1]) if mentions and mentions[-1] is not None else None


def alert_payload(ctx: LoadedContext) -> Any:
    for row in ctx.rows:
        if row.role == "alert" and isinstance(row.value, dict):
            return row.value.get("alert")
    return None


@dataclass(frozen=True)
class ToolGuard:
    policy: ScopePolicy
    ctx: LoadedContext
    offered: frozenset[str]
    kind_of: Callable[[str], str]

    def check(self, name: str, args: Mapping[str, Any]) -> Checked:
        scope = self.policy.scope_for(
            self.ctx.thread_ts, pinned_window(self.ctx), alert_payload(self.ctx), latest_mention_ts(self.ctx)
        )
        return check_call(name, args, self.offered, scope, self.policy.limits, self.kind_of)


def guard_for(ctx: LoadedContext, config: AgentConfig, toolbox: McpToolbox) -> ToolGuard:
    """The round's guard: the tools investigate is offered (get_evidence never is), this thread's scope."""
    offered = frozenset(spec["function"]["name"] for spec in toolbox.tool_specs(exclude=(EVIDENCE_TOOL,)))
    return ToolGuard(config.tool_scope, ctx, offered, config.compactor_for)
