"""Label values of a closed set exist at 0 before their first observation (Prometheus's "avoid missing
metrics"): a series born at 1 shows no increase() or rate(), so the first dead-lettered round, the first
failed post, the first compaction of a tool would be invisible to the alerts and the dashboard (found by
tests/integration/test_live_monitoring.py: the compaction ratio panel was empty)."""

from __future__ import annotations

from prometheus_client import REGISTRY


def test_the_agents_round_outcomes_and_wake_reasons_start_at_zero() -> None:
    import services.agent.metrics  # noqa: F401 - registers on the default registry

    assert REGISTRY.get_sample_value("agent_rounds_total", {"outcome": "dead_lettered"}) is not None
    assert (
        REGISTRY.get_sample_value("agent_trigger_to_commit_seconds_count", {"reason": "mention"}) is not None
    )
    assert REGISTRY.get_sample_value("agent_trigger_to_commit_seconds_count", {"reason": "alert"}) is not None


def test_the_posters_outcomes_and_slack_errors_start_at_zero() -> None:
    import services.voice.main
    import services.voice.metrics  # noqa: F401

    assert REGISTRY.get_sample_value("slack_posts_total", {"outcome": "posted"}) is not None
    assert REGISTRY.get_sample_value("slack_post_failures_total", {"error": "token_revoked"}) is not None
    assert REGISTRY.get_sample_value("slack_post_failures_total", {"error": "unreachable"}) is not None


def test_the_compactors_tools_and_outcomes_start_at_zero() -> None:
    from services.compactor.stream_metrics import StreamMetrics

    registry = StreamMetrics().registry
    for tool in ("query_loki", "query_prometheus", "query_tempo", "get_pod_events"):
        for kind in ("raw", "compact"):
            assert registry.get_sample_value("compactor_tool_tokens_total", {"tool": tool, "kind": kind}) == 0
    assert registry.get_sample_value("compactor_events_total", {"outcome": "dead_letter"}) == 0
