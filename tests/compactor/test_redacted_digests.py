"""Every compactor's digest is drawn from the raw redacted: no credential reaches the compact, at
any budget, and the facts of those lines (counts, times, pattern words) still do."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deploy.local.secret_testdata import (
    LOKI_FACTS,
    SECRETS,
    leaked,
    loki_with_secrets,
    passthrough_with_secret,
    pod_events_with_secret,
    prometheus_with_secret,
    tempo_with_secret,
    tool_error_with_secret,
)
from schemas.events import canonical_json
from services.compaction.registry import compact_tool_result
from services.compactor.stream import error_compact

RAWS = [
    ("query_loki", loki_with_secrets),
    ("get_pod_events", pod_events_with_secret),
    ("query_prometheus", prometheus_with_secret),
    ("query_tempo", tempo_with_secret),
    ("some_other_tool", passthrough_with_secret),
    ("query_loki", tool_error_with_secret),
]


def _text(raw: Any) -> str:
    return canonical_json(raw)


@pytest.mark.parametrize(("tool", "make"), RAWS, ids=[m.__name__ for _, m in RAWS])
@pytest.mark.parametrize("budget", [None, 150, 300, 2000])
def test_no_secret_reaches_any_digest_at_any_budget(tool: str, make: Any, budget: int | None) -> None:
    raw = make()
    assert leaked(_text(raw)), "the raw must hold a secret, or the test proves nothing"
    out = compact_tool_result(tool, raw, {}, budget=budget)
    assert leaked(_text(out.compact)) == []
    assert "[REDACTED:" in _text(out.compact)
    assert out.tokens <= out.budget
    assert leaked(_text(raw))  # the raw itself is untouched (kept verbatim as evidence)


def test_loki_lines_that_differ_only_in_the_secret_stay_one_pattern_with_its_count() -> None:
    out = compact_tool_result("query_loki", loki_with_secrets(), {}, budget=300)
    text = _text(out.compact)
    for fact in LOKI_FACTS:
        assert fact in text, (fact, text)
    assert "38 lines" in text and "30× 03:00:00–03:00:29" in text  # totals, count and first–last survive


def test_pod_events_keep_their_summed_count_and_times() -> None:
    text = _text(compact_tool_result("get_pod_events", pod_events_with_secret(), {}, budget=150).compact)
    assert "20" in text and "BackOff" in text and "DB_PASSWORD=[REDACTED:password]" in text


def test_the_tool_error_keeps_the_status_and_host_but_not_the_password() -> None:
    text = _text(compact_tool_result("query_loki", tool_error_with_secret(), {}).compact)
    assert "HTTP 502" in text and "loki.monitoring:3100" in text and "[REDACTED:basic-auth]" in text


def test_an_uncompactable_raw_error_reason_is_redacted() -> None:
    reason = f"raw format: expected a list at data.result, got 'postgres://u:{SECRETS['basic-auth']}@db'"
    assert leaked(json.dumps(error_compact(reason, "ev-1"))) == []


@pytest.mark.parametrize(("tool", "make"), RAWS, ids=[m.__name__ for _, m in RAWS])
def test_the_same_raw_gives_the_same_redacted_bytes_with_or_without_the_line_cache(
    tool: str, make: Any
) -> None:
    """Invariant 8 with the redactor inside: a replay (a new process, an empty cache) re-derives the same bytes."""
    from services.boundary import redact

    first = compact_tool_result(tool, make(), {})
    redact._redact_line.cache_clear()
    again = compact_tool_result(tool, make(), {})
    assert _text(first.compact) == _text(again.compact)
    assert (first.raw_sha256, first.compactor_version) == (again.raw_sha256, again.compactor_version)
