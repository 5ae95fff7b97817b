"""Invariant 7: budgets are counted in cl100k_base. The fast counter must equal tiktoken, always."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_depth import examples  # tests/ is on sys.path (pytest's rootdir conftest)

from deploy.local.seed.generators import generate_events, generate_loki, generate_prometheus
from deploy.local.seed.incident import seed_incident
from schemas import tokens
from schemas.events import canonical_json
from schemas.tokens import count_tokens, count_value_tokens, encoding


def reference(text: str) -> int:
    """tiktoken's own count, the way the project counted before the fast path existed."""
    return len(encoding().encode(text, disallowed_special=()))


# Characters that sit on the piece boundaries the fast path relies on: ASCII and non-ASCII digits
# (\p{N}: Arabic-Indic, superscript, roman numeral, fraction), every kind of space, contractions,
# punctuation, letters with and without case, and special-token text.
TRICKY = [
    *list("0123456789"),
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\u3000",
    "\xa0",
    "'s",
    "'ll",
    "'",
    '"',
    ",",
    ".",
    "-",
    ":",
    "=",
    "[",
    "]",
    "{",
    "}",
    "a",
    "Z",
    "é",
    "ß",
    "٣",
    "²",
    "Ⅻ",
    "½",
    "中文",
    "<|endoftext|>",
    "FATAL",
    "ms",
    "\x00",
]


@pytest.mark.slow
@settings(max_examples=examples(deep_run=3000, make_test=600), deadline=None)
@given(st.lists(st.sampled_from(TRICKY), max_size=60))
def test_count_equals_tiktoken_on_boundary_heavy_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert count_tokens(text) == reference(text)


@settings(max_examples=examples(deep_run=1000, make_test=300), deadline=None)
@given(st.text(max_size=300))
def test_count_equals_tiktoken_on_any_text(text: str) -> None:
    assert count_tokens(text) == reference(text)


def test_every_one_to_three_digit_string_is_one_token() -> None:
    """The fast path counts a run of n digits as ceil(n/3) tokens; that holds only if this holds."""
    for width in (1, 2, 3):
        for i in range(10**width):
            assert len(encoding().encode_ordinary(f"{i:0{width}d}")) == 1


def test_count_equals_tiktoken_on_real_raws_cold_and_warm() -> None:
    seed = seed_incident()
    raws = [
        generate_loki(7, lines=400, patterns=6),
        generate_prometheus(8, series=4, points=60),
        generate_events(9, events=30, pods=3),
        seed.loki,
        *(seed.raw_for(tool) for tool in ("query_prometheus", "query_tempo", "get_pod_events")),
    ]
    for raw in raws:
        text = canonical_json(raw)
        tokens._segment_tokens.clear()
        cold = count_tokens(text)
        assert cold == reference(text)
        assert count_tokens(text) == cold  # warm: served from the segment cache
        assert count_value_tokens(raw) == reference(
            json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        )


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens._segment_tokens, "limit", 50)
    tokens._segment_tokens.clear()
    text = " ".join(f"word{i} x{i}y" for i in range(2000))
    assert count_tokens(text) == reference(text)
    assert len(tokens._segment_tokens) <= 50


def test_long_digit_runs() -> None:
    for text in ("id=" + "7" * 5000 + ";", "x" + "1234567" * 900, "a:" + "9" * 4095 + "," + "8" * 4096 + "]"):
        assert count_tokens(text) == reference(text)


def test_known_count_offline() -> None:
    assert count_tokens("FATAL ERROR: JS heap out of memory") == 9
