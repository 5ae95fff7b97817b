"""Tool name -> compactor (the raw format a tool returns): the one map the agent and the compactor read.

It is contract, like the topic names: the agent stamps a `ToolResult` with the compactor name its
tool maps to (and keys its tool-digest cache by it), and the compactor picks the digest by that
name. Both read this map, extended by the one deployment setting `COMPACTOR_TOOL_MAP`
(`'{"my_logs": "query_loki"}'`), so they can never disagree. The raw formats behind the names are
the table "Raw formats the compactors accept" in DESIGN.md. A tool mapped nowhere keeps its own
name and is compacted by the passthrough.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

PASSTHROUGH = "passthrough"
TOOL_MAP_ENV = "COMPACTOR_TOOL_MAP"

# Ours, and the names Grafana's and other common MCP servers give the same queries.
TOOL_COMPACTORS: Mapping[str, str] = MappingProxyType(
    {
        "query_loki": "query_loki",
        "query_loki_logs": "query_loki",
        "loki_query_range": "query_loki",
        "query_prometheus": "query_prometheus",
        "prometheus_query_range": "query_prometheus",
        "query_tempo": "query_tempo",
        "get_trace": "query_tempo",
        "tempo_get_trace": "query_tempo",
        "get_pod_events": "get_pod_events",
        "list_pod_events": "get_pod_events",
        "kubernetes_events": "get_pod_events",
    }
)


class ToolMapError(ValueError):
    """A tool map entry that is not `"tool": "compactor"` (both non-empty strings)."""


def tool_map(extra: Mapping[str, object] | None = None) -> Mapping[str, str]:
    """The built-in map with `extra` (a deployment's `COMPACTOR_TOOL_MAP`) over it; read-only."""
    merged = dict(TOOL_COMPACTORS)
    for tool, compactor in (extra or {}).items():
        if not (isinstance(tool, str) and tool and isinstance(compactor, str) and compactor):
            raise ToolMapError(f"{TOOL_MAP_ENV}[{tool!r}]: expected a compactor name, got {compactor!r}")
        merged[tool] = compactor
    return MappingProxyType(merged)


# A tool call that failed is recorded as its result, verbatim: `{"error": <the tool's own message>,
# "tool": <the name called>}`. The agent writes this shape and the compactor reads it, so the model
# is told the tool's own reason instead of a complaint about the raw's format.
TOOL_ERROR_KEYS = frozenset({"error", "tool"})


def tool_error_raw(tool: str, message: str) -> dict[str, str]:
    """The raw recorded for a failed tool call."""
    return {"error": message, "tool": tool}


def recorded_tool_error(raw: object) -> tuple[str, str] | None:
    """(the tool called, its own error message) when `raw` is a failed call's record, else None."""
    if isinstance(raw, dict) and raw.keys() == TOOL_ERROR_KEYS:
        tool, message = raw["tool"], raw["error"]
        if isinstance(tool, str) and isinstance(message, str):
            return tool, message
    return None
