"""The event -> operations mapping is pure; these tests need neither Kafka nor Postgres."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from deploy.local.testdata import T0, synthetic_round, synthetic_thread
from schemas.events import AiMessage, ReRendered, RoundCommitted, ToolCall
from schemas.ids import canonical_args_hash, message_id
from schemas.tokens import count_value_tokens
from services.projector.mapping import (
    CacheDigest,
    CommitRound,
    InsertRow,
    MappingError,
    ReRender,
    StageRow,
    UpsertState,
    map_event,
)

T = "1710406800.000100"


def ops_of_thread() -> list:
    return [op for e in synthetic_thread(T) for op in map_event(e)]


def test_seed_shaped_thread_maps_to_20_rows_two_rounds() -> None:
    ops = ops_of_thread()
    visible = [op.row for op in ops if isinstance(op, InsertRow)]
    staged = [op.row for op in ops if isinstance(op, StageRow)]
    commits = [op for op in ops if isinstance(op, CommitRound)]
    assert [r.role for r in visible] == ["alert"] + ["human"] * 5
    assert all(r.round is None for r in visible)
    assert len(staged) == 14 and all(r.round in (1, 2) for r in staged)
    assert [c.round for c in commits] == [1, 2]
    assert set(commits[0].message_ids) == {r.id for r in staged if r.round == 1}


def test_tokens_count_coalesce_compact_content_and_created_at_is_event_time() -> None:
    events = synthetic_thread(T)
    for event in events:
        for op in map_event(event):
            if isinstance(op, InsertRow | StageRow):
                row = op.row
                shown = json.loads(row.compact) if row.compact is not None else json.loads(row.content)
                assert row.tokens == count_value_tokens(shown)
                assert row.created_at == event.event_time
                assert row.id == event.message_id


def test_row_content_per_role() -> None:
    rows = {op.row.role: op.row for op in ops_of_thread() if isinstance(op, InsertRow | StageRow)}
    assert set(json.loads(rows["alert"].content)) == {
        "status",
        "service",
        "alertname",
        "fingerprint",
        "window_start",
        "window_end",
        "alert",
    }
    assert set(json.loads(rows["human"].content)) == {"user", "ts", "text", "mention", "edit_of"}
    assert set(json.loads(rows["ai"].content)) == {"node", "text", "tool_calls", "model", "claims"}
    assert set(json.loads(rows["judge"].content)) == {
        "grounded",
        "questions",
        "graded_claims",
        "hypothesis_id",
        "model",
    }
    assert set(json.loads(rows["post"].content)) == {"kind", "text", "model"}
    tool = rows["tool"]
    assert json.loads(tool.content)["data"]["resultType"] == "streams"  # the raw, verbatim
    assert json.loads(tool.compact or "null")["total_lines"] == 5
    assert tool.tool_call_id and tool.tool_call_id.startswith("call_")
    for role in ("alert", "human", "ai", "judge", "post"):
        assert rows[role].compact is None


def test_tool_result_writes_the_digest_cache_keyed_by_canonical_args() -> None:
    event = next(e for e in synthetic_thread(T) if e.type == "tool_result_compacted")  # type: ignore[attr-defined]
    ops = map_event(event)
    digest = next(op for op in ops if isinstance(op, CacheDigest))
    assert digest.args_hash == canonical_args_hash(event.args)  # type: ignore[attr-defined]
    assert digest.message_id == event.message_id
    assert isinstance(ops[0], StageRow)


def test_alert_upserts_state_and_keeps_opened_at() -> None:
    alert = synthetic_thread(T)[0]
    state = next(op for op in map_event(alert) if isinstance(op, UpsertState))
    assert (state.status, state.service, state.keep_opened_at) == ("open", "checkout-api", True)


def test_human_turn_is_round_null_even_if_the_event_names_a_round() -> None:
    human = next(e for e in synthetic_thread(T) if e.type == "human_message")  # type: ignore[attr-defined]
    moved = human.model_copy(update={"round": 3})
    (op,) = map_event(moved)
    assert isinstance(op, InsertRow) and op.row.round is None


def test_ai_with_tool_calls_outside_a_round_is_refused() -> None:
    event = AiMessage(
        thread_ts=T,
        message_id=message_id(T, None, "investigate", 0),
        event_time=T0,
        node="investigate",
        text="x",
        model="m",
        tool_calls=[ToolCall(id="c1", name="query_loki", args={})],
    )
    with pytest.raises(MappingError, match="outside a round"):
        map_event(event)


def test_id_round_must_match_event_round() -> None:
    event = AiMessage(
        thread_ts=T,
        message_id=message_id(T, 2, "investigate", 0),
        event_time=T0,
        round=1,
        node="investigate",
        text="x",
        model="m",
    )
    with pytest.raises(MappingError, match="names round"):
        map_event(event)


def test_marker_listing_another_round_is_refused() -> None:
    marker = RoundCommitted(
        thread_ts=T,
        message_id=message_id(T, 1, "commit", 0),
        event_time=T0,
        round=1,
        message_ids=[message_id(T, 2, "post", 0)],
    )
    with pytest.raises(MappingError, match="outside"):
        map_event(marker)


def test_marker_keeps_listed_order() -> None:
    round_events = synthetic_round(T, 1, T0)
    (op,) = map_event(round_events[-1])
    assert isinstance(op, CommitRound)
    assert list(op.message_ids) == [e.message_id for e in round_events[:-1]]


def test_re_render_updates_compact_and_recounts_tokens() -> None:
    compact = {"headline": "api heap exhausted 09:02", "evidence": "x"}
    event = ReRendered(
        thread_ts=T,
        message_id=message_id(T, 3, "rerender", 0),
        event_time=T0 + timedelta(hours=1),
        round=3,
        target_id=message_id(T, 1, "tools", 0),
        compact=compact,
        tokens=999,
        policy="headline",
    )
    (op,) = map_event(event)
    assert isinstance(op, ReRender)
    assert op.target_id == message_id(T, 1, "tools", 0)
    assert op.tokens == count_value_tokens(compact)


def test_mapping_is_deterministic() -> None:
    assert ops_of_thread() == ops_of_thread()
