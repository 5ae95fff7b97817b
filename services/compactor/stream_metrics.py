"""Prometheus metrics of a compactor worker (prometheus-client, its own HTTP port).

Events/s is `rate(compactor_events_total[1m])`; the compaction ratio is the
`compactor_compaction_ratio` histogram (raw_tokens / tokens per tool result).
What share of a worker's CPU is our own per-record work, and what share is faust, aiokafka
and the event loop: `rate(compactor_process_cpu_seconds_total[1m]) /
rate(process_cpu_seconds_total[1m])` (the second from prometheus-client's process collector).
It says whether a slow worker needs cheaper compaction or more workers.
Each worker process has its own registry, so tests can start several in one run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector

from schemas.tools import PASSTHROUGH, TOOL_COMPACTORS
from services.runtime.health import Heartbeat, serve_metrics_and_health
from services.runtime.metric_families import Families

OUTCOMES = ("compacted", "passthrough", "dead_letter")

RATIO_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


@dataclass
class StreamMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        f = Families(self.registry)
        # the closed sets at 0 from the start: a series born at 1 shows no increase() or rate() (the
        # dashboard's compaction ratio stayed empty; tests/integration/test_live_monitoring.py)
        tools = sorted(set(TOOL_COMPACTORS.values()) - {PASSTHROUGH})
        self.events = f.counter(
            "compactor_events_total", "Records handled, by outcome", "outcome", zero=OUTCOMES
        )
        self.compacted = f.counter(
            "compactor_tool_results_total", "Tool results compacted", "tool", zero=tools
        )
        self.ratio = f.histogram(
            "compactor_compaction_ratio",
            "raw_tokens / tokens per tool result",
            "tool",
            buckets=RATIO_BUCKETS,
            zero=tools,
        )
        self.tokens = f.counter("compactor_tokens_total", "Tokens, raw and compact", "kind")
        self.tool_tokens = f.counter(
            "compactor_tool_tokens_total",
            "Tokens of tool results per tool: raw (kept as evidence) and compact (what the model sees)",
            "tool",
            "kind",
            zero=[(tool, kind) for tool in tools for kind in ("raw", "compact")],
        )
        self.budget_violations = f.counter(
            "compactor_budget_violations_total", "Tool results whose digest exceeded the budget", "tool"
        )
        self.dead_letters = f.counter("compactor_dlq_total", "Records sent to the dead-letter topic")
        self.selector_calls = f.counter(
            "compactor_selector_calls_total", "Calls to the selector (recorded choices excluded)", "model"
        )
        self.selections_reused = f.counter(
            "compactor_selections_reused_total", "Recorded selections reused instead of calling the selector"
        )
        self.lag = f.gauge(
            "compactor_consumer_lag", "highwater - next offset, per source partition", "partition"
        )
        self.process_cpu = f.counter(
            "compactor_process_cpu_seconds",
            "CPU seconds of the worker's event-loop thread inside stream.process (our per-record work)",
        )
        ProcessCollector(
            registry=self.registry
        )  # process_cpu_seconds_total, memory, open fds: the whole worker
        self.heartbeat = Heartbeat()
        self.assigned = f.gauge("compactor_assigned_partitions", "Source partitions assigned to this worker")

    def record_compacted(self, tool: str, raw_tokens: int, tokens: int) -> None:
        """Every per-tool-result figure at once, through children bound once per tool (the hot path)."""
        compacted, ratio, tool_raw, tool_compact = self._per_tool(tool)
        self._compacted_outcome.inc()
        compacted.inc()
        ratio.observe(raw_tokens / max(tokens, 1))
        self._raw_tokens.inc(raw_tokens)
        self._compact_tokens.inc(tokens)
        tool_raw.inc(raw_tokens)
        tool_compact.inc(tokens)

    @functools.cached_property
    def _compacted_outcome(self) -> Any:
        return self.events.labels(outcome="compacted")

    @functools.cached_property
    def _raw_tokens(self) -> Any:
        return self.tokens.labels(kind="raw")

    @functools.cached_property
    def _compact_tokens(self) -> Any:
        return self.tokens.labels(kind="compact")

    def _per_tool(self, tool: str) -> tuple[Any, Any, Any, Any]:
        children = self._tool_children.get(tool)
        if children is None:
            children = self._tool_children[tool] = (
                self.compacted.labels(tool=tool),
                self.ratio.labels(tool=tool),
                self.tool_tokens.labels(tool=tool, kind="raw"),
                self.tool_tokens.labels(tool=tool, kind="compact"),
            )
        return children

    @functools.cached_property
    def _tool_children(self) -> dict[str, tuple[Any, Any, Any, Any]]:
        return {}

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """`/metrics` and `/healthz` (503 until the worker's timer runs, or when it stalls) on `port`."""
        serve_metrics_and_health(port, self.heartbeat, self.registry, addr=addr)
