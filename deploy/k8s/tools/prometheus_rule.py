"""Wrap deploy/monitoring/incident-memory.rules.yml in a PrometheusRule (the Prometheus Operator's CRD).

    python deploy/k8s/tools/prometheus_rule.py           writes deploy/k8s/components/monitoring/prometheusrule.yaml
    python deploy/k8s/tools/prometheus_rule.py --check   exits 1 when that file is not the rule file's groups

One source of truth: the rule file is what promtool checks and unit-tests; the PrometheusRule carries
the same groups byte for byte in meaning (tests/deploy/test_alert_rules.py compares them).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "monitoring" / "incident-memory.rules.yml"
OUT = ROOT / "deploy" / "k8s" / "components" / "monitoring" / "prometheusrule.yaml"
HEADER = (
    "# GENERATED from deploy/monitoring/incident-memory.rules.yml by deploy/k8s/tools/prometheus_rule.py:\n"
    "# edit the rule file, then run the tool. Your Prometheus selects it by its ruleSelector (EDIT the\n"
    "# labels in components/monitoring/kustomization.yaml to match).\n"
)


class _BlockDumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML ships no type hints
    """Multi-line PromQL stays a literal block (`|`), as written in the rule file."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def prometheus_rule(rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "incident-memory", "labels": {"app.kubernetes.io/part-of": "incident-memory"}},
        "spec": {"groups": rules["groups"]},
    }


def render() -> str:
    rules = yaml.safe_load(RULES.read_text())
    body: str = yaml.dump(
        prometheus_rule(rules), Dumper=_BlockDumper, sort_keys=False, width=1000, allow_unicode=True
    )
    return HEADER + body


def main(argv: list[str]) -> int:
    text = render()
    if argv == ["--check"]:
        if OUT.read_text() != text:
            print(
                f"{OUT.relative_to(ROOT)} is stale: run python {Path(__file__).relative_to(ROOT)}",
                file=sys.stderr,
            )
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
