"""The order of a digest that must leave series out: what moves before what does not.

Generated answers of the shape a real Prometheus gave (`rate(..._bucket[1m])`: handlers on two
instances, each with its buckets; some handlers busy, some idle), judged by the real-answer test's
own measure (`test_real_prometheus._activity`): while an active series is neither on a line nor in
a shown group, no line is spent on series that do not move at all.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deploy.local.seed.generators import prometheus_response, unix_s
from schemas.events import Selection
from services.compaction import prometheus
from services.compaction.registry import compact_tool_result

from .test_prometheus_digest import _assert_counts
from .test_real_prometheus import _activity, _lines, _says_flat

TOOL = "query_prometheus"
BUCKETS = ("0.1", "0.2", "0.4", "1.0", "3.0", "8.0", "20.0", "60.0", "120.0", "+Inf")


def _answer(seed: int, busy: int, idle: int, buckets: int, points: int) -> dict[str, Any]:
    """`busy` handlers whose rate wanders (long floats, as a real rate() writes them), `idle` ones at
    0, each on one of two instances with `buckets` buckets (the same samples in every bucket, as when
    every request is faster than the smallest bound)."""
    rng = random.Random(seed)
    series = []
    for h in range(busy + idle):
        moving = h < busy
        level, rise = rng.uniform(0.05, 5), rng.random() < 0.5
        values = [_rate(rng, level, k / points, rise) if moving else 0.0 for k in range(points)]
        instance = f"127.0.0.1:{45879 if h % 2 else 58195}"
        for le in BUCKETS[:buckets]:
            labels = {"handler": f"/api/v1/h{h:02d}", "instance": instance, "job": "prometheus", "le": le}
            series.append((labels, [(unix_s(3, 31) + 2 * k, v) for k, v in enumerate(values)]))
    return prometheus_response(series)


def _rate(rng: random.Random, level: float, at: float, rise: bool) -> float:
    """A busy handler's rate: a ramp up or down to `level`, with a little noise."""
    return level * (at if rise else 1 - at) + rng.uniform(0, level / 50)


def _assert_no_flat_line_while_an_active_series_is_left_out(raw: dict[str, Any], budget: int) -> None:
    out = compact_tool_result(TOOL, raw, {}, budget=budget)
    assert out.tokens <= budget
    _assert_counts(raw, out)
    active, flat = _activity(raw)
    shown = _lines(raw, out)
    covered = {i for line, _, named in shown if not _says_flat(line) for i in named}
    if active - covered:
        for line, count, named in shown:
            assert not _says_flat(line), (line, sorted(active - covered), out.compact)
            assert count > 1 or named[0] not in flat, (line, sorted(active - covered), out.compact)


def test_a_cheap_flat_group_does_not_take_the_line_an_active_group_did_not_fit() -> None:
    """The recorded failure (v0.316.0, `rate_duration_buckets`: `20 series {le=*, handler=/-/ready}:
    flat 0` shown, 10 active series omitted) in its smallest generated form: the greedy selector
    skipped a busy group whose range did not fit the room left, then took the idle group's short
    line."""
    _assert_no_flat_line_while_an_active_series_is_left_out(_answer(0, 7, 1, 3, 3), 180)


def test_a_selection_that_names_a_flat_group_before_an_active_series_is_not_obeyed() -> None:
    """Whoever selects (a model, a recorded selection): a filler it names is dropped while an item
    that moves is left out, and counted with it."""
    raw = _answer(0, 7, 1, 3, 3)
    items = prometheus.draft(raw, {}, "e").items
    fillers = [it.id for it in items if it.filler]
    moving = [it.id for it in items if not it.filler]
    assert fillers and len(moving) > 1
    sel = Selection(ids=[*fillers, *moving[:1]], reason="hostile", model="test")
    out = compact_tool_result(TOOL, raw, {}, budget=180, recorded_selection=sel)
    _assert_counts(raw, out)
    assert out.selection == sel
    shown = out.compact["series"]
    assert len(shown) == 1 and shown[0] in next(it for it in items if it.id == moving[0]).forms


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(1, 9),
    st.integers(1, 6),
    st.integers(1, 10),
    st.integers(3, 60),
    st.sampled_from([120, 180, 250, 400]),
)
def test_no_flat_line_while_an_active_series_is_left_out(
    seed: int, busy: int, idle: int, buckets: int, points: int, budget: int
) -> None:
    _assert_no_flat_line_while_an_active_series_is_left_out(
        _answer(seed, busy, idle, buckets, points), budget
    )
