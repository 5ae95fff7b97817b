"""The agent's Prometheus metrics: round duration and outcomes, real tool calls, cache hits."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

ROUND_SECONDS = Histogram(
    "agent_round_duration_seconds",
    "Wall time of one agent round",
    buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300),
)
ROUNDS = Counter("agent_rounds_total", "Agent rounds by outcome", ["outcome"])
TOOL_CALLS = Counter("agent_tool_calls_total", "Real (uncached) tool calls through MCP", ["tool"])
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
