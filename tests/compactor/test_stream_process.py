"""The stream's per-record decision (services.compactor.stream.process), without Kafka.

The faust worker only moves the bytes this function decides, so these pin down
pass-through bytes, the compacted event, the selection recording and every
dead-letter reason. The same behaviour against the real broker: test_stream_worker.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from deploy.local.testdata import loki, repetitive
from schemas.events import CompactedToolResult, HumanMessage, Selection, ToolResult, parse_event
from services.compaction.registry import COMPACTOR_VERSION, raw_sha256
from services.compaction.selector import Candidate, LocalDeterministicSelector
from services.compactor.stream import Compacted, Dead, Forward, process, selection_key
from services.compactor.stream_selector import CountingSelector, load_selector

NOW = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)
TS = "1773458400.000100"


def tool_result(raw: Any, tool: str = "query_loki", i: int = 0) -> ToolResult:
    return ToolResult(
        thread_ts=TS,
        message_id=f"{TS}:1:tools:{i}",
        event_time=NOW,
        round=1,
        tool_call_id=f"call_{i}",
        tool=tool,
        args={"query": '{app="x"}'},
        raw=raw,
        alert_context={"service": "checkout-api"},
    )


def run(value: bytes | None, store: dict[str, Selection] | None = None, **kw: Any) -> Any:
    store = {} if store is None else store
    return process(value, key=TS.encode(), topic="in", partition=3, offset=41, recorded=store.get, **kw)


class Counting:
    model = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def select(self, candidates: list[Candidate], budget: int, context: dict[str, Any]) -> Selection:
        self.calls += 1
        return LocalDeterministicSelector().select(candidates, budget, context)


def test_non_tool_event_is_forwarded_as_the_same_bytes() -> None:
    human = HumanMessage(
        thread_ts=TS, message_id=f"{TS}:-:human:1", event_time=NOW, user="U1", ts="1", text="hi"
    )
    # Non-canonical spacing on purpose: the forward must not re-serialise.
    value = json.dumps(human.model_dump(mode="json"), indent=1).encode()
    result = run(value)
    assert isinstance(result, Forward)
    assert result.value is value


def test_tool_result_becomes_a_compacted_event_with_raw_beside_compact() -> None:
    event = tool_result(repetitive(60))
    result = run(event.to_bytes())
    assert isinstance(result, Compacted)
    out = parse_event(result.value)
    assert isinstance(out, CompactedToolResult)
    assert out.to_bytes() == result.value  # canonical bytes
    assert out.raw == event.raw and out.message_id == event.message_id and out.thread_ts == TS
    assert out.raw_sha256 == raw_sha256(event.raw) and out.compactor_version == COMPACTOR_VERSION
    assert 0 < out.tokens <= out.budget and out.raw_tokens > out.tokens
    assert out.compact["summary"] == "60 lines, 1 patterns (info 60)"
    assert out.selection is None and result.record is None


def test_a_compacted_tool_result_on_the_events_topic_is_forwarded_not_compacted_again() -> None:
    # CompactedToolResult derives from ToolResult: the compactor must still tell the raw one apart.
    compacted = run(tool_result(repetitive(60)).to_bytes()).value
    result = run(compacted)
    assert isinstance(result, Forward)
    assert result.value is compacted


def test_selection_is_recorded_then_reused_without_calling_the_selector() -> None:
    event = tool_result(loki(30))
    store: dict[str, Selection] = {}
    counting = Counting()
    first = run(event.to_bytes(), store, selector=counting, budget=150)
    assert isinstance(first, Compacted) and first.record is not None
    assert counting.calls == 1
    assert (
        first.selection_key
        == selection_key(raw_sha256(event.raw))
        == f"{raw_sha256(event.raw)}:{COMPACTOR_VERSION}"
    )
    store[first.selection_key] = first.record
    again = run(event.to_bytes(), store, selector=counting, budget=150)
    assert isinstance(again, Compacted)
    assert counting.calls == 1, "a recorded selection must be reused, not asked again"
    assert again.record is None
    assert again.value == first.value


def test_bad_records_become_dead_letters_with_reason_partition_offset() -> None:
    good = tool_result(loki(3)).model_dump(mode="json")
    cases = {
        b"not json": "not JSON",
        json.dumps({**good, "schema_version": 2}).encode(): "unsupported schema_version",
        json.dumps({**good, "type": "nope"}).encode(): "invalid event",
        tool_result({"data": {"resultType": "matrix", "result": []}}).to_bytes(): "raw format:",
        tool_result(loki(40, "error")).to_bytes(): "budget exceeded:",  # a budget far under the floor
    }
    for value, reason in cases.items():
        result = run(value, budget=20)
        assert isinstance(result, Dead), reason
        letter = result.letter
        assert letter.reason.startswith(reason), (reason, letter.reason)
        assert (letter.partition, letter.offset, letter.key, letter.source_topic) == (3, 41, TS, "in")
        assert letter.payload == value.decode()
        if reason.endswith(":"):  # a tool result that parsed: the agent still gets an answer
            assert result.answer is not None
            answer = parse_event(result.answer)
            assert isinstance(answer, CompactedToolResult) and answer.message_id == f"{TS}:1:tools:0"
            assert answer.compact == {
                "error": f"could not be compacted: {letter.reason}; raw kept as evidence {TS}:1:tools:0"
            }
            assert answer.raw == json.loads(value)["raw"] and answer.compactor_version.startswith("error:")
        else:
            assert result.answer is None
    assert isinstance(run(None), Dead)


def test_a_raising_compactor_is_a_dead_letter_not_a_crash() -> None:
    class Broken:
        model = "broken"

        def select(self, candidates: list[Candidate], budget: int, context: dict[str, Any]) -> Selection:
            raise RuntimeError("model unavailable")

    result = run(tool_result(loki(30)).to_bytes(), selector=Broken(), budget=150)
    assert isinstance(result, Dead)
    assert result.letter.reason == "compactor error: RuntimeError: model unavailable"
    assert result.message_id == f"{TS}:1:tools:0"
    assert result.answer is not None
    answer = parse_event(result.answer)
    assert isinstance(answer, CompactedToolResult)
    assert answer.compact["error"].startswith(
        "could not be compacted: compactor error: RuntimeError: model unavailable"
    )


def test_selector_spec_loads_by_import_path_and_counts_calls() -> None:
    assert load_selector("local").model == "local-deterministic"  # type: ignore[attr-defined]
    loaded = load_selector("services.compaction.selector:LocalDeterministicSelector")
    seen: list[str] = []
    counting = CountingSelector(loaded, on_call=seen.append)
    run(tool_result(loki(30)).to_bytes(), selector=counting, budget=150)
    assert counting.calls == 1 and seen == ["local-deterministic"]


def test_output_bytes_are_the_canonical_bytes_of_the_event() -> None:
    """The stream splices the raw it serialised once into the output; the bytes must be exactly
    `CompactedToolResult.to_bytes()`, including when the raw holds the splice placeholder itself."""
    from deploy.local.seed.generators import generate_events, generate_loki, generate_prometheus
    from services.compactor.stream import _RAW_PLACEHOLDER

    raws: list[tuple[str, Any]] = [
        ("query_loki", generate_loki(5, lines=120, patterns=5)),
        ("query_prometheus", generate_prometheus(6, series=3, points=30)),
        ("get_pod_events", generate_events(7, events=12, pods=3)),
        ("query_loki", loki(3) | {"note": _RAW_PLACEHOLDER}),
        ("unknown_tool", {"text": f'ünïcode {_RAW_PLACEHOLDER} \u2028 "quoted" \\ end', "n": [1, 2.5, None]}),
        ("unknown_tool", "a plain string raw"),
    ]
    for i, (tool, raw) in enumerate(raws):
        out = run(tool_result(raw, tool, i).to_bytes(), budget=5000)
        assert isinstance(out, Compacted), out
        assert out.value == out.event.to_bytes()
        assert parse_event(out.value) == out.event


def test_an_output_over_the_topic_limit_is_dead_lettered_with_its_size() -> None:
    value = tool_result(repetitive(400)).to_bytes()
    fits = run(value)
    assert isinstance(fits, Compacted)
    limit = len(fits.value)  # the compacted event is bigger than this limit once key and overhead count
    human = HumanMessage(
        thread_ts=TS, message_id=f"{TS}:-:human:1", event_time=NOW, user="U", ts="1", text="x" * limit
    )
    for record in (value, human.to_bytes()):
        out = run(record, max_output_bytes=limit)
        assert isinstance(out, Dead), out
        assert out.letter.reason.startswith("output too large"), out.letter.reason
        assert f"limit of {limit} bytes" in out.letter.reason
        assert (out.letter.partition, out.letter.offset, out.letter.source_topic) == (3, 41, "in")
        assert out.message_id is not None
    roomy = run(value, max_output_bytes=10 * limit)
    assert isinstance(roomy, Compacted) and roomy.value == fits.value
