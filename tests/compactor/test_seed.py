"""The seed incident: its shape, its sizes, and its compaction within budget with every fact."""

from __future__ import annotations

import re

from deploy.local.seed import seed_incident
from schemas.events import canonical_json
from schemas.tokens import count_value_tokens
from services.compaction.registry import DEFAULT_BUDGETS, compact_tool_result

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
    patterns = out.compact["patterns"]
    assert patterns[0] == (  # errors first, with the two pods (of the app's four) they came from
        "198× 03:12:44–03:14:01 [2 of 4 pods: checkout-api-7d9f8b6c5-{m8p3z,x2k4q}] FATAL ERROR: JS heap out of memory"
    )
    # the exporter's OOMKilled events: counted and named (their times are the pod events' digest's;
    # here they go before the larger patterns' times at the default budget)
    assert any(p.startswith("3× ") and "OOMKilled" in p for p in patterns)
    assert any(p.startswith("21× ") and p.endswith("payload cache size=48211 evictions=0") for p in patterns)
    assert out.compact["summary"] == "412 lines, 6 patterns (fatal 198, warn 3, info 211)"
    assert out.compact["window"] == "2026-03-14 03:00:04–03:14:08Z"
    assert out.compact["evidence"] == "1773458070.000100:1:tools:0"
    assert sum(int(p.split("×")[0]) for p in patterns) == 412 and "omitted" not in out.compact


def test_seed_prometheus_trend_and_every_series() -> None:
    """At 250 tokens every pod keeps its memory trend (rising ~33Mi/min from 03:02) and its maximum,
    the raw sample string with the humanized form beside it; every series and sample is counted."""
    s = seed_incident()
    out = compact_tool_result("query_prometheus", s.prometheus, s.alert_context(), budget=250)
    assert out.tokens <= 250
    assert out.compact["summary"] == "4 series, 240 samples" and "omitted" not in out.compact
    assert out.compact["metric"] == "container_memory_working_set_bytes"
    lines = out.compact["series"]
    assert len(lines) == 4
    for series in s.prometheus["data"]["result"]:
        (line,) = [x for x in lines if x.startswith(f"{{pod={series['metric']['pod']}}}: ")]
        top = max(series["values"], key=lambda p: float(p[1]))[1]
        assert re.search(rf"max=last {top} \(\d+Mi\); .*rising ~3[34]Mi/min from 03:02:00", line), line
    assert sum("rising ~33Mi/min from 03:02:00" in x for x in lines) >= 2


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
    out = compact_tool_result("get_pod_events", s.pod_events, s.alert_context(), budget=150)
    assert out.tokens <= 150
    # Items read `N× [first–last] [Warning] Reason objects…`; the count leads every form.
    heads = [re.match(r"^(\d+)×(?: [\d:–]+)?( Warning)? (\S+)", e) for e in out.compact["events"]]
    assert all(heads), out.compact["events"]
    reasons = {m.group(3): (int(m.group(1)), bool(m.group(2))) for m in heads if m}
    assert reasons["OOMKilling"] == (3, True) and reasons["BackOff"] == (15, True)
    omitted = re.match(
        r"^\d+ groups, (\d+) occurrences", out.compact.get("omitted", "0 groups, 0 occurrences")
    )
    assert omitted is not None
    kept = sum(n for n, _ in reasons.values())
    assert kept + int(omitted.group(1)) == sum(i["count"] for i in s.pod_events["items"])


def test_seed_tempo_keeps_the_error_spans() -> None:
    s = seed_incident()
    out = compact_tool_result("query_tempo", s.tempo, s.alert_context(), budget=250)
    assert out.tokens <= 250
    assert out.compact["summary"].startswith("57 spans, 6 services, 5 error spans; root ")
    groups = [g for g in out.compact["groups"] if not g.startswith("critical path")]
    errors = [g for g in groups if " ERROR " in g]
    assert sum(int(g.split("×", 1)[0]) for g in errors) == 5  # every error span, none omitted
    cache = next(g for g in errors if " payload-cache.set ERROR " in g)
    assert '"FATAL ERROR: JS heap out of memory" 411.8ms' in cache
    kept = sum(int(g.split("×", 1)[0]) for g in groups)
    omitted = int(out.compact.get("omitted", "0 groups, 0 spans").split(", ")[1].split(" ")[0])
    assert kept + omitted == 57
