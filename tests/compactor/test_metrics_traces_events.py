"""Prometheus, Tempo, pod events, passthrough: facts survive, numbers copied as they appear."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import canonical_json
from services.compactor import prometheus, tempo
from services.compactor.registry import RawFormatError, compact_tool_result
from services.compactor.timefmt import hhmm_from_unix
from services.seed.generators import (
    SpanSpec,
    generate_events,
    generate_prometheus,
    generate_tempo,
    ns_at,
    tempo_response,
)

BIG = 1_000_000


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6), st.integers(1, 80))
def test_every_series_min_max_last_survive(seed: int, series: int, points: int) -> None:
    raw = generate_prometheus(seed, series=series, points=points)
    out = compact_tool_result("query_prometheus", raw, {}, budget=BIG)
    assert len(out.compact["series"]) == series
    for got, src in zip(out.compact["series"], raw["data"]["result"], strict=True):
        values = src["values"]
        lo = min(values, key=lambda p: float(p[1]))
        hi = max(values, key=lambda p: float(p[1]))
        assert got["min"][1] == lo[1] and float(got["min"][1]) == float(lo[1])
        assert got["max"][1] == hi[1]
        assert got["last"][:2] == values[-1]
        assert got["last"][3] == hhmm_from_unix(values[-1][0])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12), st.integers(120, 700))
def test_prometheus_under_pressure_keeps_counts(seed: int, series: int, budget: int) -> None:
    raw = generate_prometheus(seed, series=series, points=30)
    try:
        out = compact_tool_result("query_prometheus", raw, {}, budget=budget)
    except Exception as exc:  # a refusal must be the budget error, nothing else
        assert type(exc).__name__ == "BudgetExceeded"
        return
    kept = sum(1 for _ in out.compact["series"])
    assert kept + out.compact.get("omitted", {}).get("series", 0) == series


def test_trend_shapes() -> None:
    t0 = 1_773_457_200
    rising = [(t0 + 15 * i, str(100 * 2**20 + max(0, i - 8) * 8_650_752), 0.0) for i in range(60)]
    rising = [(t, v, float(v)) for t, v, _ in rising]
    assert prometheus.trend(rising, as_bytes=True) == "rising ~33Mi/min from 03:02"
    flat = [(t0 + 15 * i, "5", 5.0) for i in range(10)]
    assert prometheus.trend(flat, as_bytes=False) == "flat"
    falling = [(t0 + 60 * i, str(1000 - 10 * i), float(1000 - 10 * i)) for i in range(10)]
    assert prometheus.trend(falling, as_bytes=False).startswith("falling ~10/min from 03:00")


def test_humanized_beside_never_instead() -> None:
    raw = {
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"__name__": "container_memory_working_set_bytes"},
                    "values": [[1773457200, "536870912"], [1773457215, "536870913"]],
                }
            ],
        }
    }
    out = compact_tool_result("query_prometheus", raw, {}, budget=BIG)
    assert out.compact["series"][0]["max"] == [1773457215, "536870913", "512Mi", "03:00"]


def test_prometheus_rejects_vectors() -> None:
    with pytest.raises(RawFormatError):
        compact_tool_result("query_prometheus", {"data": {"resultType": "vector", "result": []}}, {})


def test_tempo_critical_path_and_errors() -> None:
    ms = 1_000_000
    t = ns_at(3, 12)
    specs = [
        SpanSpec("r", "", "gw", "root", t, t + 100 * ms),
        SpanSpec("a", "r", "api", "fast", t + 1 * ms, t + 10 * ms),
        SpanSpec("b", "r", "api", "slow", t + 2 * ms, t + 99 * ms),
        SpanSpec("c", "b", "db", "query", t + 3 * ms, t + 98 * ms),
        SpanSpec("e", "a", "api", "broken", t + 2 * ms, t + 4 * ms, error="boom 42"),
    ]
    raw = tempo_response("t" * 32, specs, {})
    path = [s.span_id for s in tempo.critical_path(tempo.parse(raw))]
    assert path == ["r", "b", "c"]
    out = compact_tool_result("query_tempo", raw, {}, budget=BIG)
    names = [s["name"] for s in out.compact["spans"]]
    assert set(names) == {"root", "slow", "query", "broken"}
    broken = next(s for s in out.compact["spans"] if s["name"] == "broken")
    assert broken["status"] == "ERROR" and broken["message"] == "boom 42" and broken["ms"] == 2.0


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(0, 5))
def test_tempo_error_spans_survive(seed: int, spans: int, errors: int) -> None:
    raw = generate_tempo(seed, spans=spans, errors=errors)
    out = compact_tool_result("query_tempo", raw, {}, budget=BIG)
    messages = [s.get("message") for s in out.compact["spans"] if s.get("status") == "ERROR"]
    expected = [
        sp["status"]["message"]
        for b in raw["batches"]
        for sc in b["scopeSpans"]
        for sp in sc["spans"]
        if sp["status"]["code"] == 2
    ]
    assert sorted(messages) == sorted(expected)


def test_tempo_rejects_non_traces() -> None:
    with pytest.raises(RawFormatError):
        compact_tool_result("query_tempo", {"spans": []}, {})


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 50))
def test_pod_events_counts_and_first_last(seed: int, events: int) -> None:
    raw = generate_events(seed, events=events)
    out = compact_tool_result("get_pod_events", raw, {}, budget=BIG)
    groups: dict[tuple[str, str], list[dict]] = {}
    for item in raw["items"]:
        groups.setdefault((item["reason"], item["involvedObject"]["name"]), []).append(item)
    got = {(e["reason"], e["object"].split("/", 1)[1]): e for e in out.compact["events"]}
    assert set(got) == set(groups)
    for key, items in groups.items():
        assert got[key]["count"] == sum(i["count"] for i in items)
        assert got[key]["first"] == min(i["firstTimestamp"] for i in items)
        assert got[key]["last"] == max(i["lastTimestamp"] for i in items)


def test_pod_events_reject_other_kinds() -> None:
    with pytest.raises(RawFormatError):
        compact_tool_result("get_pod_events", {"kind": "PodList", "items": []}, {})


def test_passthrough_whole_when_it_fits_and_marked_when_not() -> None:
    small = compact_tool_result("some_tool", {"answer": 42}, {"evidence_id": "T:1:tools:0"})
    assert small.compact["value"] == {"answer": 42}
    big_raw = {"rows": [{"i": i, "name": f"row-{i}"} for i in range(2000)]}
    big = compact_tool_result("some_tool", big_raw, {"evidence_id": "T:1:tools:0"}, budget=200)
    assert big.tokens <= 200 and big.compact["truncated"] is True
    assert "get_evidence(T:1:tools:0)" in big.compact["text"]
    assert canonical_json(big_raw).startswith(big.compact["text"].split(" …[truncated")[0])
