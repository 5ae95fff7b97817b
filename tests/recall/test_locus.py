"""Where an incident hurts: troubled nodes and failing dependencies, read strictly from the raw (pure)."""

from __future__ import annotations

from typing import Any

from schemas.incident_locus import (
    alert_nodes,
    line_dependencies,
    log_dependencies,
    pod_event_hosts,
    pod_event_nodes,
    trace_dependencies,
)
from schemas.incident_profile import (
    Fact,
    alert_facts,
    build_profile,
    loki_facts,
    pod_event_facts,
    tempo_facts,
)

NODE = "ip-10-42-1-17.eu-west-1.compute.internal"


def _event(reason: str, kind: str, name: str, host: str = NODE) -> dict[str, object]:
    return {
        "reason": reason,
        "count": 2,
        "involvedObject": {"kind": kind, "name": name},
        "source": {"host": host},
    }


def test_a_node_is_troubled_by_events_on_the_node_object_never_by_a_pod_scheduled_there() -> None:
    events = {
        "items": [
            _event("OOMKilling", "Pod", "checkout-api-7d9f8b6c5-x2k4q"),
            _event("BackOff", "Pod", "checkout-api-7d9f8b6c5-h6j9n"),
            _event("NodeNotReady", "Node", "ip-10-42-9-3.internal", host="node-controller"),
        ]
    }
    assert pod_event_nodes(events) == {"ip-10-42-9-3.internal": 1}
    facts = pod_event_facts(events)
    assert facts["nodes"] == {"ip-10-42-9-3.internal": 1}
    assert facts["reasons"] == {
        "BackOff": 2,
        "OOMKilling": 2,
    }  # the node's own event is its locus, not a reason
    only_pods = {"items": events["items"][:2]}
    assert pod_event_facts(only_pods) == {"reasons": {"BackOff": 2, "OOMKilling": 2}, "hosts": {NODE: 2}}
    assert "nodes" not in pod_event_facts(only_pods)  # where the pods ran is not trouble


def test_the_pods_hosts_are_the_nodes_of_their_warning_events_never_a_node_objects_event() -> None:
    """Kubelet events name the node their pod ran on (`source.host`): recorded apart from the troubled nodes,
    from Warning events only (a pod merely started somewhere is no part of the incident)."""
    other = "ip-10-42-2-9.internal"
    events = {
        "items": [
            {**_event("BackOff", "Pod", "checkout-api-7d9f8b6c5-x2k4q"), "type": "Warning"},
            {**_event("Unhealthy", "Pod", "checkout-api-7d9f8b6c5-h6j9n"), "type": "Warning"},
            {**_event("Started", "Pod", "checkout-api-7d9f8b6c5-zzzzz", host=other), "type": "Normal"},
            {**_event("NodeNotReady", "Node", other, host="node-controller"), "type": "Warning"},
            {"reason": "FailedScheduling", "type": "Warning", "involvedObject": {"kind": "Pod", "name": "p"}},
        ]
    }
    assert pod_event_hosts(events) == {NODE: 2}
    facts = pod_event_facts(events)
    assert facts["hosts"] == {NODE: 2} and facts["nodes"] == {other: 1}
    assert pod_event_hosts({"items": "not a list"}) == {} and pod_event_hosts(None) == {}


def test_a_node_alert_names_its_node_another_alert_does_not() -> None:
    labels = {"node": "ip-10-0-3-17", "instance": "10.0.3.17:9100", "service": "node-exporter"}
    assert alert_nodes("KubeNodeNotReady", labels) == ["10.0.3.17", "ip-10-0-3-17"]
    assert alert_nodes("KubePodOOMKilled", labels) == []
    assert alert_facts({"labels": labels}, "NodeFilesystemSpaceFillingUp", "node-exporter", "firing")[
        "nodes"
    ] == {
        "10.0.3.17": 1,
        "ip-10-0-3-17": 1,
    }
    assert "nodes" not in alert_facts({"labels": labels}, "KubePodOOMKilled", "checkout", "firing")


def test_a_dependency_fails_in_error_lines_about_connections_only() -> None:
    assert line_dependencies("ERROR dial tcp pg-orders.core.svc:5432: connect: connection refused") == [
        "pg-orders.core.svc"
    ]
    assert line_dependencies("error upstream connect error host=payments-api reset by peer") == [
        "payments-api"
    ]
    assert line_dependencies('level=error msg="connect failed" addr=10.0.0.7:6379') == ["10.0.0.7"]
    assert line_dependencies("ERROR GET http://catalog:8080/items timed out, connection refused") == [
        "catalog"
    ]
    assert (
        line_dependencies("ERROR request to heap failed: deadline exceeded after 30ms") == []
    )  # no connection
    raw = {"data": {"result": [{"stream": {}, "values": [
        ["1", "ERROR dial tcp pg-orders:5432: connect: connection refused"],
        ["2", "ERROR dial tcp pg-orders:5432: connect: connection refused"],
        ["3", "INFO connected to cache-main:6379"],  # healthy: not an error line
    ]}]}}  # fmt: skip
    facts = loki_facts(raw)
    assert facts["dependencies"] == {"pg-orders": 2}
    assert list(facts["patterns"]) == ["error dial tcp pg-orders:<n>: connect: connection refused",
                                       "info connected to cache-main:<n>"]  # fmt: skip
    assert log_dependencies(["ERROR dial tcp pg-orders:5432: connect: connection refused"]) == {
        "pg-orders": 1
    }


def test_a_scatter_of_peers_each_named_once_is_no_failing_dependency() -> None:
    """A server logs a reset for every client that hangs up, each from another address: none is a place in
    trouble; the dependency every call fails to reach is, beside them."""
    resets = [f"ERROR connection reset by peer host=10.0.{i}.{i * 7}" for i in range(5)]
    assert log_dependencies(resets) == {}
    down = ["ERROR dial tcp pg-orders:5432: connect: connection refused"] * 3
    assert log_dependencies(resets + down) == {"pg-orders": 3}


def test_a_trace_names_the_peers_of_failed_client_spans_only() -> None:
    def span(peer: str, kind: object, code: object) -> dict[str, object]:
        return {"kind": kind, "status": {"code": code},
                "attributes": [{"key": "peer.service", "value": {"stringValue": peer}}]}  # fmt: skip

    trace = {"batches": [{"scopeSpans": [{"spans": [
        span("pg-orders", 3, 2), span("redis", "SPAN_KIND_CLIENT", "STATUS_CODE_ERROR"),
        span("catalog", 3, 0), span("checkout", 2, 2),  # a healthy call; a failed server span of its own
    ]}]}]}  # fmt: skip
    assert trace_dependencies(trace) == {"pg-orders": 1, "redis": 1}
    assert tempo_facts(trace) == {"dependencies": {"pg-orders": 1, "redis": 1}}
    assert tempo_facts({"batches": []}) == {}
    assert trace_dependencies({"resourceSpans": [{"scopeSpans": [{"spans": [span("x", 3, 2)]}]}]}) == {"x": 1}
    envoy = {"kind": 3, "status": {"code": 2}, "attributes": [
        {"key": "upstream.cluster", "value": {"stringValue": "checkout-api"}}]}  # fmt: skip
    assert trace_dependencies({"batches": [{"scopeSpans": [{"spans": [envoy]}]}]}) == {"checkout-api": 1}


def test_the_profile_keeps_loci_most_reported_first_whatever_the_order_of_facts() -> None:
    facts = [
        Fact(
            "T:1:tools:0",
            "tool",
            "2026-03-14T03:16:00+00:00",
            {"patterns": {}, "dependencies": {"pg": 3, "mq": 1}},
        ),
        Fact("T:1:tools:1", "tool", "2026-03-14T03:17:00+00:00", {"dependencies": {"mq": 5}}),
        Fact("T:1:tools:2", "tool", "2026-03-14T03:18:00+00:00", {"reasons": {}, "nodes": {NODE: 1}}),
    ]
    facts.append(
        Fact("T:1:tools:3", "tool", "2026-03-14T03:19:00+00:00", {"reasons": {}, "hosts": {"ip-b": 2}})
    )
    profile = build_profile("T", facts)
    assert profile.dependencies == ("mq", "pg") and profile.nodes == (NODE,) and profile.hosts == ("ip-b",)
    assert build_profile("T", list(reversed(facts))) == profile


def test_the_projector_reads_loci_of_tempo_and_loki_results_and_redacts_a_host_that_is_a_secret() -> None:
    """A trace is a fact now; a dependency's host reaches other threads' recall, so it passes the redactor."""
    from datetime import UTC, datetime

    from schemas.events import CompactedToolResult
    from schemas.ids import message_id
    from services.projector.profile_facts import profile_facts

    def result(tool: str, raw: Any, i: int) -> CompactedToolResult:
        return CompactedToolResult(
            thread_ts="T1", message_id=message_id("T1", 1, "tools", i), event_time=datetime(2026, 3, 14, tzinfo=UTC),
            round=1, tool_call_id=f"call_{i}", tool=tool, args={}, raw=raw, compact={}, tokens=1, raw_tokens=1,
            raw_sha256="0" * 64, compactor_version="t", budget=400,
        )  # fmt: skip

    trace = {"batches": [{"scopeSpans": [{"spans": [{"kind": 3, "status": {"code": 2}, "attributes": [
        {"key": "peer.service", "value": {"stringValue": "pg-orders"}}]}]}]}]}  # fmt: skip
    (fact,) = profile_facts(result("get_trace", trace, 0))
    assert fact.kind == "tool" and '"dependencies":{"pg-orders":1}' in fact.facts
    token = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"
    line = f"ERROR dial tcp {token}:443: connect: connection refused"
    (fact,) = profile_facts(
        result("query_loki", {"data": {"result": [{"stream": {}, "values": [["1", line]]}]}}, 1)
    )
    assert token not in fact.facts and "REDACTED" in fact.facts
    events = {"items": [_event("BackOff", "Pod", "api-1", host=token), _event("NodeNotReady", "Node", token)]}
    (fact,) = profile_facts(result("get_pod_events", events, 2))  # a node's name reaches recall too
    assert (
        token not in fact.facts
        and '"hosts":{"[REDACTED' in fact.facts
        and '"nodes":{"[REDACTED' in fact.facts
    )
