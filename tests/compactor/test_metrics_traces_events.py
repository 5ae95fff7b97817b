"""Prometheus, Tempo, pod events, passthrough: facts survive, numbers copied as they appear."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.local.seed.generators import (
    SpanSpec,
    generate_events,
    generate_prometheus,
    generate_tempo,
    ns_at,
    tempo_response,
)
from schemas.events import canonical_json
from services.compaction import prometheus
from services.compaction.registry import RawFormatError, compact_tool_result
from services.compaction.tempo.parse import critical_path, parse

BIG = 1_000_000


def _series_lines(compact: dict) -> tuple[dict[str, dict[str, str]], int]:
    """({pod: its min/max/last} for the series on a line of their own, how many series in groups).
    A line reads `{pod=x}: min V T, max=last V (human); trend` or `N series {pod=x-*}: lo..hi`."""
    lines = compact.get("series", [])
    alone: dict[str, dict[str, str]] = {}
    grouped = 0
    for line in lines:
        counted = re.match(r"^(\d+) series ", line)
        if counted:
            grouped += int(counted.group(1))
            continue
        head, body = line.split("}: ", 1)
        words = body.split(" ")
        stats: dict[str, str] = {}
        if words[:2] == ["flat", "at"] or words[:2] == ["1", "sample"]:
            stats = dict.fromkeys(("min", "max", "last"), words[2].rstrip(",;"))
        for i, word in enumerate(words[:-1]):
            if word in ("min", "max", "last", "max=last", "min=last") and (i == 0 or words[i - 1] != "at"):
                for name in word.split("="):
                    stats.setdefault(name, words[i + 1].rstrip(",;"))
        alone[head.split("pod=", 1)[1]] = stats
    return alone, grouped


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6), st.integers(1, 80))
def test_every_series_min_max_last_survive(seed: int, series: int, points: int) -> None:
    raw = generate_prometheus(seed, series=series, points=points)
    out = compact_tool_result("query_prometheus", raw, {}, budget=BIG)
    alone, grouped = _series_lines(out.compact)
    assert len(alone) + grouped == series and "omitted" not in out.compact
    for src in raw["data"]["result"]:
        got = alone.get(src["metric"]["pod"])
        if got is None:
            continue  # quiet: in a group line, with its range
        values = src["values"]
        assert got["min"] == min(values, key=lambda p: float(p[1]))[1]
        assert got["max"] == max(values, key=lambda p: float(p[1]))[1]
        assert got["last"] == values[-1][1]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12), st.integers(120, 700))
def test_prometheus_under_pressure_keeps_counts(seed: int, series: int, budget: int) -> None:
    raw = generate_prometheus(seed, series=series, points=30)
    out = compact_tool_result("query_prometheus", raw, {}, budget=budget)  # never refuses (invariant 7)
    assert out.tokens <= budget
    alone, grouped = _series_lines(out.compact)
    omitted = re.match(r"^(\d+) series, (\d+) samples", out.compact.get("omitted", "0 series, 0 samples"))
    assert omitted is not None
    assert len(alone) + grouped + int(omitted.group(1)) == series


def test_trend_shapes() -> None:
    t0 = 1_773_457_200

    def line(values: list[list[object]], name: str) -> str:
        raw = {"data": {"resultType": "matrix", "result": [{"metric": {"__name__": name}, "values": values}]}}
        forms = prometheus.draft(raw, {}, "e").items[0].forms
        return forms[min(1, len(forms) - 1)]  # labels only once named: the second form

    rising = [[t0 + 15 * i, str(100 * 2**20 + max(0, i - 8) * 8_650_752)] for i in range(60)]
    assert line(rising, "x_bytes").endswith("; flat at 104857600, then rising ~33Mi/min from 03:02:00")
    assert line([[t0 + 15 * i, "5"] for i in range(10)], "x") == "{}: flat at 5"
    falling = [[t0 + 60 * i, str(1000 - 10 * i)] for i in range(10)]
    assert line(falling, "x").endswith("; falling ~10/min")


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
    assert "min 536870912 (512Mi) 03:00:00, max=last 536870913 (512Mi)" in out.compact["series"][0]


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
    path = [s.span_id for s in critical_path(parse(raw))]
    assert path == ["r", "b", "c"]
    out = compact_tool_result("query_tempo", raw, {}, budget=BIG)
    groups = out.compact["groups"]
    assert "critical path (3 spans): gw root 100ms → api slow 97ms → db query 95ms" in groups
    broken = [g for g in groups if " ERROR " in g]
    assert len(broken) == 1 and broken[0].startswith('1× 03:12:00.002 api broken ERROR "boom 42" 2ms')


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(0, 5))
def test_tempo_error_spans_survive(seed: int, spans: int, errors: int) -> None:
    raw = generate_tempo(seed, spans=spans, errors=errors)
    out = compact_tool_result("query_tempo", raw, {}, budget=BIG)
    error_groups = [g for g in out.compact["groups"] if " ERROR " in g and not g.startswith("critical path")]
    expected = [
        sp["status"]["message"]
        for b in raw["batches"]
        for sc in b["scopeSpans"]
        for sp in sc["spans"]
        if sp["status"]["code"] == 2
    ]
    assert sum(int(g.split("×", 1)[0]) for g in error_groups) == len(expected)  # grouped, every one counted
    for message in expected:  # one verbatim message per group
        assert any(f'ERROR "{message}" ' in g for g in error_groups)


def test_tempo_rejects_non_traces() -> None:
    with pytest.raises(RawFormatError):
        compact_tool_result("query_tempo", {"spans": []}, {})


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 50))
def test_pod_events_counts_and_first_last(seed: int, events: int) -> None:
    """Grouped by reason across pods (the generator says one thing per reason): summed counts, the
    earliest first and latest last seen (HH:MM:SS of the raw's day), every pod named."""
    raw = generate_events(seed, events=events)
    out = compact_tool_result("get_pod_events", raw, {}, budget=BIG)
    groups: dict[str, list[dict]] = {}
    for item in raw["items"]:
        groups.setdefault(item["reason"], []).append(item)
    got = {}
    for text in out.compact["events"]:
        m = re.match(r"^(\d+)× (\d\d:\d\d:\d\d)(?:–(\d\d:\d\d:\d\d))?(?: Warning)? (\S+) ", text)
        assert m, text
        got[m.group(4)] = (int(m.group(1)), m.group(2), m.group(3) or m.group(2), text)
    assert set(got) == set(groups)
    for reason, items in groups.items():
        n, first, last, text = got[reason]
        assert n == sum(i["count"] for i in items)
        assert first == min(i["firstTimestamp"] for i in items)[11:19]
        assert last == max(i["lastTimestamp"] for i in items)[11:19]
        assert all(f"pod/{i['involvedObject']['name']}" in text for i in items)


def test_pod_events_reject_other_kinds() -> None:
    with pytest.raises(RawFormatError):
        compact_tool_result("get_pod_events", {"kind": "PodList", "items": []}, {})


def test_passthrough_whole_when_it_fits_and_marked_when_not() -> None:
    small = compact_tool_result("some_tool", {"answer": 42}, {"evidence_id": "T:1:tools:0"})
    assert small.compact["value"] == {"answer": 42}
    big_raw = {"rows": [{"i": i, "name": f"row-{i}"} for i in range(2000)]}
    big = compact_tool_result("some_tool", big_raw, {"evidence_id": "T:1:tools:0"}, budget=200)
    assert big.tokens <= 200 and big.compact["evidence"] == "T:1:tools:0"
    assert canonical_json(big_raw).startswith(big.compact["truncated"].split(" …[cut at")[0])
    assert big.compact["truncated"].endswith(f" of {len(canonical_json(big_raw))} chars]")
