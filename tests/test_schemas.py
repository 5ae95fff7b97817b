"""The event contract: canonical round trips, clear decode errors, and a fresh JSON Schema export."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest

from schemas import export_jsonschema
from schemas.events import (
    EVENT_TYPES,
    AiMessage,
    AlertReceived,
    Claim,
    CompactedToolResult,
    DeadLetter,
    EventBase,
    EventDecodeError,
    HumanMessage,
    IncidentStateChanged,
    JudgeVerdict,
    MessageDeleted,
    RecalledIncident,
    RecallRecorded,
    ReRendered,
    RoundCommitted,
    Selection,
    SlackPostRecorded,
    ThreadPost,
    ToolCall,
    ToolResult,
    Wake,
    parse_event,
)
from schemas.ids import message_id, split_thread_key, thread_key, voice_id

T = "1700000000.000100"
AT = datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)
W0, W1 = datetime(2026, 3, 1, 11, 30, tzinfo=UTC), datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def samples() -> list[EventBase]:
    """One valid value of every event type."""
    call = ToolCall(id="call_1", name="query_loki", args={"query": '{app="api"}'})
    return [
        AlertReceived(thread_ts=T, message_id=message_id(T, None, "alert", 0), event_time=AT, status="firing",
                      service="api", alertname="HighErrorRate", fingerprint="abc123", window_start=W0,
                      window_end=W1, alert={"labels": {"severity": "page"}}),
        IncidentStateChanged(thread_ts=T, message_id=message_id(T, None, "state", 0), event_time=AT,
                             status="investigating", service="api", window_start=W0, window_end=W1, opened_at=AT),
        HumanMessage(thread_ts=T, message_id=message_id(T, None, "human", "1700000001.0002"), event_time=AT,
                     user="U1", ts="1700000001.0002", text="Zürich DB is slow — 500s since 11:58", mention=True),
        AiMessage(thread_ts=T, message_id=message_id(T, 1, "investigate", 0), event_time=AT, round=1,
                  node="investigate", text="checking logs", tool_calls=[call], model="m",
                  claims=[Claim(text="5xx up", evidence_ids=["x"])]),
        ToolResult(thread_ts=T, message_id=message_id(T, 1, "tools", 0), event_time=AT, round=1,
                   tool_call_id="call_1", tool="query_loki", args=call.args, raw={"data": {"result": []}}),
        CompactedToolResult(thread_ts=T, message_id=message_id(T, 1, "tools", 0), event_time=AT, round=1,
                            tool_call_id="call_1", tool="query_loki", args=call.args, raw={"data": {}},
                            compact={"lines": 0}, tokens=3, raw_tokens=9, raw_sha256="0" * 64,
                            compactor_version="1", budget=400,
                            selection=Selection(ids=["p1"], reason="errors", model="m")),
        JudgeVerdict(thread_ts=T, message_id=message_id(T, 1, "judge", 0), event_time=AT, round=1, grounded=False,
                     questions=["which pod?"], hypothesis_id=message_id(T, 1, "hypothesis", 0), model="m"),
        ThreadPost(thread_ts=T, message_id=message_id(T, 1, "post", 0), event_time=AT, round=1, kind="questions",
                   text="which pod?", model="m"),
        SlackPostRecorded(thread_ts=T, message_id=voice_id(message_id(T, 1, "post", 0), "posted"), event_time=AT,
                          round=1, post_id=message_id(T, 1, "post", 0), phase="posted", channel="C0INC",
                          slack_ts="1700000100.000200"),
        RoundCommitted(thread_ts=T, message_id=message_id(T, 1, "commit", 0), event_time=AT, round=1,
                       message_ids=[message_id(T, 1, "investigate", 0)]),
        ReRendered(thread_ts=T, message_id=message_id(T, 2, "rerender", 0), event_time=AT, round=2,
                   target_id=message_id(T, 1, "tools", 0), compact="5xx up (see evidence)", tokens=5,
                   policy="headline"),
        Wake(thread_ts=T, message_id=message_id(T, None, "wake", 0), event_time=AT, reason="mention",
             trigger_message_id=message_id(T, None, "human", "1700000001.0002"), user="U1"),
        MessageDeleted(thread_ts=T, message_id=message_id(T, None, "deleted", "1700000001.0002"), event_time=AT,
                       ts="1700000001.0002", user="U1"),
        RecallRecorded(thread_ts=T, message_id=message_id(T, None, "recall", 0), event_time=AT, channel="C0PAY",
                       hits=[RecalledIncident(thread="C0PAY-1699999000.000100", kind="concurrent", score_milli=612,
                                              reasons=["same cluster"],
                                              link="https://slack.com/archives/C0PAY/p1699999000000100")]),
    ]  # fmt: skip


def test_samples_cover_every_event_type() -> None:
    assert {type(e) for e in samples()} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", samples(), ids=lambda e: type(e).__name__)
def test_round_trip_is_exact_and_canonical(event: EventBase) -> None:
    data = event.to_bytes()
    back = parse_event(data)
    assert back == event and type(back) is type(event)
    assert back.to_bytes() == data  # same event, same bytes
    assert (
        data
        == json.dumps(json.loads(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    assert event.key() == T.encode()


@pytest.mark.parametrize("event", samples(), ids=lambda e: type(e).__name__)
def test_wire_json_validates_against_the_exported_schema(event: EventBase) -> None:
    files = export_jsonschema.render_all()
    for name in (f"{type(event).__name__}.json", "ThreadEvent.json"):
        schema = json.loads(files[name])
        jsonschema.Draft202012Validator(schema).validate(json.loads(event.to_bytes()))


def test_exported_schema_rejects_what_the_model_rejects() -> None:
    schema = json.loads(export_jsonschema.render_all()["HumanMessage.json"])
    wire: dict[str, Any] = json.loads(samples()[2].to_bytes())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**wire, "unexpected": 1}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in wire.items() if k != "text"}, schema)


def test_committed_json_schema_export_is_fresh() -> None:
    assert export_jsonschema.stale() == [], "run: .venv/bin/python -m schemas.export_jsonschema"


def test_stale_export_is_detected(tmp_path: Any) -> None:
    export_jsonschema.write(tmp_path)
    assert export_jsonschema.stale(tmp_path) == []
    (tmp_path / "Wake.json").write_text("{}\n")
    (tmp_path / "Gone.json").write_text("{}\n")
    assert export_jsonschema.stale(tmp_path) == ["Gone.json", "Wake.json"]


def test_bad_schema_version_is_a_clear_error() -> None:
    wire = json.loads(samples()[2].to_bytes())
    for version in (2, None, "1"):
        with pytest.raises(EventDecodeError, match=r"unsupported schema_version .* \(expected 1\)"):
            parse_event(json.dumps({**wire, "schema_version": version}))


def test_truncated_json_is_a_clear_one_line_error() -> None:
    data = samples()[3].to_bytes()
    with pytest.raises(EventDecodeError, match=r"^not JSON: ") as info:
        parse_event(data[: len(data) // 2])
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda w: {**w, "type": "nope"}, "invalid event"),
        (lambda w: {**w, "message_id": "other:-:human:1"}, "does not start with thread_ts"),
        (lambda w: {**w, "event_time": "2026-03-01T12:00:05"}, "invalid event"),  # naive time
        (lambda w: {**w, "extra_field": 1}, "invalid event"),
        (lambda w: [w], "not a JSON object"),
    ],
)
def test_invalid_events_are_refused_with_a_reason(mutate: Any, reason: str) -> None:
    wire = json.loads(samples()[2].to_bytes())
    with pytest.raises(EventDecodeError, match=reason) as info:
        parse_event(json.dumps(mutate(wire)).encode())
    assert "\n" not in str(info.value)


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(EventDecodeError, match=r"^not JSON"):
        parse_event(b"\xff\xfe{")


def test_events_are_frozen() -> None:
    event = samples()[2]
    with pytest.raises(ValueError):
        event.text = "edited"  # type: ignore[attr-defined]


def test_dead_letter_round_trips() -> None:
    letter = DeadLetter(reason="not JSON", stage="projector", source_topic="incident.events", partition=0,
                        offset=7, key=T, payload="{trunc", event_time=AT)  # fmt: skip
    assert DeadLetter.model_validate_json(letter.to_bytes()) == letter


def test_a_thread_is_its_channel_and_its_ts() -> None:
    """A Slack ts is unique only within its channel: two channels with the same ts are two threads."""
    a, b = thread_key("C0AAA", "1700000000.000100"), thread_key("C0BBB", "1700000000.000100")
    assert a != b and split_thread_key(a) == ("C0AAA", "1700000000.000100")
    assert ":" not in a  # ids split on ':'
    assert message_id(a, 1, "post", 0).split(":", 1)[0] == a
    assert split_thread_key("1700000000.000100") == (None, "1700000000.000100")  # a key of old, or an alert's
    assert thread_key(None, "1700000000.000100") == "1700000000.000100"


def _numbers(schema: Any) -> list[str]:
    """Where a JSON Schema allows a number (a float-typed field), as paths."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "number" or (
                isinstance(node.get("type"), list) and "number" in node["type"]
            ):
                found.append(path)
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}/{i}")

    walk(schema, "")
    return found


@pytest.mark.parametrize("model", [*EVENT_TYPES, DeadLetter], ids=lambda m: m.__name__)
def test_no_model_has_a_float_field_so_its_dump_is_finite(model: type[Any]) -> None:
    """`model_bytes` takes orjson's path on the word that a json-mode dump holds no NaN: true only while no
    field is float-typed (pydantic keeps a NaN there). A float field must come with the plain path."""
    assert _numbers(model.model_json_schema()) == []


def test_the_float_check_sees_a_float_field() -> None:
    from pydantic import BaseModel

    class WithFloat(BaseModel):
        ratio: float | None = None

    assert _numbers(WithFloat.model_json_schema())
    assert WithFloat(ratio=float("nan")).model_dump(mode="json") != {"ratio": None}  # why it matters


@pytest.mark.parametrize("event", samples(), ids=lambda e: type(e).__name__)
def test_event_bytes_are_the_reference_json(event: EventBase) -> None:
    from schemas.canonical import reference_json

    assert event.to_bytes() == reference_json(event.model_dump(mode="json")).encode()
    letter = DeadLetter(reason="r", stage="s", source_topic="t", payload="p", event_time=AT)
    assert letter.to_bytes() == reference_json(letter.model_dump(mode="json")).encode()


def test_a_compacted_tool_result_is_a_tool_result_with_its_fields_first_in_their_order() -> None:
    from schemas.events import CompactedToolResult, ToolResult

    assert issubclass(CompactedToolResult, ToolResult)
    inherited = list(CompactedToolResult.model_fields)[: len(ToolResult.model_fields)]
    assert inherited == list(ToolResult.model_fields)  # the wire order the golden bytes were made with
    assert CompactedToolResult.model_fields["type"].default == "tool_result_compacted"
