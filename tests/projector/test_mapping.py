"""The event -> operations mapping is pure; these tests need neither Kafka nor Postgres."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic_core import to_json

from deploy.local.testdata import T0, synthetic_round, synthetic_thread
from schemas.canonical import reference_json
from schemas.events import (
    EVENT_TYPES,
    AiMessage,
    AlertReceived,
    Claim,
    EventBase,
    HumanMessage,
    JudgeVerdict,
    ReRendered,
    RoundCommitted,
    ThreadPost,
    ToolCall,
    parse_event,
)
from schemas.ids import canonical_args_hash, message_id
from schemas.tokens import count_value_tokens
from services.projector import mapping
from services.projector.decoding import Incoming, decode
from services.projector.mapping import (
    CacheDigest,
    CommitRound,
    MappingError,
    ReRender,
    Row,
    UpsertState,
    map_event,
)
from services.projector.profile_facts import ProfileFact

T = "1710406800.000100"


def ops_of_thread() -> list:
    return [op for e in synthetic_thread(T) for op in map_event(e)]


def test_seed_shaped_thread_maps_to_20_rows_two_rounds() -> None:
    ops = ops_of_thread()
    visible = [op for op in ops if isinstance(op, Row) and not op.staged]
    staged = [op for op in ops if isinstance(op, Row) and op.staged]
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
            if isinstance(op, Row):
                row = op
                shown = json.loads(row.compact) if row.compact is not None else json.loads(row.content)
                assert row.tokens == count_value_tokens(shown)
                assert row.created_at == event.event_time
                assert row.id == event.message_id


def test_row_content_per_role() -> None:
    rows = {op.role: op for op in ops_of_thread() if isinstance(op, Row)}
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
    assert isinstance(ops[0], Row) and ops[0].staged


def test_alert_upserts_state_and_keeps_opened_at() -> None:
    alert = synthetic_thread(T)[0]
    state = next(op for op in map_event(alert) if isinstance(op, UpsertState))
    assert (state.status, state.service, state.keep_opened_at) == ("open", "checkout-api", True)


def test_human_turn_is_round_null_even_if_the_event_names_a_round() -> None:
    human = next(e for e in synthetic_thread(T) if e.type == "human_message")  # type: ignore[attr-defined]
    moved = human.model_copy(update={"round": 3})
    op, fact = map_event(moved)  # the row, and the fact it adds to the incident's profile
    assert isinstance(op, Row) and op.round is None and not op.staged
    assert isinstance(fact, ProfileFact) and not fact.in_round


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


def test_every_event_type_has_its_mapping() -> None:
    """map_event looks the mapping up by exact type: a new event type must be given one (even none)."""
    assert set(mapping._MAPPERS) == set(EVENT_TYPES)


def test_mapping_is_deterministic() -> None:
    assert ops_of_thread() == ops_of_thread()


# --- the rows are the reference rendering, byte for byte ------------------------------------------

ODD = 'tab\there\nnew\rline back\\slash \\N "q" é 漢字 \u2028 \x00\x01 😀'
AWKWARD = {
    "tiny": 1.5e-7,
    "small": 0.00001,
    "big": 1e20,
    "wide": 2**70,
    "none": None,
    "s": ODD,
    "z": [1, 2.0, -0.0],
}

# The content columns by role: the event's own fields, as canonical JSON (the tool row: raw and compact).
CONTENT_FIELDS = {
    "alert": {"status", "service", "alertname", "fingerprint", "window_start", "window_end", "alert"},
    "human": {"user", "ts", "text", "mention", "edit_of"},
    "ai": {"node", "text", "tool_calls", "model", "claims"},
    "judge": {"grounded", "questions", "graded_claims", "hypothesis_id", "model"},
    "post": {"kind", "text", "model"},
}


def awkward_events() -> list[EventBase]:
    """Every row kind with what is hard to render: COPY's special characters, non-ASCII, floats that
    `json` and orjson write differently, integers beyond 64 bits, nulls."""
    return [
        HumanMessage(
            thread_ts=T, message_id=message_id(T, None, "human", "1\t\r\n\\"), event_time=T0,
            user="U\t1", ts="1.2", text=ODD,  # an edit is no row of its own: see test_edit_*
        ),
        AlertReceived(
            thread_ts=T, message_id=message_id(T, None, "alert", 0), event_time=T0, status="firing",
            service="s\\x", alertname="A", fingerprint="f", window_start=T0 - timedelta(minutes=5),
            window_end=T0, alert=AWKWARD,
        ),
        AiMessage(
            thread_ts=T, message_id=message_id(T, 1, "investigate", 0), event_time=T0, round=1,
            node="investigate", text=ODD, model="m", claims=[Claim(text=ODD, evidence_ids=["a"])],
            tool_calls=[ToolCall(id="c\t1", name="q", args=AWKWARD)],
        ),
        JudgeVerdict(
            thread_ts=T, message_id=message_id(T, 1, "judge", 0), event_time=T0, round=1, grounded=True,
            questions=[ODD], graded_claims=[AWKWARD], hypothesis_id="h", model="m",
        ),
        ThreadPost(
            thread_ts=T, message_id=message_id(T, 1, "post", 0), event_time=T0, round=1, kind="summary",
            text=ODD, model="m",
        ),
    ]  # fmt: skip


def copy_field(value: str | None) -> str:
    """COPY's text format by its definition, character by character (the reference for Row.copy_text)."""
    if value is None:
        return "\\N"
    escapes = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
    return "".join(escapes.get(c, c) for c in value)


def reference_copy_text(row: Row) -> str:
    fields = [
        row.id,
        row.thread_ts,
        None if row.round is None else str(row.round),
        row.role,
        row.tool_call_id,
    ]
    fields += [row.content, row.compact, str(row.tokens), row.created_at.isoformat()]
    return "\t".join(map(copy_field, fields))


def reference_content(event: Any, role: str) -> tuple[str, str | None]:
    if role == "tool":
        # Written as they came (pydantic's order; jsonb keeps none), a NaN as NaN, which Postgres refuses.
        raw, compact = (to_json(v, inf_nan_mode="constants").decode() for v in (event.raw, event.compact))
        return raw, compact
    return reference_json(event.model_dump(mode="json", include=CONTENT_FIELDS[role])), None


@pytest.mark.parametrize("events", [awkward_events(), synthetic_thread(T)], ids=["awkward", "seed-shaped"])
def test_rows_are_the_reference_rendering_byte_for_byte(events: list[EventBase]) -> None:
    """Decoded from the bytes on the topic, every row's JSON is `json`'s canonical text, its tokens
    the model's count of what it is shown, and its COPY line the text format of those columns."""
    rows = 0
    for k, event in enumerate(events):
        record = event.to_bytes()
        decoded, seen = decode(Incoming(0, k, event.key(), record, 0.0)), parse_event(record)
        assert decoded.error is None
        for op in decoded.ops:
            if isinstance(op, CacheDigest):
                assert op.args_hash == hashlib.sha256(reference_json(seen.args).encode()).hexdigest()  # type: ignore[attr-defined]
            if not isinstance(op, Row):
                continue
            row, rows = op, rows + 1
            assert (row.content, row.compact) == reference_content(seen, row.role)
            assert row.tokens == count_value_tokens(json.loads(row.compact or row.content))
            assert row.copy_text == reference_copy_text(row)
    assert rows >= len(CONTENT_FIELDS)


def test_the_digest_cache_key_hashes_the_reference_rendering() -> None:
    for args in ({}, AWKWARD, {"nan": float("nan"), "k": {"b": 1, "a": [None, 1e-5]}}):
        assert canonical_args_hash(args) == hashlib.sha256(reference_json(args).encode()).hexdigest()


def test_a_non_finite_number_in_a_re_rendering_is_written_as_json_writes_it() -> None:
    """A NaN is not turned into null: Postgres refuses the text, so the event is dead-lettered."""
    record = json.dumps(
        {
            "schema_version": 1, "type": "re_rendered", "thread_ts": T, "event_time": "2026-01-01T00:00:00Z",
            "message_id": message_id(T, None, "rerender", 0), "target_id": message_id(T, 1, "tools", 0),
            "compact": {"h": float("nan"), "n": None, "t": 1e-7}, "tokens": 1, "policy": "headline",
        }
    ).encode()  # fmt: skip
    (op,) = decode(Incoming(0, 0, None, record, 0.0)).ops
    assert isinstance(op, ReRender) and op.compact == '{"h":NaN,"n":null,"t":1e-07}'
