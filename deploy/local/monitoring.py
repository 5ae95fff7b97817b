"""The monitoring files as a live Prometheus runs them in `make test-integration` (dev tool, never shipped).

Pure functions, so `make test-fast` checks them without a Prometheus:
- `panel_queries`: every PromQL of the Grafana dashboard, its variables substituted as Grafana would.
- `scaled_alerts`: the alert group of the production rule file with every duration (`for:`, range and
  subquery windows) divided by one factor. The production windows (5 to 60 minutes) would make a live
  test wait as long; dividing all of them by the same factor keeps every rule's shape (the ratio of its
  `for` to its windows) while the fault fires within a minute. The SLO recording rules stay as shipped.
- `prometheus_config`: one job per service, its target labelled `namespace` and `container` as the
  PodMonitor's relabelling would, with the rule files to evaluate.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "monitoring" / "incident-memory.rules.yml"
DASHBOARD = ROOT / "deploy" / "monitoring" / "grafana" / "incident-memory.json"
ALERT_GROUP = "incident-memory.alerts"
SLO_GROUP = "incident-memory.slo"

_UNIT_S = {"s": 1, "m": 60, "h": 3600}
_DURATION = re.compile(r"^(\d+)([smh])$")
_WINDOW = re.compile(r"\[(\d+[smh])(?::(\d+[smh]))?\]")
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class PanelQuery:
    panel: str  # the panel's title
    ref_id: str
    expr: str  # variables substituted


def seconds(duration: str) -> int:
    match = _DURATION.match(duration)
    if match is None:
        raise ValueError(f"not a simple duration: {duration!r}")
    return int(match[1]) * _UNIT_S[match[2]]


def scale_duration(duration: str, factor: int) -> str:
    """`5m` / 15 -> `20s`; a duration the factor does not divide is an error, never a rounding."""
    total = seconds(duration)
    if total % factor:
        raise ValueError(f"{duration} is not a whole number of seconds divided by {factor}")
    return f"{total // factor}s"


def scale_expr(expr: str, factor: int) -> str:
    """Every `[window]` and `[window:resolution]` of a PromQL expression divided by `factor`."""

    def one(match: re.Match[str]) -> str:
        window = scale_duration(match[1], factor)
        return f"[{window}:{scale_duration(match[2], factor)}]" if match[2] else f"[{window}]"

    return _WINDOW.sub(one, expr)


def scaled_alerts(rules: dict[str, Any], factor: int) -> dict[str, Any]:
    """The alert group of `rules` with its durations divided by `factor` (module docstring)."""
    (group,) = [copy.deepcopy(g) for g in rules["groups"] if g["name"] == ALERT_GROUP]
    for rule in group["rules"]:
        rule["expr"] = scale_expr(rule["expr"], factor)
        if "for" in rule:
            rule["for"] = scale_duration(rule["for"], factor)
    return {"groups": [group]}


def slo_rules(rules: dict[str, Any]) -> dict[str, Any]:
    """The SLO recording rules as shipped."""
    return {"groups": [copy.deepcopy(g) for g in rules["groups"] if g["name"] == SLO_GROUP]}


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Grafana's `$name` / `${name}` replaced; an unknown variable is an error (the panel would break)."""

    def one(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        if name not in variables:
            raise KeyError(f"dashboard variable ${name} has no value here")
        return variables[name]

    return _VARIABLE.sub(one, expr)


def panel_queries(dashboard: dict[str, Any], variables: dict[str, str]) -> list[PanelQuery]:
    """Every target of every panel (rows' nested panels too), substituted."""
    panels = list(dashboard.get("panels") or [])
    found: list[PanelQuery] = []
    while panels:
        panel = panels.pop(0)
        panels.extend(panel.get("panels") or [])
        for target in panel.get("targets") or []:
            if target.get("expr"):
                found.append(
                    PanelQuery(
                        str(panel["title"]),
                        str(target.get("refId", "")),
                        substitute(target["expr"], variables),
                    )
                )
    return found


def prometheus_config(
    ports: dict[str, int], namespace: str, rule_files: list[Path], interval_s: int = 1
) -> dict[str, Any]:
    """A Prometheus configuration scraping each service's `/metrics` (`ports`: container -> port)."""
    return {
        "global": {"scrape_interval": f"{interval_s}s", "evaluation_interval": f"{interval_s}s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {
                "job_name": container,
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{port}"],
                        "labels": {"namespace": namespace, "container": container},
                    }
                ],
            }
            for container, port in ports.items()
        ],
    }


def load_rules(path: Path = RULES) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded
