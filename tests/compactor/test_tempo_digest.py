"""query_tempo digest: a retry storm is one group, the critical path is right, every duration is the
raw's, and for every trace and every budget above the floor it fits with exact span accounting."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy.local.seed import seed_incident
from deploy.local.seed.generators import SpanSpec, generate_tempo, ns_at, tempo_response
from schemas.tokens import count_value_tokens
from services.compaction import tempo
from services.compaction.model import BUDGET_FLOOR
from services.compaction.registry import RawFormatError, compact_tool_result
from services.compaction.tempo.parse import critical_path, parse
from services.compaction.tempo.render import _Times, ms
from services.compaction.timefmt import Clock

MS = 1_000_000
ERROR_CODES = (2, "STATUS_CODE_ERROR")
_COUNT = re.compile(r"^(\d+)× ")
_FOLDED = re.compile(r" ERROR \((\d+) groups?[,)]")
_OMITTED = re.compile(r"^(\d+) groups, (\d+) spans(?: \((.*)\))?$")
_LEVEL = re.compile(r"(\w+) (\d+)/(\d+)")
_DURATION = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?)(?:\.\.(-?\d+(?:\.\d+)?))?ms\b")


def _raw_spans(raw: dict[str, Any]) -> list[dict[str, Any]]:
    batches = raw.get("batches", raw.get("resourceSpans", []))
    return [
        span
        for batch in batches
        for scope in batch.get("scopeSpans", batch.get("instrumentationLibrarySpans", []))
        for span in scope["spans"]
    ]


def _is_error(span: dict[str, Any]) -> bool:
    return (span.get("status") or {}).get("code") in ERROR_CODES


@dataclass
class Tally:
    spans: int = 0
    errors: int = 0
    groups: int = 0
    info_groups: int = 0


def _kept(compact: dict[str, Any]) -> Tally:
    """What the digest shows: each group line starts with its span count; error lines say ERROR
    (the generated names never do), folded ones how many groups they stand for."""
    tally = Tally()
    for line in compact.get("groups", []):
        if line.startswith("critical path ("):
            continue
        match = _COUNT.match(line)
        assert match, line
        n = int(match.group(1))
        tally.spans += n
        if " ERROR" in line:
            tally.errors += n
            folded = _FOLDED.search(line)
            tally.groups += int(folded.group(1)) if folded else 1
        else:
            tally.groups += 1
            tally.info_groups += 1
    return tally


def _omitted(compact: dict[str, Any]) -> Tally:
    text = compact.get("omitted")
    if text is None:
        return Tally()
    match = _OMITTED.match(text)
    assert match, text
    tally = Tally(spans=int(match.group(2)), groups=int(match.group(1)))
    for level, _, spans in _LEVEL.findall(match.group(3) or ""):
        if level == "error":
            tally.errors = int(spans)
    return tally


def _derivable(compact: dict[str, Any], raw: dict[str, Any]) -> None:
    """Every `…ms` the digest shows is a raw span's duration, to within half its last shown digit."""
    durations = [int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]) for s in _raw_spans(raw)]
    text = " ".join(str(v) for v in compact.values())
    shown = [v for pair in _DURATION.findall(text) for v in pair if v]
    assert shown
    for value in shown:
        decimals = len(value.split(".")[1]) if "." in value else 0
        ns = Decimal(value) * MS
        half = Decimal(MS) / 2 / 10**decimals
        assert any(abs(ns - d) <= half for d in durations), value


# --- 1. a retry storm is one group ----------------------------------------------------


def _storm() -> dict[str, Any]:
    """40 identical failing `payment.charge` calls under one parent, beside a normal request tree."""
    t = ns_at(3, 12, 40)
    specs = [
        SpanSpec("root", "", "shop-gateway", "POST /api/v1/checkout", t, t + 6000 * MS),
        SpanSpec("api", "root", "checkout-api", "POST /api/v1/checkout", t + 1 * MS, t + 5990 * MS),
        SpanSpec("cart", "api", "checkout-api", "cart.load", t + 2 * MS, t + 40 * MS),
        SpanSpec("db", "cart", "cart-service", "pg.query SELECT", t + 3 * MS, t + 20 * MS),
        SpanSpec("pay", "api", "checkout-api", "payment.authorize", t + 50 * MS, t + 5980 * MS),
    ]
    for k in range(40):
        start = t + (60 + 145 * k) * MS
        specs.append(
            SpanSpec(
                f"retry{k:02d}",
                "pay",
                "checkout-api",
                "payment.charge",
                start,
                start + (101 + k) * MS,
                error="upstream timeout",
            )
        )
    return tempo_response("ab" * 16, specs, {})


@pytest.mark.parametrize("budget", [250, BUDGET_FLOOR])
def test_retry_storm_is_one_group(budget: int) -> None:
    raw = _storm()
    out = compact_tool_result("query_tempo", raw, {}, budget=budget)
    assert out.tokens <= budget
    errors = [g for g in out.compact["groups"] if " ERROR" in g and not g.startswith("critical path")]
    assert len(errors) == 1
    assert re.match(
        r'^40× (\S+ )?checkout-api payment\.charge ERROR "upstream timeout" 101\.\.140ms', errors[0]
    )
    assert out.compact["summary"].startswith("45 spans, 3 services, 40 error spans; root ")
    assert _kept(out.compact).spans + _omitted(out.compact).spans == 45
    _derivable(out.compact, raw)


def test_retry_storm_leaves_room_for_the_whole_tree() -> None:
    """As one group, the storm leaves room at 250 for every other span's group: nothing is omitted."""
    out = compact_tool_result("query_tempo", _storm(), {}, budget=250)
    assert out.raw_tokens > 10 * 250
    assert "omitted" not in out.compact
    assert sum(1 for g in out.compact["groups"] if not g.startswith("critical path")) == 1 + 5


# --- 2. totality and exact accounting -----------------------------------------------


_TEXT = st.text(
    alphabet=st.sampled_from([*"abcdefghijklmnopqrstuvwxyz0123456789 -_./[]{}:\"'\\\t", "é", "漢", "😀"]),
    max_size=200,
)
_CODES = (None, 0, 1, 2, "STATUS_CODE_ERROR", "STATUS_CODE_OK", "STATUS_CODE_UNSET")
# no id (the call path uses `sha256:<16 hex>`), one of ours, and the longest the floor allows (64 chars)
_EVIDENCE = ("", "1773458070.000100:1:tools:0", "1773458070.000100:" + "9" * 38 + ":tools:0")
_MESSAGES = ("upstream timeout", "", "boom 42", "connection reset by peer " * 8)


def _parent(rng: random.Random, i: int, n: int) -> str:
    """A root, a tree edge (most often), an orphan, or anything (itself or a later span: cycles)."""
    kind = rng.choice(("root", "tree", "tree", "tree", "orphan", "any"))
    if kind == "root" or (kind == "tree" and i == 0):
        return ""
    if kind == "tree":
        return f"s{rng.randrange(i)}"
    if kind == "orphan":
        return f"gone{rng.randrange(10**6)}"
    return f"s{rng.randrange(n)}"


@st.composite
def traces(draw: st.DrawFn) -> dict[str, Any]:
    """Random traces of 1..300 spans: names and services from hypothesis (long, odd characters), the
    shape from a seeded rng (so that large traces are cheap to draw)."""
    n = draw(st.integers(1, 300))
    services = draw(st.integers(0, 10))
    names = draw(st.lists(_TEXT, min_size=1, max_size=8))
    long_service = draw(_TEXT)
    rng = draw(st.randoms(use_true_random=False))
    t0 = ns_at(3, 12)
    specs, statuses = [], {}
    for i in range(n):
        svc = rng.randrange(services) if services else 0
        service = "" if services == 0 else f"svc-{svc}" + (long_service if svc == 9 else "")
        start = t0 + rng.randrange(5_000_000) * 1000
        end = max(0, start + rng.randrange(-2_000, 3_000_000) * 1000)  # a broken raw may end before it starts
        specs.append(SpanSpec(f"s{i}", _parent(rng, i, n), service, rng.choice(names), start, end))
        code = rng.choice(_CODES)
        statuses[f"s{i}"] = {} if code is None else {"code": code, "message": rng.choice(_MESSAGES)}
    raw = tempo_response("cd" * 16, specs, {})
    for batch in raw["batches"]:
        if services == 0:
            batch["resource"]["attributes"] = []
        for span in batch["scopeSpans"][0]["spans"]:
            span["status"] = statuses[span["spanId"]]
    if rng.random() < 0.5:  # the other OTLP spelling
        raw = {
            "resourceSpans": [
                {"resource": b["resource"], "instrumentationLibrarySpans": b["scopeSpans"]}
                for b in raw["batches"]
            ]
        }
    return raw


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(traces(), st.integers(BUDGET_FLOOR, 2000), st.sampled_from(_EVIDENCE))
def test_any_trace_fits_any_budget_with_exact_accounting(
    raw: dict[str, Any], budget: int, evidence: str
) -> None:
    spans = _raw_spans(raw)
    total, errors = len(spans), sum(_is_error(s) for s in spans)
    context = {"evidence_id": evidence} if evidence else {}
    out = compact_tool_result("query_tempo", raw, context, budget=budget)  # never raises
    assert out.tokens <= budget and out.tokens == count_value_tokens(out.compact)
    kept, omitted = _kept(out.compact), _omitted(out.compact)
    assert kept.spans + omitted.spans == total
    assert kept.errors + omitted.errors == errors
    groups = sum(item.members for item in tempo.draft(raw, {}, "x").items)
    assert kept.groups + omitted.groups == groups
    if kept.info_groups:  # an error is never dropped while a lesser group is shown
        assert omitted.errors == 0
    if "omitted" in out.compact:  # the path counts no spans: never an empty omitted count for it
        assert omitted.groups > 0
    summary = out.compact["summary"]
    assert re.match(rf"^{total} spans?, \d+ services?, {errors} error spans?; root ", summary), summary


# --- 3. the critical path, and durations from the raw ---------------------------------


def _tree() -> dict[str, Any]:
    t = ns_at(3, 12)
    specs = [
        SpanSpec("r", "", "gw", "root", t, t + 100 * MS),
        SpanSpec("a", "r", "api", "fast", t + 1 * MS, t + 10 * MS),
        SpanSpec("b", "r", "api", "slow", t + 2 * MS, t + 99 * MS),
        SpanSpec(
            "x", "r", "api", "twin", t + 5 * MS, t + 99 * MS
        ),  # ends with b: the earlier in the raw wins
        SpanSpec("c", "b", "db", "query", t + 3 * MS, t + 98 * MS),
        SpanSpec("d", "b", "db", "query", t + 50 * MS, t + 97_500_000),
        SpanSpec("e", "c", "db", "lock wait", t + 40 * MS, t + 60 * MS),
        SpanSpec("f", "a", "api", "broken", t + 2 * MS, t + 4 * MS, error="boom 42"),
        SpanSpec("o", "gone", "batch", "late job", t + 20 * MS, t + 200 * MS),  # an orphan, not the root
    ]
    return tempo_response("ef" * 16, specs, {})


def test_critical_path_on_a_hand_built_tree() -> None:
    raw = _tree()
    assert [s.span_id for s in critical_path(parse(raw))] == ["r", "b", "c", "e"]
    path = next(it for it in tempo.draft(raw, {}, "x").items if it.id == "path")
    assert path.forms == (
        "critical path (4 spans): gw root 100ms → api slow 97ms → db query 95ms → lock wait 20ms",
        # `query` holds the path 75ms past its child (>= a tenth of the root): kept at the middle resolution
        "critical path (4 spans): gw root 100ms → …1 → db query 95ms → lock wait 20ms",
        "critical path (4 spans): gw root 100ms → …2 → db lock wait 20ms",
    )
    out = compact_tool_result("query_tempo", raw, {}, budget=100_000)
    assert out.compact["summary"] == "9 spans, 4 services, 1 error span; root gw root 100ms; 2 roots"
    assert path.forms[0] in out.compact["groups"]
    assert any(g.startswith("2× 03:12:00.003 db query 47.5..95ms") for g in out.compact["groups"])
    assert any(g.startswith('1× 03:12:00.002 api broken ERROR "boom 42" 2ms') for g in out.compact["groups"])


@pytest.mark.parametrize("budget", [BUDGET_FLOOR, 250, 100_000])
def test_every_duration_shown_is_derivable_from_the_raw(budget: int) -> None:
    for raw in (_tree(), _storm(), seed_incident().tempo, generate_tempo(5, spans=80, errors=6)):
        _derivable(compact_tool_result("query_tempo", raw, {}, budget=budget).compact, raw)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (411_800_000, "411.8"),
        (3_021_400_000, "3021.4"),
        (101 * MS, "101"),
        (800_000, "0.8"),
        (12_345, "0.012"),
        (999_999, "1"),
        (0, "0"),
        (12_345_678_901, "12346"),
        (-2_500_000, "-2.5"),
    ],
)
def test_ms_keeps_the_digits_that_matter(ns: int, text: str) -> None:
    assert ms(ns) == text


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**18), st.integers(0, 3 * 10**12))
def test_cached_times_equal_the_clock(first: int, offset: int) -> None:
    clock = Clock(first, first + offset)
    times = _Times(clock)
    for ns in (first, first + offset // 3, first + offset):
        assert times.at(ns) == clock.at(ns, millis=True)


# --- parse stays one-line and total ---------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        {"spans": []},
        {"batches": [{"scopeSpans": 5}]},
        {"batches": [{"scopeSpans": [{"spans": 7}]}]},
        {"batches": [{"scopeSpans": [{"spans": [{"spanId": "a", "startTimeUnixNano": "1"}]}]}]},
        {
            "batches": [
                {
                    "scopeSpans": [
                        {"spans": [{"spanId": "a", "startTimeUnixNano": 1, "endTimeUnixNano": 10**40}]}
                    ]
                }
            ]
        },
        {
            "batches": [
                {
                    "scopeSpans": [
                        {"spans": [{"spanId": "a", "startTimeUnixNano": float("inf"), "endTimeUnixNano": 1}]}
                    ]
                }
            ]
        },
        {
            "batches": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {"spanId": "a", "startTimeUnixNano": 1, "endTimeUnixNano": 2, "status": "x"}
                            ]
                        }
                    ]
                }
            ]
        },
        {"batches": []},
    ],
)
def test_not_a_trace_is_a_one_line_error(raw: Any) -> None:
    with pytest.raises(RawFormatError) as info:
        compact_tool_result("query_tempo", raw, {})
    assert "\n" not in str(info.value)


def test_odd_but_valid_spans_compact() -> None:
    """Unhashable status codes, cycles, a self-parent, odd resources: still a digest, never a crash."""
    span = {"startTimeUnixNano": "1773457200000000000", "endTimeUnixNano": "1773457200500000000"}
    raw = {
        "batches": [
            {
                "resource": ["not", "an", "object"],
                "scopeSpans": [
                    {
                        "spans": [
                            {**span, "spanId": "a", "parentSpanId": "b", "status": {"code": [2]}},
                            {**span, "spanId": "b", "parentSpanId": "a", "events": 3},
                            {
                                **span,
                                "spanId": "c",
                                "parentSpanId": "c",
                                "status": {"code": "STATUS_CODE_ERROR"},
                            },
                        ]
                    },
                    "not a scope",
                ],
            }
        ]
    }
    out = compact_tool_result("query_tempo", raw, {}, budget=BUDGET_FLOOR)
    assert out.compact["summary"].startswith("3 spans, 1 service, 1 error span; root ")
    assert out.compact["summary"].endswith("; 0 roots")
