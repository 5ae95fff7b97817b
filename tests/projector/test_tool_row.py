"""The tool row takes its token count from the compactor instead of counting the compact again."""

from __future__ import annotations

import json

from deploy.local.seed.generators import generate_loki
from deploy.local.testdata import T0
from schemas.events import CompactedToolResult
from schemas.ids import message_id
from schemas.tokens import count_value_tokens
from services.compaction.registry import compact_tool_result
from services.projector.mapping import CacheDigest, Row, map_event

T = "1710406800.000100"


def compacted(raw: object) -> CompactedToolResult:
    outcome = compact_tool_result("query_loki", raw, {}, budget=8000)
    return CompactedToolResult(
        thread_ts=T,
        message_id=message_id(T, 1, "tools", 0),
        event_time=T0,
        round=1,
        tool_call_id="call_1",
        tool="query_loki",
        args={"q": '{app="api"}'},
        raw=raw,
        compact=outcome.compact,
        tokens=outcome.tokens,
        raw_tokens=outcome.raw_tokens,
        raw_sha256=outcome.raw_sha256,
        compactor_version=outcome.compactor_version,
        budget=outcome.budget,
        selection=outcome.selection,
    )


def test_the_compactors_count_is_the_count_of_the_stored_compact() -> None:
    event = compacted(generate_loki(7, lines=200))
    ops = map_event(event)  # the row and its digest, then the incident profile's facts (issue 37)
    stage, digest = ops[:2]
    assert isinstance(stage, Row) and stage.staged and isinstance(digest, CacheDigest)
    row = stage
    assert row.compact is not None
    assert json.loads(row.compact) == event.compact
    assert row.tokens == event.tokens == count_value_tokens(json.loads(row.compact))  # same text, same count
    assert digest.tokens == row.tokens and digest.compact == row.compact
    assert json.loads(row.content) == event.raw  # the raw, whole (key order is jsonb's business)


def test_non_finite_numbers_are_not_turned_into_null() -> None:
    event = compacted(generate_loki(7, lines=10)).model_copy(update={"raw": {"x": float("nan")}})
    stage = map_event(event)[0]
    assert isinstance(stage, Row) and stage.staged
    assert "NaN" in stage.content  # Postgres refuses it, so the event is dead-lettered, not altered
