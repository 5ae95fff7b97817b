"""Per-tool token counters: the dashboard's raw vs in-context tokens per tool (the compaction ratio)."""

from __future__ import annotations

from services.compactor.stream_metrics import StreamMetrics


def test_raw_and_compact_tokens_are_counted_per_tool_and_in_total() -> None:
    m = StreamMetrics()
    m.record_compacted("query_loki", 4000, 250)
    m.record_compacted("query_loki", 1000, 200)
    m.record_compacted("get_pod_events", 600, 120)

    def value(name: str, **labels: str) -> float:
        return m.registry.get_sample_value(name, labels) or 0.0

    assert value("compactor_tool_tokens_total", tool="query_loki", kind="raw") == 5000
    assert value("compactor_tool_tokens_total", tool="query_loki", kind="compact") == 450
    assert value("compactor_tool_tokens_total", tool="get_pod_events", kind="raw") == 600
    assert value("compactor_tool_tokens_total", tool="get_pod_events", kind="compact") == 120
    assert value("compactor_tokens_total", kind="raw") == 5600  # the totals are unchanged
    assert value("compactor_tokens_total", kind="compact") == 570
    assert value("compactor_tool_results_total", tool="query_loki") == 2
