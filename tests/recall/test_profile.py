"""The incident profile: pure extraction of facts, and a profile that depends on the set of facts only."""

from __future__ import annotations

import random

from schemas.incident_profile import (
    Fact,
    build_profile,
    decisions,
    loki_facts,
    pod_event_facts,
    prometheus_facts,
    series_shape,
    skeleton,
)


def test_skeleton_masks_ids_numbers_and_times_but_keeps_the_words() -> None:
    a = skeleton(
        "2026-03-14T03:12:44.187Z FATAL ERROR: JS heap out of memory pod=checkout-api-7d9f8b6c5-x2k4q took 512ms"
    )
    b = skeleton(
        "2026-03-14T03:14:01.902Z FATAL ERROR: JS heap out of memory pod=checkout-api-7d9f8b6c5-h6j9n took 7ms"
    )
    assert a == b
    assert "js heap out of memory" in a and "512" not in a and "x2k4q" not in a
    assert (
        skeleton('{"level":"error","msg":"upstream 10.0.0.7:5432 refused"}') == "error upstream <ip> refused"
    )
    assert skeleton('ts=1 level=warn msg="cache evictions=0"') == "warn cache evictions=<n>"


def test_decisions_are_the_clauses_people_wrote() -> None:
    text = "rolled one pod back to 3.13.2 as a canary; then we raised the limit to 1Gi. Nothing else."
    assert decisions(text) == ["rolled one pod back to 3.13.2 as a canary", "raised the limit to 1Gi"]
    assert decisions("prod config has no maxEntries for the payload cache") == []


def test_tool_facts_count_patterns_reasons_and_shapes() -> None:
    raw = {"data": {"result": [{"stream": {}, "values": [["1", "GET /a 200 in 5ms"], ["2", "GET /b 200 in 9ms"],
                                                           ["3", "FATAL ERROR: JS heap out of memory"]]}]}}  # fmt: skip
    patterns = loki_facts(raw)["patterns"]
    assert list(patterns) == ["fatal error: js heap out of memory", "get /a <n> in <n>", "get /b <n> in <n>"]
    events = {
        "items": [
            {"reason": "OOMKilling", "count": 3},
            {"reason": "BackOff"},
            {"reason": "OOMKilling", "count": 2},
        ]
    }
    assert pod_event_facts(events) == {"reasons": {"BackOff": 1, "OOMKilling": 5}}
    matrix = {"data": {"result": [{"metric": {"__name__": "mem"}, "values": [[i, str(i * 10)] for i in range(9)]},
                                  {"metric": {"__name__": "cpu"}, "values": [[i, "1"] for i in range(9)]}]}}  # fmt: skip
    assert prometheus_facts(matrix) == {"shapes": ["mem:rising"]}
    assert series_shape([1, 1, 9, 1, 1, 1]) == "spike"


def test_the_profile_is_a_function_of_the_set_of_facts() -> None:
    facts = [
        Fact("T:-:alert:0", "alert", "2026-03-14T03:15:00+00:00",
             {"alertname": "KubePodOOMKilled", "labels": {"service": "checkout-api"}, "status": "firing"}),
        Fact("T:-:human:1", "human", "2026-03-14T03:20:00+00:00",
             {"text": "rolled back to 3.13.2", "decisions": ["rolled back to 3.13.2"]}),
        Fact("T:1:tools:0", "tool", "2026-03-14T03:16:00+00:00", {"patterns": {"fatal error: oom": 198}}),
        Fact("T:1:tools:1", "tool", "2026-03-14T03:17:00+00:00", {"reasons": {"OOMKilling": 3}}),
        Fact("T:1:hypothesis:0", "claims", "2026-03-14T03:18:00+00:00", {"claims": ["heap grows"]}),
        Fact("T:1:judge:0", "verdict", "2026-03-14T03:19:00+00:00",
             {"grounded": True, "hypothesis_id": "T:1:hypothesis:0"}),
        Fact("T:-:channel:C0PAY.group", "channel", "2026-03-14T03:20:00+00:00", {"channel": "C0PAY", "private": True}),
        Fact("T:-:alert:resolved", "alert", "2026-03-14T04:00:00+00:00",
             {"alertname": "KubePodOOMKilled", "labels": {"service": "checkout-api"}, "status": "resolved"}),
    ]  # fmt: skip
    profile = build_profile("T", facts)
    shuffled = list(facts)
    random.Random(7).shuffle(shuffled)
    assert build_profile("T", shuffled) == profile
    assert profile.alertname == "KubePodOOMKilled" and profile.labels["service"] == "checkout-api"
    assert profile.error_patterns == ("fatal error: oom",) and profile.reasons == {"OOMKilling": 3}
    assert profile.claims == ("heap grows",) and profile.decisions == ("rolled back to 3.13.2",)
    assert profile.channel == "C0PAY" and profile.private
    assert (
        profile.opened_at == "2026-03-14T03:15:00+00:00"
        and profile.resolved_at == "2026-03-14T04:00:00+00:00"
    )
    rejected = [f for f in facts if f.kind != "verdict"]
    assert build_profile("T", rejected).claims == ()  # claims count only once the judge accepted them
