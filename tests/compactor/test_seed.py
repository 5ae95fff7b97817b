"""The seed incident: its shape, its sizes, and its compaction within budget with every fact."""

from __future__ import annotations

from schemas.events import canonical_json
from schemas.tokens import count_value_tokens
from services.compactor.registry import DEFAULT_BUDGETS, compact_tool_result
from services.seed import seed_incident

TOOLS = ("query_loki", "query_prometheus", "get_pod_events", "query_tempo")


def test_seed_is_deterministic() -> None:
    a, b = seed_incident(), seed_incident()
    for tool in TOOLS:
        assert canonical_json(a.raw_for(tool)) == canonical_json(b.raw_for(tool))
    assert canonical_json(a.alertmanager_webhook) == canonical_json(b.alertmanager_webhook)


def test_seed_loki_shape_and_size() -> None:
    s = seed_incident()
    lines = sorted((int(ns), line) for st in s.loki["data"]["result"] for ns, line in st["values"])
    assert len(lines) == 412
    fatal = [ns for ns, line in lines if line == "FATAL ERROR: JS heap out of memory"]
    assert len(fatal) == 198
    assert sum("OOMKilled" in line for _, line in lines) == 3
    assert sum(line == "payload cache size=48211 evictions=0" for _, line in lines) == 21
    assert 21_400 * 0.95 <= count_value_tokens(s.loki) <= 21_400 * 1.05
    assert all(ns // 10**9 // 86400 == 1_773_446_400 // 86400 for ns, _ in lines)  # all on 2026-03-14


def test_seed_other_raws() -> None:
    s = seed_incident()
    series = s.prometheus["data"]["result"]
    assert len(series) == 4 and all(len(x["values"]) == 60 for x in series)
    assert len(s.pod_events["items"]) == 30
    assert 10_000 <= count_value_tokens(s.tempo) <= 14_000
    assert sum(count_value_tokens(s.raw_for(t)) for t in TOOLS) > 40_000
    alert = s.alertmanager_webhook["alerts"][0]
    assert s.alertmanager_webhook["version"] == "4" and alert["labels"]["service"] == "checkout-api"
    assert alert["startsAt"].startswith("2026-03-14T03:") and alert["fingerprint"]
    assert [h.mention for h in s.humans] == [False, False, False, False, True]


def test_seed_loki_compacts_to_300_with_every_fact() -> None:
    s = seed_incident()
    out = compact_tool_result("query_loki", s.loki, s.alert_context("1773458070.000100:1:tools:0"))
    assert DEFAULT_BUDGETS["query_loki"] <= 300
    assert out.tokens <= 300
    patterns = {p.get("line"): p for p in out.compact["patterns"]}
    fatal = patterns["FATAL ERROR: JS heap out of memory"]
    assert (fatal["n"], fatal["first"], fatal["last"]) == (
        198,
        "2026-03-14T03:12:44.187Z",
        "2026-03-14T03:14:01.902Z",
    )
    oom = next(p for p in out.compact["patterns"] if "OOMKilled" in p.get("line", ""))
    assert oom["n"] == 3
    assert patterns["payload cache size=48211 evictions=0"]["n"] == 21
    assert out.compact["summary"] == "412 lines, 6 distinct patterns"
    assert out.compact["more"] == "get_evidence(1773458070.000100:1:tools:0)"
    kept = sum(p["n"] for p in out.compact["patterns"])
    assert kept + out.compact["omitted"]["lines"] == 412


def test_seed_prometheus_trend_and_every_series() -> None:
    s = seed_incident()
    out = compact_tool_result("query_prometheus", s.prometheus, s.alert_context())
    assert len(out.compact["series"]) == 4
    assert sum(x["trend"] == "rising ~33Mi/min from 03:02" for x in out.compact["series"]) >= 2
    assert all(
        x["trend"].startswith("rising ~3") and x["trend"].endswith("from 03:02")
        for x in out.compact["series"]
    )


def test_seed_all_four_fit_their_budgets() -> None:
    s = seed_incident()
    raw = compact = 0
    for tool in TOOLS:
        out = compact_tool_result(tool, s.raw_for(tool), s.alert_context())
        assert out.tokens <= DEFAULT_BUDGETS[tool]
        raw += out.raw_tokens
        compact += out.tokens
    assert raw / compact > 15


def test_seed_events_keep_oom_and_backoff() -> None:
    s = seed_incident()
    out = compact_tool_result("get_pod_events", s.pod_events, s.alert_context())
    reasons = {e["reason"]: e for e in out.compact["events"]}
    assert reasons["OOMKilling"]["count"] == 3 and reasons["BackOff"]["count"] == 15
    kept = sum(e["count"] for e in out.compact["events"])
    assert kept + out.compact.get("omitted", {}).get("occurrences", 0) == sum(
        i["count"] for i in s.pod_events["items"]
    )


def test_seed_tempo_keeps_the_error_spans() -> None:
    s = seed_incident()
    out = compact_tool_result("query_tempo", s.tempo, s.alert_context())
    errors = [x for x in out.compact["spans"] if x.get("status") == "ERROR"]
    assert len(errors) == 5
    cache = next(x for x in errors if x["name"] == "payload-cache.set")
    assert cache["message"] == "FATAL ERROR: JS heap out of memory" and cache["ms"] == 411.8
