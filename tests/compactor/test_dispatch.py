"""The faust agent's result dispatch (services/compactor/dispatch.py), without faust: where each result of
`stream.process` goes, in which order, with which key and partition, and what it counts."""

from __future__ import annotations

import json

from deploy.local.testdata import loki
from schemas.events import HumanMessage
from services.compactor.dispatch import Send, dispatch
from services.compactor.stream import Compacted, Dead, Forward

from .test_stream_process import NOW, TS, Counting, run, tool_result

KEY = TS.encode()


def test_a_passthrough_goes_on_unchanged_on_the_same_partition() -> None:
    human = HumanMessage(
        thread_ts=TS, message_id=f"{TS}:-:human:1", event_time=NOW, user="U1", ts="1", text="hi"
    )
    value = human.to_bytes()
    result = run(value)
    assert isinstance(result, Forward)
    done = dispatch(result, KEY, 3, 41)
    assert done.sends == (Send("compacted", KEY, value, 3),)
    assert done.outcome == "passthrough" and done.table_write is None and done.compacted is None
    assert done.dead_letter_log is None


def test_a_digest_records_its_selection_before_it_is_sent() -> None:
    result = run(tool_result(loki(30)).to_bytes(), selector=Counting(), budget=150)
    assert isinstance(result, Compacted) and result.record is not None
    done = dispatch(result, KEY, 3, 41)
    assert done.sends == (Send("compacted", KEY, result.value, 3),)
    assert done.table_write == (result.selection_key, result.record.model_dump(mode="json"))
    assert done.compacted == ("query_loki", result.outcome.raw_tokens, result.outcome.tokens)
    assert done.outcome == "compacted" and done.budget_violation is None


def test_a_digest_without_a_selection_writes_no_table_entry() -> None:
    result = run(tool_result(loki(3)).to_bytes())
    assert isinstance(result, Compacted) and result.record is None
    assert dispatch(result, KEY, 3, 41).table_write is None


def test_an_unreadable_record_is_one_dead_letter_and_nothing_else() -> None:
    result = run(b"not json")
    assert isinstance(result, Dead) and result.answer is None
    done = dispatch(result, KEY, 5, 7)
    assert done.sends == (Send("dlq", KEY, result.letter.to_bytes(), None),)
    assert done.outcome == "dead_letter" and done.budget_violation is None
    assert done.dead_letter_log is not None and done.dead_letter_log["partition"] == 5
    assert done.dead_letter_log["offset"] == 7 and done.dead_letter_log["reason"] == result.letter.reason


def test_a_tool_result_over_budget_is_a_dead_letter_then_a_truthful_answer_and_counts_its_tool() -> None:
    result = run(tool_result(loki(40, "error")).to_bytes(), budget=20)
    assert isinstance(result, Dead) and result.answer is not None
    done = dispatch(result, KEY, 3, 41)
    assert [s.topic for s in done.sends] == ["dlq", "compacted"]
    assert done.sends[1] == Send("compacted", KEY, result.answer, 3)
    assert done.budget_violation == "query_loki"
    assert done.dead_letter_log is not None
    assert done.dead_letter_log["message_id"] == f"{TS}:1:tools:0" and done.dead_letter_log["thread_ts"] == TS
    assert json.loads(result.answer)["message_id"] == f"{TS}:1:tools:0"
