"""The compactors' small memo caches (issue 20): a cached answer is the answer, and each cache is bounded.

Digest bytes must not depend on what the process saw before, so each cache is checked against the
computation it skips, cold and warm, and past its bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from services.compaction import log_anatomy, timefmt

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _iso_reference(ns: int) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    base = (EPOCH + timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}".rstrip("0") + "Z" if frac else f"{base}Z"


@given(st.integers(min_value=timefmt.MIN_NS, max_value=timefmt.MAX_NS))
def test_iso_from_ns_is_the_same_cold_and_warm(ns: int) -> None:
    timefmt._SECOND_TEXT.clear()
    cold = timefmt.iso_from_ns(ns)
    warm = timefmt.iso_from_ns(ns)
    assert cold == warm == _iso_reference(ns)
    # another time in the same second reuses the second's text, and keeps its own fraction
    other = ns - ns % 1_000_000_000 + (ns + 1) % 1_000_000_000
    assert timefmt.iso_from_ns(other) == _iso_reference(other)


def test_the_second_cache_is_bounded() -> None:
    timefmt._SECOND_TEXT.clear()
    start = 1_773_457_964 * 1_000_000_000
    for i in range(timefmt._SECOND_TEXT.limit + 10):
        timefmt.iso_from_ns(start + i * 1_000_000_000)
    assert len(timefmt._SECOND_TEXT) <= timefmt._SECOND_TEXT.limit
    assert timefmt.iso_from_ns(start) == _iso_reference(start)


def _spans_reference(line: str) -> tuple[tuple[int, int], ...]:
    return tuple(m.span() for m in log_anatomy._HEADER_TOKEN.finditer(line))[: log_anatomy.MAX_HEADER_TOKENS]


@given(st.text(alphabet=st.sampled_from(list("ab1:[] |-.\tZ")), max_size=300))
def test_header_tokens_are_the_same_cold_and_warm(line: str) -> None:
    log_anatomy._header_spans.clear()
    assert log_anatomy.header_tokens(line) == _spans_reference(line)
    assert log_anatomy.header_tokens(line) == _spans_reference(line)


def test_long_lines_are_not_kept_and_the_cache_is_bounded() -> None:
    log_anatomy._header_spans.clear()
    long_line = "2026-03-14 03:12:44 INFO " + "x" * log_anatomy._SPANS_LINE_MAX
    assert log_anatomy.header_tokens(long_line) == _spans_reference(long_line)
    assert long_line not in log_anatomy._header_spans
    for i in range(log_anatomy._header_spans.limit + 10):
        log_anatomy.header_tokens(f"03:12:{i} INFO message {i}")
    assert len(log_anatomy._header_spans) <= log_anatomy._header_spans.limit
