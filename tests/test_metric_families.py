"""services/runtime/metric_families.py: every family lands on the given registry, and each label set
named in `zero` exists at 0 before its first observation (one value or a tuple of values)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from services.runtime.metric_families import Families


def test_zeroed_label_sets_exist_at_zero_on_the_given_registry() -> None:
    registry = CollectorRegistry()
    f = Families(registry)
    f.counter("t_single_total", "one label", "outcome", zero=("ok", "failed"))
    f.counter("t_pair_total", "two labels", "tool", "kind", zero=[("loki", "raw")])
    f.histogram("t_seconds", "histogram", "reason", buckets=(1, 2), zero=("alert",))
    f.gauge("t_gauge", "no labels").set(3)

    assert registry.get_sample_value("t_single_total", {"outcome": "failed"}) == 0
    assert registry.get_sample_value("t_pair_total", {"tool": "loki", "kind": "raw"}) == 0
    assert registry.get_sample_value("t_pair_total", {"tool": "loki", "kind": "compact"}) is None
    assert registry.get_sample_value("t_seconds_count", {"reason": "alert"}) == 0
    assert registry.get_sample_value("t_gauge") == 3


def test_a_family_without_zero_has_no_series_until_observed() -> None:
    registry = CollectorRegistry()
    counter = Families(registry).counter("t_open_total", "open", "reason")
    assert registry.get_sample_value("t_open_total", {"reason": "x"}) is None
    counter.labels("x").inc()
    assert registry.get_sample_value("t_open_total", {"reason": "x"}) == 1
