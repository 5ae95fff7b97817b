"""query_loki: patterns before filtering, counts and first/last intact, every error+ line verbatim."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.events import canonical_json
from schemas.tokens import count_value_tokens
from services.compactor import loki
from services.compactor.registry import BudgetExceeded, RawFormatError, compact_tool_result
from services.compactor.timefmt import iso_from_ns
from services.seed.generators import TEMPLATES, fill, generate_loki, loki_response, ns_at

ERROR_LEVELS = {"error", "critical", "fatal"}


def _lines(raw: dict) -> list[tuple[int, str]]:
    return [(int(ns), line) for s in raw["data"]["result"] for ns, line in s["values"]]


def test_fingerprint_masks_variable_parts_only() -> None:
    a = 'level=info msg="cart loaded" cart_id=0b7e3f0a-1c2d-4e5f-8a9b-0c1d2e3f4a5b items=7 at 2026-03-14T03:00:01.5Z'
    b = 'level=info msg="cart loaded" cart_id=ffffffff-1c2d-4e5f-8a9b-0c1d2e3f4a5b items=12 at 2026-03-14T04:10:01Z'
    assert loki.fingerprint(a) == loki.fingerprint(b)
    assert "level=info" in loki.fingerprint(a) and "items=<*>" in loki.fingerprint(a)
    assert loki.fingerprint("payload cache size=48211 evictions=0") == "payload cache size=<*> evictions=<*>"
    assert loki.fingerprint('user="alice" ok') == loki.fingerprint('user="bob" ok')
    assert loki.fingerprint("GET /healthz 200") != loki.fingerprint("POST /checkout 200")


_LOG_CHARS = st.sampled_from(
    [*list('0123456789abcdefABCDEF xyz=:"\\.-+/_,;()[]'), "error", "WARN", "fatal", "٣", "é", "\t"]
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_LOG_CHARS, max_size=40), st.randoms(use_true_random=False))
def test_line_shape_cache_is_exact(pieces: list[str], rnd: random.Random) -> None:
    """The shape cache keys lines by their digits zeroed: that is exact only if swapping a digit for
    another never changes the fingerprint nor the level. Checked here, with the cache bypassed."""
    line = "".join(pieces)
    other = "".join(rnd.choice("0123456789") if c.isascii() and c.isdigit() else c for c in line)
    assert loki.fingerprint(other) == loki.fingerprint(line)
    assert loki.line_level(other) == loki.line_level(line)
    loki._shapes.clear()
    assert loki.line_shape(line) == (loki.fingerprint(line), loki.line_level(line))
    assert loki.line_shape(other) == (loki.fingerprint(other), loki.line_level(other))


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("FATAL ERROR: JS heap out of memory", "fatal"),
        ("panic: runtime error", "fatal"),
        ("level=error msg=x", "error"),
        ("CRITICAL disk full", "critical"),
        ("Warning OOMKilled pod/x", "warn"),
        ("payload cache size=1 errors=0", "info"),
    ],
)
def test_line_level(line: str, level: str) -> None:
    assert loki.line_level(line) == level


def test_stream_label_level_makes_a_line_error() -> None:
    raw = loki_response([({"app": "a", "level": "error"}, [(ns_at(3, 0, 1), "something odd happened 42")])])
    out = compact_tool_result("query_loki", raw, {}, budget=10_000)
    assert out.compact["patterns"][0]["level"] == "error"


@pytest.mark.parametrize(
    "raw",
    [
        {"status": "success"},
        {"data": {"resultType": "matrix", "result": []}},
        {"data": {"resultType": "streams", "result": [{"stream": {}, "values": [["x", "line"]]}]}},
        {"data": {"resultType": "streams", "result": [{"stream": {}, "values": [["1", 5]]}]}},
        [1, 2],
    ],
)
def test_not_a_loki_response(raw: object) -> None:
    with pytest.raises(RawFormatError) as info:
        compact_tool_result("query_loki", raw, {})
    assert "\n" not in str(info.value)


_entry = st.tuples(
    st.integers(min_value=0, max_value=899_999),  # ms offset in the window
    st.integers(min_value=0, max_value=len(TEMPLATES) - 1),
    st.integers(min_value=0, max_value=2**31),  # fill seed
    st.integers(min_value=0, max_value=2),  # stream
)


def _build(entries: list[tuple[int, int, int, int]]) -> dict:
    streams: list[list[tuple[int, str]]] = [[], [], []]
    seen: set[int] = set()
    for offset, template, fill_seed, stream in entries:
        ns = ns_at(3, 0) + offset * 1_000_000 + len(seen)  # unique timestamps
        seen.add(ns)
        streams[stream].append((ns, fill(TEMPLATES[template].text, random.Random(fill_seed))))
    return loki_response([({"app": "checkout-api", "pod": f"p{i}"}, v) for i, v in enumerate(streams)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_entry, min_size=1, max_size=120))
def test_every_fact_survives_with_room(entries: list[tuple[int, int, int, int]]) -> None:
    raw = _build(entries)
    out = compact_tool_result("query_loki", raw, {}, budget=1_000_000)
    text = canonical_json(out.compact)
    lines = _lines(raw)
    groups: dict[str, list[tuple[int, str]]] = {}
    for ns, line in lines:
        groups.setdefault(loki.fingerprint(line), []).append((ns, line))
    by_key = {(p["n"], p["first"], p["last"]) for p in out.compact["patterns"]}
    for members in groups.values():
        ns_values = [ns for ns, _ in members]
        assert (len(members), iso_from_ns(min(ns_values)), iso_from_ns(max(ns_values))) in by_key
    assert sum(p["n"] for p in out.compact["patterns"]) == len(lines)
    assert out.compact["summary"] == f"{len(lines)} lines, {len(groups)} distinct patterns"
    for _, line in lines:
        if loki.line_level(line) in ERROR_LEVELS:
            assert canonical_json(line)[1:-1] in text  # verbatim, as JSON renders it


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_entry, min_size=1, max_size=120), st.integers(min_value=120, max_value=900))
def test_under_pressure_errors_and_counts_survive_or_it_refuses(entries: list, budget: int) -> None:
    raw = _build(entries)
    lines = _lines(raw)
    try:
        out = compact_tool_result("query_loki", raw, {}, budget=budget)
    except BudgetExceeded:
        return  # refusing is allowed; silently dropping an error line is not
    assert out.tokens <= budget
    assert out.tokens == count_value_tokens(out.compact)
    omitted = out.compact.get("omitted", {}).get("lines", 0)
    assert sum(p["n"] for p in out.compact["patterns"]) + omitted == len(lines)
    text = canonical_json(out.compact)
    for _, line in lines:
        if loki.line_level(line) in ERROR_LEVELS:
            assert canonical_json(line)[1:-1] in text


def test_generated_400_lines_compacts_with_room() -> None:
    raw = generate_loki(7, lines=400, patterns=4)
    out = compact_tool_result("query_loki", raw, {}, budget=2000)
    assert out.compact["summary"] == "400 lines, 4 distinct patterns"
    assert out.raw_tokens > 10 * out.tokens


def test_grafana_mcp_entry_list_is_accepted() -> None:
    entries = [
        {
            "timestamp": "1773457964187000000",
            "line": "FATAL ERROR: JS heap out of memory",
            "labels": {"app": "a"},
        },
        {"timestamp": "2026-03-14T03:12:45.5Z", "line": "FATAL ERROR: JS heap out of memory", "labels": {}},
        {"timestamp": "2026-03-14T03:00:00Z", "line": "ok 1", "labels": {"level": "info"}},
    ]
    out = compact_tool_result("query_loki_logs", entries, {}, budget=1000)
    fatal = next(p for p in out.compact["patterns"] if p.get("level") == "fatal")
    assert (fatal["n"], fatal["first"], fatal["last"]) == (
        2,
        "2026-03-14T03:12:44.187Z",
        "2026-03-14T03:12:45.5Z",
    )
    with pytest.raises(RawFormatError):
        compact_tool_result("query_loki_logs", [{"timestamp": "yesterday", "line": "x"}], {})
