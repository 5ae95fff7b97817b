"""The agent's Prometheus metrics: round duration and outcomes, real tool calls, cache hits."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

ROUND_SECONDS = Histogram(
    "agent_round_duration_seconds",
    "Wall time of one agent round",
    buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300),
)
ROUNDS = Counter("agent_rounds_total", "Agent rounds by outcome", ["outcome"])
# Tool labels come from a closed set (the known tools + "other"): the model chooses tool names, and a
# label it could choose freely would grow the metric without bound.
KNOWN_TOOLS = frozenset({"query_loki", "query_prometheus", "query_tempo", "get_pod_events", "get_evidence"})
TOOL_CALLS = Counter("agent_tool_calls_total", "Real (uncached) tool calls through MCP", ["tool"])
TOOL_REFUSALS = Counter(
    "agent_tool_refusals_total", "Tool calls refused by the boundary check before they ran", ["tool"]
)
CACHE_HITS = Counter("agent_tool_cache_hits_total", "Tool calls answered from tool_digest_cache", ["tool"])
RERENDERS = Counter(
    "agent_rerenders_total", "Rows re-rendered to keep a long thread under budget", ["policy"]
)
MODEL_INPUT_TOKENS = Histogram(
    "agent_model_input_tokens",
    "Tokens sent to a model per call",
    ["node"],
    buckets=(250, 500, 1000, 2500, 5000, 10000),
)


def tool_label(tool: str) -> str:
    """A tool's metric label: its name when known, else "other"."""
    return tool if tool in KNOWN_TOOLS else "other"
