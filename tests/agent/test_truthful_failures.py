"""A failed node is recorded as a failure everywhere it shows: the row, the next round's context, Slack."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from schemas.events import AiMessage, JudgeVerdict, ThreadPost
from services.context_render.context import ContextRow, row_to_message
from services.projector.mapping import Row, map_event
from services.voice.blocks import post_blocks

T = "1773458070.545498"
NOW = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)


def _content(event: AiMessage | JudgeVerdict) -> dict[str, object]:
    (op,) = map_event(event)
    assert isinstance(op, Row) and op.staged  # a round's row, staged until its marker
    return dict(json.loads(op.content))


def test_failure_fields_appear_in_a_row_only_when_set() -> None:
    ok = AiMessage(thread_ts=T, message_id=f"{T}:1:hypothesis:0", event_time=NOW, round=1, node="hypothesis",
                   text="s", model="m")  # fmt: skip
    assert set(_content(ok)) == {
        "node",
        "text",
        "tool_calls",
        "model",
        "claims",
    }  # rows before this keep their bytes
    failed = ok.model_copy(
        update={"text": "hypothesis failed: x", "failure": "x", "raw_answer": "{summary: 1"}
    )
    content = _content(failed)
    assert content["failure"] == "x" and content["raw_answer"] == "{summary: 1" and content["claims"] == []


def test_a_verdict_with_nothing_to_grade_reads_as_no_verdict_never_as_a_rejection() -> None:
    row = ContextRow(
        id=f"{T}:1:judge:0", role="judge", tool_call_id=None, tokens=1,
        value={"grounded": False, "questions": [], "graded_claims": [], "failure": "nothing to judge: x"},
    )  # fmt: skip
    text = str(row_to_message(row).content)
    assert text == f"judge ({T}:1:judge:0): no verdict: nothing to judge: x"
    assert "NOT grounded" not in text


def test_a_failure_post_says_the_round_did_not_finish() -> None:
    post = ThreadPost(thread_ts=T, message_id=f"{T}:1:post:0", event_time=NOW, round=1, kind="failure",
                      text="I could not form a hypothesis this round: ...", model="m")  # fmt: skip
    notification, blocks = post_blocks(post)
    assert notification.startswith("Round failed: I could not form a hypothesis")
    assert "did not finish" in blocks[0]["text"]["text"] and "Questions" not in notification
