"""Canonical JSON through orjson is byte for byte `json.dumps(sort_keys, compact, ensure_ascii=False)`.

Every hash, selection key and compact on a topic was made with `json`; a different byte would
change them all (invariant 8). Compared on generated values (the floats, integers, keys and
strings where the two encoders differ), on the loghub corpus and on the seed's raws.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_depth import examples  # tests/ is on sys.path (pytest's rootdir conftest)

from deploy.local.seed import (
    generate_events,
    generate_loki,
    generate_prometheus,
    generate_tempo,
    seed_incident,
)
from schemas.canonical import canonical_json, canonical_json_bytes, reference_json

ROOT = Path(__file__).resolve().parents[1]


def _outcome(fn: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(value)
    except Exception as exc:  # the same error class, or the same text
        return "raises", type(exc)


def _same(value: Any, finite: bool = False) -> None:
    expected = _outcome(reference_json, value)
    assert _outcome(lambda v: canonical_json(v, finite=finite), value) == expected
    encoded = _outcome(lambda v: reference_json(v).encode(), value)
    assert _outcome(lambda v: canonical_json_bytes(v, finite=finite), value) == encoded


# Text with what an encoder escapes or may refuse: controls, quotes, backslashes, DEL, U+2028/9,
# astral characters and lone surrogates.
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(
            ['"', "\\", "\x00", "\x1f", "\x7f", "\u2028", "\u2029", "\ud800", "\udfff", "é", "😀"]
        ),
    ),
    max_size=12,
)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e-3, max_value=1e-3),  # where json switches to exponents
    st.sampled_from([1e-4, 9.999999999999999e-05, 1e-5, 1e-7, 1e15, 1e16, 1e17, 1e21, 1e22, -0.0, 5e-324]),
)
INTS = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63, 2**64 - 1, 2**64, -(2**63) - 1]),
)
SCALARS = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT)
KEYS = st.one_of(TEXT, TEXT, st.integers(-5, 5), st.booleans(), st.none(), st.floats(allow_nan=False))
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.tuples(inner, inner),
        st.dictionaries(TEXT, inner, max_size=5),
        st.dictionaries(KEYS, inner, max_size=4),  # non-str keys, and keys json cannot sort
    ),
    max_leaves=30,
)


@settings(
    max_examples=examples(deep_run=3000, make_test=600),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(JSONISH)
def test_equal_to_json_dumps_on_generated_values(value: Any) -> None:
    _same(value)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


@settings(max_examples=examples(deep_run=1500, make_test=300), deadline=None)
@given(JSONISH)
def test_finite_values_may_keep_their_nulls(value: Any) -> None:
    if _finite(value):
        _same(value, finite=True)


@pytest.mark.parametrize(
    "value",
    [
        1e-05,
        -1e-07,
        [0.00012, 1e-4, 9e-5],
        {"a": 1e16, "b": 1e-16, "c": 123456789012345680.0},
        float("nan"),
        [float("inf"), None],
        {"x": -float("inf")},
        2**64,
        -(2**63) - 1,
        {1: "a", "b": 2},
        {"0.0000": "e-5", "s": ":0.00001,e-"},
        "\ud800",
        {"\udfff": 1},
        [[[[]]]],
        {},
        [],
        "",
        True,
        None,
        0,
        -0.0,
        10**4300 - 1 if sys.get_int_max_str_digits() == 0 else 10**300,
        ["é\u2028\x7f\x00"],
        {"b": 1, "a": {"d": [], "c": {}}},
    ],
)
def test_equal_on_the_edges(value: Any) -> None:
    _same(value)


def test_deep_nesting_falls_back_where_orjson_stops() -> None:
    deep: Any = 1
    for _ in range(400):  # orjson stops at 255 levels; json goes on
        deep = [deep]
    _same(deep)


def test_what_json_refuses_is_still_refused() -> None:
    from dataclasses import dataclass
    from datetime import UTC, datetime

    @dataclass
    class Point:
        x: int

    class Text(str):
        pass

    for value in (datetime(2026, 3, 14, tzinfo=UTC), Point(1), {1, 2}, b"x", object()):
        _same(value)
    _same({"k": Text("v"), Text("k2"): 1})  # a str subclass: json's own rendering


def _raws() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for path in sorted((ROOT / "benchmarks" / "corpus" / "loghub").glob("*.loki.json.gz")):
        out.append((path.name, json.loads(gzip.decompress(path.read_bytes()))))
    for path in sorted((ROOT / "tests" / "compactor" / "fixtures" / "real").rglob("*.json")):
        out.append((path.name, json.loads(path.read_text())))
    seed = seed_incident()
    for tool in ("query_loki", "query_prometheus", "get_pod_events", "query_tempo"):
        out.append((f"seed {tool}", seed.raw_for(tool)))
    out.append(("seed alert", seed.alertmanager_webhook))
    for i in range(40):  # the stream benchmark's raws
        out.append((f"generated {i}", generate_loki(i, lines=40, patterns=4)))
        out.append((f"generated {i}", generate_prometheus(i, series=2, points=20)))
        out.append((f"generated {i}", generate_events(i, events=8, pods=2)))
        out.append((f"generated {i}", generate_tempo(i)))
    return out


def test_equal_on_the_corpus_the_real_fixtures_and_the_seed() -> None:
    raws = _raws()
    assert len(raws) > 170
    for name, raw in raws:
        expected = reference_json(raw)
        assert canonical_json(raw) == expected, name
        assert canonical_json(raw, finite=True) == expected, name  # JSON decoded: no NaN
        assert canonical_json_bytes(raw, finite=True) == expected.encode(), name
