"""The alert rules, their unit tests, runbooks and PrometheusRule keep their promises, checked offline.

promtool itself (check rules, test rules) runs in deploy/validate.sh; here: every metric a rule reads
is one a service really exports (names taken from the services' own registries), every alert has a
severity, a summary naming its service, a runbook that exists, and a promtool test that fires it and
one where it must stay silent; the PrometheusRule carries the rule file's groups; and, when
validate.sh hands over its promtool, a rule broken on purpose makes `promtool test rules` fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "incident-memory.rules.yml"
UNIT_TESTS = sorted((MONITORING / "tests").glob("*.test.yml"))
RUNBOOKS = ROOT / "docs" / "runbooks"
SERVICES = ("ingest", "compactor", "projector", "agent", "slack")
OURS = re.compile(r"\b((?:ingest|compactor|projector|agent|slack|incident_memory)_[a-z0-9_]+)\b")
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def exported_metric_names() -> set[str]:
    """Every sample name the services expose, read from their own collectors (not a list kept here)."""
    from prometheus_client import REGISTRY, CollectorRegistry

    import services.agent.metrics
    import services.voice.main
    import services.voice.metrics  # noqa: F401 - registers on the default registry
    from services.compactor.stream_metrics import StreamMetrics
    from services.ingest.http_limits import LimitMetrics
    from services.ingest.metrics import Metrics as IngestMetrics
    from services.projector.metrics import Metrics as ProjectorMetrics
    from services.runtime.health import HEALTHY_METRIC

    ingest = IngestMetrics()
    LimitMetrics(ingest.registry)
    registries: list[CollectorRegistry] = [
        REGISTRY,
        ingest.registry,
        ProjectorMetrics().registry,
        StreamMetrics().registry,
    ]
    names = {HEALTHY_METRIC}
    for registry in registries:
        for family in registry.collect():
            names.add(family.name)
            names.update(sample.name for sample in family.samples)
            names.update(family.name + suffix for suffix in SUFFIXES)  # series of families never observed yet
    return names


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def metric_names_in(expr: str) -> set[str]:
    without_strings = re.sub(r'"[^"]*"', '""', expr)  # label values are not metric names
    return {name for name in OURS.findall(without_strings) if ":" not in name}


def test_every_metric_a_rule_reads_is_exported_by_a_service() -> None:
    exported = exported_metric_names()
    used = {
        name: rule.get("alert") or rule.get("record")
        for rule in rules()
        for name in metric_names_in(rule["expr"])
    }
    assert used, "the regex found no metric at all"
    missing = {name: where for name, where in used.items() if name not in exported}
    assert not missing, f"rules read metrics no service exports: {missing}"


def test_the_metric_check_can_fail() -> None:
    exported = exported_metric_names()
    assert "projector_consumer_lag" in exported and "compactor_dlq_total" in exported
    assert "projector_consumer_lag_seconds" not in exported  # a plausible misspelling is caught
    assert metric_names_in('rate(ingest_requests_total{endpoint="agent_x"}[5m])') == {"ingest_requests_total"}


@pytest.mark.parametrize("alert", alerts(), ids=lambda a: a["alert"])
def test_every_alert_has_severity_a_summary_naming_its_service_and_a_runbook(alert: dict[str, Any]) -> None:
    name = alert["alert"]
    assert re.fullmatch(r"IncidentMemory[A-Z][A-Za-z]+", name)
    assert alert["labels"]["severity"] in {"warning", "critical"}
    summary = alert["annotations"]["summary"]
    named = re.match(r"incident-memory (\w+[\w ]*?|\{\{ \$labels\.(container|service) \}\}):", summary)
    assert named, summary
    if named.group(2) is None:  # a fixed service: it is one of ours and the `service` label agrees
        assert (
            named.group(1).split()[0] in SERVICES and alert["labels"]["service"] == named.group(1).split()[0]
        )
    assert alert["annotations"]["description"]
    runbook_url = alert["annotations"]["runbook_url"]
    assert runbook_url.endswith(f"/{name}.md"), runbook_url
    runbook = RUNBOOKS / f"{name}.md"
    assert runbook.is_file(), f"{runbook} is missing"
    text = runbook.read_text()
    for section in ("## Meaning", "## Confirm", "## Act"):
        assert section in text, f"{runbook.name} has no {section!r} section"


def _unit_test_cases() -> list[dict[str, Any]]:
    return [case for path in UNIT_TESTS for case in yaml.safe_load(path.read_text())["tests"]]


def _namespace(series: str) -> str | None:
    found = re.search(r'namespace="([^"]*)"', series)
    return found.group(1) if found else None


@pytest.mark.parametrize("alert", [a["alert"] for a in alerts()])
def test_every_alert_has_a_unit_test_that_fires_it_and_one_where_it_stays_silent(alert: str) -> None:
    fires = silent = False
    for case in _unit_test_cases():
        evals = [e for e in case.get("alert_rule_test", []) if e["alertname"] == alert]
        if not evals:
            continue
        expected = {
            e.get("exp_labels", {}).get("namespace") for t in evals for e in t.get("exp_alerts") or []
        }
        fires = fires or bool(expected)
        fed = {_namespace(s["series"]) for s in case["input_series"]}
        # silent: an evaluation that expects nothing, or a deployment fed series that must not alert
        silent = silent or any(not t.get("exp_alerts") for t in evals) or bool(fed - expected)
    assert fires, f"no promtool test makes {alert} fire"
    assert silent, f"no promtool test shows {alert} staying silent on a look-alike"


def test_the_prometheus_rule_carries_the_rule_files_groups() -> None:
    rendered = yaml.safe_load((ROOT / "deploy/k8s/components/monitoring/prometheusrule.yaml").read_text())
    assert rendered["kind"] == "PrometheusRule"
    assert rendered["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    overlay = yaml.safe_load((ROOT / "deploy/k8s/overlays/production/kustomization.yaml").read_text())
    assert "../../components/monitoring" in overlay["components"]


def test_rendered_overlays_include_the_rules_and_the_pod_monitor() -> None:
    rendered_dir = os.environ.get("DEPLOY_RENDERED_DIR")
    if not rendered_dir:
        pytest.skip("run by deploy/validate.sh, which renders the overlays with kustomize")
    for overlay in ("overlays-production", "overlays-example"):
        docs = [d for d in yaml.safe_load_all((Path(rendered_dir) / f"{overlay}.yaml").read_text()) if d]
        kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
        assert ("PrometheusRule", "incident-memory") in kinds and ("PodMonitor", "incident-memory") in kinds
        rule = next(d for d in docs if d["kind"] == "PrometheusRule")
        assert rule["metadata"]["namespace"] == "incident-memory"
        assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


def test_promtool_fails_the_unit_tests_when_a_rule_is_broken(tmp_path: Path) -> None:
    """The unit tests can fail: raise the projector alert's `for` and its firing test must break."""
    promtool = os.environ.get("PROMTOOL")
    if not promtool:
        pytest.skip("run by deploy/validate.sh, which builds promtool (deploy/local/prometheus.py)")
    broken = RULES.read_text().replace(
        "        for: 5m\n        labels:\n          severity: critical\n          service: projector",
        "        for: 45m\n        labels:\n          severity: critical\n          service: projector",
    )
    assert broken != RULES.read_text()
    (tmp_path / "incident-memory.rules.yml").write_text(broken)
    tests = tmp_path / "tests"
    tests.mkdir()
    for path in UNIT_TESTS:
        (tests / path.name).write_text(path.read_text())
    good = subprocess.run([promtool, "test", "rules", *map(str, UNIT_TESTS)], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run(
        [promtool, "test", "rules", *(str(tests / p.name) for p in UNIT_TESTS)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "IncidentMemoryProjectorLagGrowing" in bad.stdout + bad.stderr


# ---- the Grafana dashboard ---------------------------------------------------------------------------

DASHBOARD = MONITORING / "grafana" / "incident-memory.json"


def dashboard_panels() -> list[dict[str, Any]]:
    return [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]


def dashboard_queries() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard_panels() for t in p["targets"]]


def as_promql(expr: str) -> str:
    """A panel's query as Prometheus runs it once Grafana has filled in its variables."""
    return (
        expr.replace("$__rate_interval", "1m")
        .replace("$namespace", ".*")
        .replace("$model_input_budget", "8000")
    )


def test_the_dashboard_is_provisioning_ready_with_a_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "incident-memory" and "id" not in dashboard  # provisioning assigns the id
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    for panel in dashboard_panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and all(t["datasource"] == panel["datasource"] for t in panel["targets"])
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = " | ".join(p["title"] for p in dashboard_panels()).lower()
    for needed in ("throughput", "lag", "latency", "dead letters", "rounds by outcome", "model input tokens",
                   "raw vs in-context tokens per tool", "posts"):  # fmt: skip
        assert needed in titles, needed


def test_every_metric_a_panel_reads_is_exported_by_a_service() -> None:
    exported = exported_metric_names()
    missing = {
        (title, n) for title, expr in dashboard_queries() for n in metric_names_in(expr) if n not in exported
    }
    assert not missing, missing


def test_every_panel_query_parses_in_promtool(tmp_path: Path) -> None:
    """Each query, its variables filled in, as a recording rule: `promtool check rules` parses it."""
    promtool = os.environ.get("PROMTOOL")
    if not promtool:
        pytest.skip("run by deploy/validate.sh, which builds promtool (deploy/local/prometheus.py)")
    records = [
        {"record": f"dashboard:query_{i}", "expr": as_promql(e)}
        for i, (_t, e) in enumerate(dashboard_queries())
    ]
    rules_file = tmp_path / "dashboard.rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    checked = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules_file.write_text(
        yaml.safe_dump({"groups": [{"name": "d", "rules": [{"record": "x:y", "expr": "rate(x[1m]"}]}]})
    )
    assert subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True).returncode != 0


def test_every_rule_and_panel_query_parses_without_promtool() -> None:
    """promql-parser (the boundary's PromQL parser) parses every expression, so a syntax error fails
    `make test-fast` too; promtool, the reference parser, checks the same under validate.sh."""
    import promql_parser

    exprs = [(r.get("alert") or r.get("record"), r["expr"]) for r in rules()]
    exprs += [(title, as_promql(expr)) for title, expr in dashboard_queries()]
    failed = []
    for where, expr in exprs:
        try:
            promql_parser.parse(expr)
        except Exception as exc:  # the parser's own error type is not exported
            failed.append((where, str(exc)))
    assert not failed, failed
    with pytest.raises(Exception):  # noqa: B017 - the parser's own error type is not exported
        promql_parser.parse("sum(rate(compactor_events_total[5m])")
