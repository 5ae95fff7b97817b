"""query_prometheus digest: every series counted, the salient ones kept, values copied as they appear."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.local.seed import seed_incident
from deploy.local.seed.generators import generate_prometheus, prometheus_response, unix_s
from services.compaction import prometheus
from services.compaction.model import BUDGET_FLOOR
from services.compaction.prometheus.parse import ALONE, QUIET, humanize
from services.compaction.registry import CompactOutcome, RawFormatError, compact_tool_result
from services.compaction.timefmt import iso_from_unix

TOOL = "query_prometheus"
COUNTS = re.compile(r"^(\d+) series, (\d+) samples")
STAT_WORDS = ("min", "max", "last", "max=last", "min=last", "to", "sample")


def _hms(t: float) -> str:
    return iso_from_unix(t)[11:19]


def _totals(raw: dict[str, Any]) -> tuple[int, int]:
    result = raw["data"]["result"]
    return len(result), sum(len(s["values"]) for s in result)


def _digest(raw: dict[str, Any], budget: int, ctx: dict[str, Any] | None = None) -> CompactOutcome:
    out = compact_tool_result(TOOL, raw, ctx or {}, budget=budget)
    assert out.tokens <= budget
    return out


def _accounted(
    raw: dict[str, Any], out: CompactOutcome, ctx: dict[str, Any] | None = None
) -> tuple[int, int]:
    """(series, samples) the digest shows plus what it says it omitted. Each line is matched back to
    the one draft item that has it as a form; the line itself says how many series it stands for."""
    items = prometheus.draft(raw, ctx or {}, "e").items
    lines = out.compact.get("series", [])
    kept: list[Any] = []
    for line in lines:  # two series without labels may read alike: each line takes an item of its own
        kept.append(next(it for it in items if line in it.forms and it not in kept))
    for line, item in zip(lines, kept, strict=True):
        said = re.match(r"(\d+) series ", line)
        assert (int(said[1]) if said else 1) == item.members
    series, samples = sum(it.members for it in kept), sum(it.n for it in kept)
    if "omitted" in out.compact:
        left = COUNTS.match(out.compact["omitted"])
        assert left is not None
        series, samples = series + int(left[1]), samples + int(left[2])
    return series, samples


def _assert_counts(raw: dict[str, Any], out: CompactOutcome, ctx: dict[str, Any] | None = None) -> None:
    totals = _totals(raw)
    summary = COUNTS.match(out.compact["summary"])
    assert summary is not None and (int(summary[1]), int(summary[2])) == totals
    assert _accounted(raw, out, ctx) == totals


def _shown_values(line: str) -> list[str]:
    """Every number the line gives as a value: after min/max/last/to/flat at, both ends of a range
    `lo..hi`, the values of `pts`. Humanized forms (in parentheses) are left out: they stand beside."""
    body = line.split("}: ", 1)[1]
    words = body.split(" ")
    out = []
    for i, word in enumerate(words):
        nxt = words[i + 1].rstrip(",;") if i + 1 < len(words) else ""
        after_at = i > 0 and words[i - 1] == "at"  # `spike at max`: a pointer, not a value
        if (word in STAT_WORDS and not after_at) or (word == "at" and i and words[i - 1] == "flat"):
            out.extend(nxt.split("..") if ".." in nxt else [nxt])
        elif ".." in word and not word.startswith("(") and not word.endswith(")"):
            out.extend(word.rstrip(",;").split(".."))
        elif word == "pts":  # `pts 03:00:00 v, 03:03:00 v` (times may carry a date: `03-14 03:00:00 v`)
            out.extend(point.split(" ")[-1] for point in " ".join(words[i + 1 :]).split(", "))
            break
    return out


def _assert_copied(raw: dict[str, Any], out: CompactOutcome) -> None:
    values = {v for s in raw["data"]["result"] for _, v in s["values"]}
    for line in out.compact.get("series", []):
        for shown in _shown_values(line):
            assert shown in values, (shown, line)


def _line_of(out: CompactOutcome, pod: str) -> str:
    found = [
        line for line in out.compact.get("series", []) if f"pod={pod}}}" in line or f"pod={pod}," in line
    ]
    assert len(found) == 1, (pod, out.compact)
    return found[0]


# --- the shapes of issue 14 --------------------------------------------------------------------------

SPIKE_AT = (11, 23)  # series 11 jumps to 950 at sample 23: 03:05:45
WIDE_SPIKE = (29, (41, 42))  # series 29: two samples, 911 and 912 at 03:10:15 and 03:10:30


def _forty_with_two_spikes(order: list[int] | None = None) -> dict[str, Any]:
    series = []
    for i in order or list(range(40)):
        rng = random.Random(i)
        pts = []
        for k in range(60):
            v = 120 + rng.randint(-3, 3)
            if (i, k) == SPIKE_AT:
                v = 950
            if i == WIDE_SPIKE[0] and k in WIDE_SPIKE[1]:
                v = 870 + k
            pts.append((unix_s(3, 0) + 15 * k, float(v)))
        labels = {
            "__name__": "http_request_duration_ms_p99",
            "namespace": "shop",
            "pod": f"checkout-api-7d9f8b6c5-{i:05d}",
        }
        series.append((labels, pts))
    return prometheus_response(series)


@pytest.mark.parametrize("budget", [BUDGET_FLOOR, 250, 700])
@pytest.mark.parametrize("reverse", [False, True])
def test_both_spikes_of_forty_series_are_kept(budget: int, reverse: bool) -> None:
    raw = _forty_with_two_spikes(list(range(39, -1, -1)) if reverse else None)
    out = _digest(raw, budget)
    first = _line_of(out, "checkout-api-7d9f8b6c5-00011")
    second = _line_of(out, "checkout-api-7d9f8b6c5-00029")
    if budget >= 250:
        assert f"max 950 {_hms(unix_s(3, 0) + 15 * 23)}" in first
        assert f"max 912 {_hms(unix_s(3, 0) + 15 * 42)}" in second
    _assert_counts(raw, out)
    _assert_copied(raw, out)


def test_spikes_are_warnings_and_the_rest_one_group() -> None:
    items = prometheus.draft(_forty_with_two_spikes(), {}, "e").items
    assert [it.id for it in items[:2]] == ["s12", "s30"] and {it.level for it in items[:2]} == {"warn"}
    (group,) = items[2:]
    assert group.members == 38 and group.n == 38 * 60 and group.forms[-1].startswith("38 series {pod=")


ACTIVE = (7, 50, 63)  # series of a rate() that carry traffic; 63 is the last one in the response


def _rate_of_64(active: tuple[int, ...] = ACTIVE) -> dict[str, Any]:
    """A `sum by (pod) (rate(...[1m]))` answer: 61 pods idle (0, now and then one request), 3 busy."""
    rng = random.Random(3)
    series = []
    for i in range(64):
        pts = []
        for k in range(120):
            if i in active:
                v = round(1.5 + (0.02 * k if i == active[1] else 0.0) + rng.uniform(-0.3, 0.3), 4)
            else:
                v = rng.choice([0.0] * 12 + [0.0033333333333333335, 0.016666666666666666])
            pts.append((unix_s(3, 0) + 15 * k, v))
        series.append(
            ({"namespace": "shop", "pod": f"checkout-api-{i:02d}", "route": "/api/v1/checkout"}, pts)
        )
    return prometheus_response(series)


@pytest.mark.parametrize("budget", [BUDGET_FLOOR, 160, 250, 700])
def test_the_three_active_series_of_a_rate_are_kept(budget: int) -> None:
    raw = _rate_of_64()
    out = _digest(raw, budget)
    for i in ACTIVE:
        _line_of(out, f"checkout-api-{i:02d}")
    _assert_counts(raw, out)
    _assert_copied(raw, out)


def test_idle_series_collapse_with_exact_counts() -> None:
    raw = _rate_of_64()
    out = _digest(raw, 250)
    groups = [line for line in out.compact["series"] if re.match(r"\d+ series ", line)]
    assert groups == [
        g for g in groups if g.startswith("61 series {pod=checkout-api-*}: 0..0.016666666666666666")
    ]
    assert len(groups) == 1 and "omitted" not in out.compact
    assert _accounted(raw, out) == (64, 64 * 120)
    items = prometheus.draft(raw, {}, "e").items
    singles = [it for it in items if it.members == 1]
    assert {it.id for it in singles} == {f"s{i + 1}" for i in ACTIVE}
    assert min(it.salience for it in singles) >= QUIET > max(it.salience for it in items if it.members > 1)


def test_many_active_series_collapse_by_what_they_do_now() -> None:
    """200 pods, most of them climbing: the most salient stand alone, the rest are counted in groups
    (`N series {pod=checkout-api-*}: now rising, lo..hi`), not left out."""
    raw = generate_prometheus(2, series=200, points=120)
    out = _digest(raw, 250)
    lines = out.compact["series"]
    alone = [line for line in lines if line.startswith("{")]
    assert 1 <= len(alone) <= ALONE
    assert any(re.match(r"\d+ series \{pod=checkout-api-\*\}: now rising, ", line) for line in lines)
    _assert_counts(raw, out)
    _assert_copied(raw, out)


def test_order_of_appearance_never_decides() -> None:
    """The same series in another order keep the same lines (salience, not position, ranks them)."""
    a = _digest(_forty_with_two_spikes(), 200)
    b = _digest(_forty_with_two_spikes(list(range(39, -1, -1))), 200)
    assert sorted(a.compact["series"][:2]) == sorted(b.compact["series"][:2])


def test_alert_labels_make_a_series_salient() -> None:
    raw = _rate_of_64(active=())
    ctx = {"service": "checkout-api", "labels": {"pod": "checkout-api-42"}}
    items = prometheus.draft(raw, ctx, "e").items
    assert items[0].id == "s43" and items[0].members == 1 and items[0].salience >= 1
    assert prometheus.draft(raw, {"service": "checkout-api"}, "e").items[0].members == 64  # every pod matches


def test_saturation_is_a_warning() -> None:
    t0 = unix_s(3, 0)
    full = [(t0 + 15 * k, min(0.97, 0.5 + 0.02 * k)) for k in range(40)]
    calm = [[(t0 + 15 * k, 0.4 + 0.001 * (k % 3)) for k in range(40)] for _ in range(5)]
    series = [
        ({"__name__": "node_cpu_utilization_ratio", "node": f"n{i}"}, pts)
        for i, pts in enumerate([*calm, full])
    ]
    items = prometheus.draft(prometheus_response(series), {}, "e").items
    assert items[0].id == "s6" and items[0].level == "warn"
    assert "max 0.97 03:06:00, last 0.97; rising ~0.08/min, then flat" in items[0].forms[1]


# --- the seed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [BUDGET_FLOOR, 200, 250, 400, 700, 5000])
def test_seed_counts_at_every_budget(budget: int) -> None:
    s = seed_incident()
    out = _digest(s.prometheus, budget, s.alert_context())
    _assert_counts(s.prometheus, out, s.alert_context())
    _assert_copied(s.prometheus, out)


def test_seed_at_250_keeps_every_series_max_and_trend() -> None:
    s = seed_incident()
    out = _digest(s.prometheus, 250, s.alert_context())
    assert out.compact["metric"] == "container_memory_working_set_bytes"
    assert out.compact["window"].startswith("2026-03-14 03:00:00")
    for series in s.prometheus["data"]["result"]:
        line = _line_of(out, series["metric"]["pod"])
        top = max(series["values"], key=lambda p: float(p[1]))[1]
        assert f"max=last {top} (" in line and re.search(r"rising ~3\dMi/min from 03:02:00", line)


# --- trend, humanized values, bad input ---------------------------------------------------------------


def _one(values: list[list[Any]], name: str = "x_bytes") -> tuple[str, ...]:
    raw = {"data": {"resultType": "matrix", "result": [{"metric": {"__name__": name}, "values": values}]}}
    return prometheus.draft(raw, {}, "e").items[0].forms


def test_trend_in_segments() -> None:
    t0 = unix_s(3, 0)
    rising = [[t0 + 15 * i, str(100 * 2**20 + max(0, i - 8) * 8_650_752)] for i in range(60)]
    assert "flat at 104857600, then rising ~33Mi/min from 03:02:00" in _one(rising)[1]
    falling = [[t0 + 60 * i, str(1000 - 10 * i)] for i in range(10)]
    assert _one(falling, "x")[1].endswith("; falling ~10/min")
    assert _one([[t0 + 15 * i, "5"] for i in range(10)]) == ("{}: flat at 5",)
    step = [[t0 + 15 * i, "10" if i < 20 else "250"] for i in range(40)]
    assert _one(step, "x")[1].endswith("flat at 10, then jump to 250 at 03:05:00, then flat at 250")
    up_then_flat = [[t0 + 60 * i, str(min(50, 3 * i))] for i in range(30)]
    assert "rising ~3/min, then flat at 50 from 03:17:00" in _one(up_then_flat, "x")[1]


def test_humanized_beside_never_instead() -> None:
    forms = _one([[1773457200, "536870912"], [1773457215, "536870913"]], "container_memory_working_set_bytes")
    assert forms[1].startswith("{}: min 536870912 (512Mi) 03:00:00, max=last 536870913 (512Mi)")
    assert humanize(1.7976931348623157e308, as_bytes=False) == "1.80e+308"


def test_nan_and_inf_are_counted_never_shown_as_numbers() -> None:
    t0 = unix_s(3, 0)
    values = [[t0 + 15 * i, v] for i, v in enumerate(["1", "NaN", "3", "+Inf", "2", "NaN"])]
    forms = _one(values, "x")
    assert forms[1] == "{}: min 1 03:00:00, max 3 03:00:30, last NaN (1 +Inf, 2 NaN); flat ~2"


@pytest.mark.parametrize(
    "raw",
    [
        {"data": {"resultType": "vector", "result": []}},
        {"data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, 2]]}]}},
        {"data": {"resultType": "matrix", "result": [{"metric": {}, "values": [["x", "2"]]}]}},
        {"data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1e20, "2"]]}]}},
        {"data": {"resultType": "matrix", "result": [{"metric": {}, "values": [["NaN", "2"]]}]}},
        {"data": {"resultType": "matrix", "result": [{"metric": []}]}},
    ],
)
def test_bad_raws_get_one_line_errors(raw: dict[str, Any]) -> None:
    with pytest.raises(RawFormatError) as info:
        compact_tool_result(TOOL, raw, {})
    assert "\n" not in str(info.value) and str(info.value).startswith("query_prometheus: ")


# --- totality (invariant 7) ---------------------------------------------------------------------------

SPECIAL = ("NaN", "+Inf", "-Inf", "0", "-0", "1e308", "-1.7976931348623157e+308", "5e-324", "1e+21", "0.1")
SHAPES = ("const", "ramp", "noise", "spike", "step", "special", "huge", "tiny", "holes")
NAMES = ("container_memory_working_set_bytes", "http_requests_total", "node_cpu_utilization_ratio", "up")


def _values(rng: random.Random, shape: str, n: int) -> list[str]:
    base = rng.choice([0, 1, 100, 10**9])
    out = []
    for k in range(n):
        if shape == "const":
            v = str(base)
        elif shape == "ramp":
            v = str(base + k * rng.randint(1, 5))
        elif shape == "noise":
            v = repr(rng.gauss(base, 3))
        elif shape == "spike":
            v = str(base * 10 + 900) if k == n // 2 else str(base + rng.randint(-2, 2))
        elif shape == "step":
            v = str(base) if k < n // 3 else str(base + 250)
        elif shape == "special":
            v = rng.choice(SPECIAL)
        elif shape == "huge":
            v = repr(rng.uniform(-1e307, 1e307))
        elif shape == "tiny":
            v = repr(rng.uniform(0, 1e-9))
        else:
            v = rng.choice(["NaN", str(base + k)])
        out.append(v)
    return out


def _labels(rng: random.Random, i: int, style: int) -> dict[str, str]:
    if style == 0:
        return {}
    if style == 1:
        return {"pod": f"checkout-api-{i}"}
    if style == 2:
        return {"__name__": rng.choice(NAMES), "pod": f"p-{i}", "note": "é" * rng.randint(0, 300)}
    return {
        "__name__": NAMES[0],
        "namespace": "shop",
        "instance": f"10.0.{i // 250}.{i % 250}:9100",
        "job": "x",
    }


@st.composite
def matrices(draw: st.DrawFn) -> dict[str, Any]:
    n_series = draw(st.integers(0, 60))
    n_points = draw(st.integers(0, 120))
    rng = random.Random(draw(st.integers(0, 2**32)))
    style = draw(st.integers(0, 3))
    step = draw(st.sampled_from([15, 0.5, 60, 3600]))
    start = unix_s(3, 0) + draw(st.sampled_from([0, 0.25]))
    uneven = draw(st.booleans())
    series = []
    for i in range(n_series):
        n = rng.randint(0, n_points) if uneven else n_points
        values = _values(rng, rng.choice(SHAPES), n)
        times = [start + step * k for k in range(n)]
        stamps = [int(t) if float(t).is_integer() else t for t in times]
        series.append(
            {"metric": _labels(rng, i, style), "values": [list(p) for p in zip(stamps, values, strict=True)]}
        )
    return {"status": "success", "data": {"resultType": "matrix", "result": series}}


@settings(max_examples=200, deadline=None)
@given(
    matrices(),
    st.integers(BUDGET_FLOOR, 2000),
    st.sampled_from([{}, {"evidence_id": "T" * 64}, {"service": "checkout-api", "labels": {"pod": "p-3"}}]),
)
def test_every_matrix_fits_every_budget_with_exact_counts(
    raw: dict[str, Any], budget: int, ctx: dict[str, Any]
) -> None:
    out = _digest(raw, budget, ctx)
    _assert_counts(raw, out, ctx)
    _assert_copied(raw, out)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(1, 120))
def test_generated_memory_values_are_copied(seed: int, series: int, points: int) -> None:
    raw = generate_prometheus(seed, series=series, points=points)
    for budget in (250, 100_000):
        out = _digest(raw, budget)
        _assert_copied(raw, out)
        _assert_counts(raw, out)
