"""Playbooks (services/agent/playbooks.py): validated data, chosen by labels, filled without guessing."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.local.seed import seed_incident
from services.agent.playbooks import (
    DEFAULT_FILE,
    PLAYBOOKS_ENV,
    alert_labels,
    choose,
    load_playbooks,
    parse_playbooks,
    plan_calls,
)
from services.runtime.errors import UserFacingError

OFFERED = {
    "query_loki": {"query", "start", "end", "limit"},
    "query_prometheus": {"query", "start", "end", "step"},
    "get_pod_events": {"namespace", "pod"},
}
WINDOW = ("2026-03-14T03:02:00+00:00", "2026-03-14T03:17:00+00:00")


def test_the_default_file_validates_and_covers_the_common_alerts() -> None:
    book = parse_playbooks(DEFAULT_FILE.read_text(), str(DEFAULT_FILE))
    expected = {
        "KubePodOOMKilled": "kube-oom",
        "KubeContainerOOMKilled": "kube-oom",
        "KubePodCrashLooping": "kube-crashloop",
        "KubePodNotReady": "kube-pod-not-ready",
        "HighErrorRate": "http-errors",
        "Checkout5xxHigh": "http-errors",
        "HighLatency": "http-latency",
        "TargetDown": "target-down",
        "NodeMemoryPressure": "node-pressure",
        "KubeNodeNotReady": "node-pressure",
        "KubeDeploymentReplicasMismatch": "kube-deployment-replicas",
        "SomethingNobodyPlannedFor": "fallback",
    }
    for alertname, name in expected.items():
        chosen = choose(book, alertname, {"alertname": alertname})
        assert chosen is not None and chosen.name == name, alertname


def test_the_seed_alert_gets_logs_series_and_events_in_its_window() -> None:
    seed = seed_incident()
    webhook = seed.alertmanager_webhook
    row = {"alertname": "KubePodOOMKilled", "service": "checkout-api", "alert": webhook}
    alertname, labels = alert_labels(row)
    playbook = choose(load_playbooks({}), alertname, labels)
    assert playbook is not None
    plan = plan_calls(playbook, labels, WINDOW, OFFERED)
    assert plan.skipped == []
    assert plan.calls == [
        ("query_loki", {"query": '{namespace="shop"}', "limit": 5000, "start": WINDOW[0], "end": WINDOW[1]}),
        (
            "query_prometheus",
            {
                "query": 'container_memory_working_set_bytes{namespace="shop",container="checkout-api"}',
                "step": "15s",
                "start": WINDOW[0],
                "end": WINDOW[1],
            },
        ),
        ("get_pod_events", {"namespace": "shop"}),
    ]


def test_an_unplanned_alert_gets_its_containers_request_rates_only_when_it_names_a_container() -> None:
    book = load_playbooks({})
    labels = {"alertname": "IngestWebhooksUnauthorized", "namespace": "im", "container": "ingest"}
    playbook = choose(book, "IngestWebhooksUnauthorized", labels)
    assert playbook is not None and playbook.name == "fallback"
    plan = plan_calls(playbook, labels, WINDOW, OFFERED)
    assert [tool for tool, _ in plan.calls] == ["query_loki", "query_prometheus", "get_pod_events"]
    assert (
        plan.calls[1][1]["query"]
        == 'rate({__name__=~".+_requests_total",namespace="im",container="ingest"}[5m])'
    )
    without = plan_calls(playbook, {"namespace": "im"}, WINDOW, OFFERED)
    assert [tool for tool, _ in without.calls] == ["query_loki", "get_pod_events"]
    assert without.skipped == ["query_prometheus: the alert has no label 'container'"]


def test_a_missing_label_or_tool_skips_the_call_and_says_why() -> None:
    book = load_playbooks({})
    playbook = choose(book, "KubePodCrashLooping", {"alertname": "KubePodCrashLooping", "namespace": "shop"})
    assert playbook is not None
    plan = plan_calls(playbook, {"namespace": "shop"}, WINDOW, {"get_pod_events": {"namespace", "pod"}})
    assert plan.calls == []
    assert plan.skipped == [
        "query_loki: not offered",
        "query_prometheus: not offered",
        "get_pod_events: the alert has no label 'pod'",
    ]


def test_label_values_cannot_break_out_of_a_quoted_matcher() -> None:
    book = load_playbooks({})
    playbook = choose(book, "KubePodOOMKilled", {})
    assert playbook is not None
    labels = {"namespace": 'shop"} or {namespace=~".+', "container": "c"}
    plan = plan_calls(playbook, labels, None, OFFERED)
    assert plan.calls[0] == (
        "query_loki",
        {"query": '{namespace="shop\\"} or {namespace=~\\".+"}', "limit": 5000},
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("playbooks: [", "not YAML"),
        ("playbooks: []", "playbooks: List should have at least 1 item"),
        ("playbooks:\n  - name: Bad Name\n    calls: [{tool: x}]", "playbooks.0.name"),
        ("playbooks:\n  - name: a\n    calls: []", "playbooks.0.calls"),
        (
            "playbooks:\n  - name: a\n    match: {labels: {x: '('}}\n    calls: [{tool: x}]",
            "bad regular expression",
        ),
        ("playbooks:\n  - name: a\n    calls: [{tool: x, arg: 1}]", "playbooks.0.calls.0.arg"),
        ("playbooks:\n  - {name: a, calls: [{tool: x}]}\n  - {name: a, calls: [{tool: y}]}", "unique"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_problem(text: str, error: str) -> None:
    with pytest.raises(UserFacingError) as raised:
        parse_playbooks(text, "p.yaml")
    message = str(raised.value)
    assert error in message and "\n" not in message and message.startswith("playbooks p.yaml: ")


def test_the_file_is_taken_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("playbooks:\n  - name: only\n    calls: [{tool: get_pod_events, args: {namespace: x}}]\n")
    book = load_playbooks({PLAYBOOKS_ENV: str(path)})
    assert [p.name for p in book.playbooks] == ["only"]
    with pytest.raises(UserFacingError, match="cannot read"):
        load_playbooks({PLAYBOOKS_ENV: str(tmp_path / "missing.yaml")})
