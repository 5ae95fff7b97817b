"""The agent's Prometheus metrics: round duration and outcomes, real tool calls, cache hits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import get_args

from schemas.events import Wake
from services.runtime.metric_families import Families

# Every label value of a closed set exists from the start, at 0 (Prometheus's "avoid missing metrics"): a
# series born at 1 shows no increase(), so the first dead-lettered round would never fire
# IncidentMemoryAgentRoundsFailing, and the dashboard's rates stay empty until a second observation
# (tests/integration/test_live_monitoring.py found it).
ROUND_OUTCOMES = ("committed", "timed_out", "retried", "dead_lettered")
WAKE_REASONS = get_args(Wake.model_fields["reason"].annotation)
_FAMILIES = Families()  # prometheus_client's default registry: one agent per process

ROUND_SECONDS = _FAMILIES.histogram(
    "agent_round_duration_seconds",
    "Wall time of one agent round",
    buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300),
)
# outcome: committed | timed_out (ran past round_timeout; retried) | retried (another transient
# failure) | dead_lettered (crashed, or failed every attempt)
ROUNDS = _FAMILIES.counter("agent_rounds_total", "Agent rounds by outcome", "outcome", zero=ROUND_OUTCOMES)
WAKES_COALESCED = _FAMILIES.counter(
    "agent_wakes_coalesced_total", "Wakes answered by a round started for a later wake of the same thread"
)
# The SLO "mention -> the bot's answer" (deploy/monitoring/, incident_memory:mention_to_posts:*): from
# the trigger's event_time (a mention: its Slack ts) to the round's commit, when its posts are on the
# log for the poster. Observed only for committed rounds; a round that never commits is in ROUNDS.
TRIGGER_TO_COMMIT_SECONDS = _FAMILIES.histogram(
    "agent_trigger_to_commit_seconds",
    "From the wake's trigger (a mention's Slack ts, an alert's start) to its round's commit",
    "reason",
    buckets=(1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600),
    zero=WAKE_REASONS,
)
# Tool labels come from a closed set (the known tools + "other"): the model chooses tool names, and a
# label it could choose freely would grow the metric without bound.
KNOWN_TOOLS = frozenset({"query_loki", "query_prometheus", "query_tempo", "get_pod_events", "get_evidence"})
TOOL_CALLS = _FAMILIES.counter("agent_tool_calls_total", "Real (uncached) tool calls through MCP", "tool")
TOOL_REFUSALS = _FAMILIES.counter(
    "agent_tool_refusals_total", "Tool calls refused by the boundary check before they ran", "tool"
)
CACHE_HITS = _FAMILIES.counter(
    "agent_tool_cache_hits_total", "Tool calls answered from tool_digest_cache", "tool"
)
RERENDERS = _FAMILIES.counter(
    "agent_rerenders_total", "Rows re-rendered to keep a long thread under budget", "policy"
)
MODEL_INPUT_TOKENS = _FAMILIES.histogram(
    "agent_model_input_tokens",
    "Tokens sent to a model per call",
    "node",
    buckets=(250, 500, 1000, 2500, 5000, 10000),
)


def round_failure_outcome(exc: BaseException) -> str:
    """A retryable failure's outcome label: a round past its timeout is `timed_out`, any other
    transient failure (Kafka, Postgres, the projection not caught up) `retried`."""
    return "timed_out" if isinstance(exc, TimeoutError) else "retried"


def trigger_age(wake: Wake, now: datetime | None = None) -> float:
    """Seconds since the wake's trigger happened (never negative: clocks of Slack and of this host differ)."""
    return max(0.0, ((now or datetime.now(UTC)) - wake.event_time).total_seconds())


def tool_label(tool: str) -> str:
    """A tool's metric label: its name when known, else "other"."""
    return tool if tool in KNOWN_TOOLS else "other"
