"""deploy/local/monitoring.py, the pure half of the live monitoring check (tests/integration/test_live_monitoring.py):
the scaled alert rules keep every rule's shape, and the dashboard's queries are all found and substituted."""

from __future__ import annotations

import json

import pytest

from deploy.local import monitoring


def test_scaling_divides_every_window_and_for_and_nothing_else() -> None:
    rules = monitoring.load_rules()
    scaled = monitoring.scaled_alerts(rules, 15)
    (original,) = [g for g in rules["groups"] if g["name"] == monitoring.ALERT_GROUP]
    (group,) = scaled["groups"]
    assert [r["alert"] for r in group["rules"]] == [r["alert"] for r in original["rules"]]
    lag = next(r for r in group["rules"] if r["alert"] == "IncidentMemoryProjectorLagGrowing")
    assert lag["for"] == "20s" and "[12s:2s]" in lag["expr"] and "[20s]" in lag["expr"]
    for before, after in zip(original["rules"], group["rules"], strict=True):
        assert monitoring.seconds(after.get("for", "0s")) * 15 == monitoring.seconds(before.get("for", "0s"))
        assert after["labels"] == before["labels"] and after["annotations"] == before["annotations"]
        assert monitoring._WINDOW.sub("[w]", after["expr"]) == monitoring._WINDOW.sub("[w]", before["expr"])


def test_a_duration_the_factor_does_not_divide_is_an_error() -> None:
    assert monitoring.scale_expr("rate(x[1h])", 15) == "rate(x[240s])"
    with pytest.raises(ValueError):
        monitoring.scale_expr("rate(x[7s])", 15)


def test_every_panel_query_is_found_with_its_variables_substituted() -> None:
    dashboard = json.loads(monitoring.DASHBOARD.read_text())
    variables = {"namespace": "im", "__rate_interval": "15s", "model_input_budget": "8000"}
    queries = monitoring.panel_queries(dashboard, variables)
    targets = sum(len(p.get("targets") or []) for p in dashboard["panels"])
    assert len(queries) == targets > 0
    assert all("$" not in q.expr for q in queries)
    assert any('namespace=~"im"' in q.expr for q in queries)
    with pytest.raises(KeyError):
        monitoring.panel_queries(dashboard, {"namespace": "im"})


def test_the_prometheus_config_labels_each_target_as_the_pod_monitor_does() -> None:
    config = monitoring.prometheus_config({"ingest": 1, "slack": 2}, "im", [])
    jobs = {job["job_name"]: job["static_configs"][0] for job in config["scrape_configs"]}
    assert jobs["slack"] == {"targets": ["127.0.0.1:2"], "labels": {"namespace": "im", "container": "slack"}}
