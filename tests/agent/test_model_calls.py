"""The model calls of earlier rounds rebuilt with the rendering each row had then (rendering_history)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from services.context_render.context import IncidentState
from services.context_render.model_calls import StoredRow, thread_calls

T = "1773458070.000100"
HEADLINE = {"re_rendered": "headline", "headline": "loki: 198 OOM lines", "evidence_id": f"{T}:1:tools:0"}
ONE_LINE = {"re_rendered": "one_line", "line": "loki OOM", "evidence_id": f"{T}:1:tools:0"}
DIGEST = {"summary": "1,000 lines, 3 patterns", "patterns": ["198× OOMKilled"]}


def _row(row_id: str, role: str, content: Any, **kw: Any) -> StoredRow:
    round_ = None if row_id.split(":")[1] == "-" else int(row_id.split(":")[1])
    return StoredRow(row_id, role, kw.pop("call", None), round_, content, kw.pop("compact", None), 10, **kw)


def _ai(round_: int, node: str, i: int, calls: list[dict[str, Any]] | None = None) -> StoredRow:
    content = {"node": node, "text": f"{node} {round_}.{i}", "tool_calls": calls or [], "model": "m"}
    return _row(f"{T}:{round_}:{node}:{i}", "ai", content)


def _thread(history: tuple[tuple[int | None, Any, int], ...]) -> list[StoredRow]:
    alert = {"alertname": "KubePodOOMKilled", "service": "checkout-api", "status": "firing",
             "window_start": "2026-03-14T03:00:00Z", "window_end": "2026-03-14T03:15:00Z"}  # fmt: skip
    call = {"id": "call_1", "name": "query_loki", "args": {"query": "{app=checkout}"}}
    current = history[-1][1] if history else ONE_LINE
    rows = [
        _row(f"{T}:-:alert:0", "alert", alert),
        _ai(1, "investigate", 0, [call]),
        _row(
            f"{T}:1:tools:0",
            "tool",
            {"raw": "..."},
            call="call_1",
            compact=current,
            first_compact=DIGEST,
            first_tokens=20,
            history=history,
        ),
        _ai(1, "investigate", 1),
        _ai(1, "hypothesis", 0),
    ]
    for r in (2, 3):
        ts = f"177345{r}000.000100"
        rows.append(
            _row(f"{T}:-:human:{ts}", "human", {"user": "U1", "text": "@bot?", "mention": True, "ts": ts})
        )
        rows += [_ai(r, "investigate", 0), _ai(r, "hypothesis", 0)]
    return rows


STATE = IncidentState("checkout-api", "open", datetime(2026, 3, 14, 3, tzinfo=UTC),
                      datetime(2026, 3, 14, 3, 15, tzinfo=UTC), 3, datetime(2026, 3, 14, 3, tzinfo=UTC))  # fmt: skip


def _tool_text(call: Any) -> str:
    return next(str(m.content) for m in call.messages if m.id == f"{T}:1:tools:0")


def test_each_round_is_rebuilt_with_the_rendering_its_rows_had_then() -> None:
    history = ((2, HEADLINE, 8), (3, ONE_LINE, 4))
    calls = thread_calls(T, STATE, _thread(history))
    by = {(c.round, c.node): c for c in calls}
    assert [(c.round, c.node) for c in calls] == [
        (1, "investigate"), (1, "investigate"), (1, "hypothesis"), (2, "investigate"), (2, "hypothesis"),
        (3, "investigate"), (3, "hypothesis"),
    ]  # fmt: skip
    assert "198× OOMKilled" in _tool_text(by[(1, "hypothesis")])  # its own round: the digest as written
    assert "loki: 198 OOM lines" in _tool_text(by[(2, "investigate")])  # round 2 made the headline
    assert "loki OOM" in _tool_text(by[(3, "investigate")]) and "198" not in _tool_text(
        by[(3, "investigate")]
    )
    assert all(not c.inexact for c in calls)
    assert {r.how for r in by[(2, "investigate")].rows if r.id.endswith("tools:0")} == {
        "re-rendered (headline)"
    }


def test_without_the_history_an_earlier_round_is_marked_inexact_not_guessed() -> None:
    calls = thread_calls(T, STATE, _thread(()))
    round2 = [c for c in calls if c.round == 2]
    assert round2 and all(c.inexact == [f"{T}:1:tools:0"] for c in round2)
    assert all(not c.inexact for c in calls if c.round in (1, 3))


def test_a_tool_result_sent_with_its_checked_note_is_rebuilt_with_it() -> None:
    note = "limit clamped from 5000 to 1000"
    rows = _thread(())
    k = next(i for i, r in enumerate(rows) if r.id == f"{T}:1:hypothesis:0")
    sent = [{"tools": [], "checked": {f"{T}:1:tools:0": note}}]
    rows[k] = _row(rows[k].id, "ai", {**rows[k].content, "sent": sent}, compact=rows[k].content)
    calls = thread_calls(T, STATE, rows)
    hypothesis = next(c for c in calls if (c.round, c.node) == (1, "hypothesis"))
    assert _tool_text(hypothesis).startswith(f"[checked: {note}] [evidence {T}:1:tools:0]")
    # the round's turn carried it from the result on: the next investigate call had it too
    second = [c for c in calls if (c.round, c.node) == (1, "investigate")][1]
    assert _tool_text(second).startswith(f"[checked: {note}]")
    # later rounds load the row, never the note
    later = next(c for c in calls if (c.round, c.node) == (2, "investigate"))
    assert "[checked" not in _tool_text(later)


def _recall(made_for: dict[str, Any] | None) -> StoredRow:
    hit = {
        "thread": "C0PAY-1773456870.000100",
        "kind": "concurrent",
        "score_milli": 612,
        "reasons": ["same node"],
    }
    content: dict[str, Any] = {"recall": [hit]}
    if made_for is None:
        return _row(f"{T}:-:recall:0", "alert", content)
    return _row(f"{T}:-:recall:0", "alert", {**content, "made_for": made_for}, compact=content)


def _inserted(rows: list[StoredRow], row: StoredRow, after: str) -> list[StoredRow]:
    """`row` projected after `after` (recall's row is projected at once, before its round's rows)."""
    k = next(i for i, r in enumerate(rows) if r.id == after)
    return [*rows[: k + 1], row, *rows[k + 1 :]]


def _recall_placed(calls: list[Any]) -> list[tuple[int, str, int]]:
    """(round, node, position among the call's messages) of each call sent the recall row."""
    return [
        (c.round, c.node, next(k for k, m in enumerate(c.messages) if m.id == f"{T}:-:recall:0"))
        for c in calls
        if any(m.id == f"{T}:-:recall:0" for m in c.messages)
    ]


def test_the_recall_row_joins_the_call_it_was_recorded_for() -> None:
    """RecallRecorded.made_for places the row (issue 38): made for round 2's investigate, round 1 never
    had it and round 2's first call got it at the end of its turn; later rounds load it in context."""
    rows = _inserted(_thread(()), _recall({"round": 2, "node": "investigate"}), f"{T}:1:hypothesis:0")
    calls = thread_calls(T, STATE, rows)
    placed = _recall_placed(calls)
    assert [(r, n) for r, n, _k in placed] == [(2, "investigate"), (2, "hypothesis"), (3, "investigate"),
                                               (3, "hypothesis")]  # fmt: skip
    round2 = next(c for c in calls if (c.round, c.node) == (2, "investigate"))
    assert round2.messages[-1].id == f"{T}:-:recall:0"  # appended to the turn, after the loaded context
    assert all(r.id != f"{T}:-:recall:0" for r in round2.rows)  # not a row it loaded


def test_a_recall_recorded_before_made_for_existed_joins_the_first_rounds_hypothesis() -> None:
    rows = _inserted(_thread(()), _recall(None), f"{T}:-:alert:0")
    placed = _recall_placed(thread_calls(T, STATE, rows))
    assert [(r, n) for r, n, _k in placed][:1] == [(1, "hypothesis")]
    assert (1, "investigate") not in [(r, n) for r, n, _k in placed]


def test_a_call_written_before_calls_were_recorded_says_its_tool_schemas_are_unknown() -> None:
    verdict = {"grounded": False, "questions": ["why?"], "graded_claims": [], "hypothesis_id": f"{T}:1:hypothesis:0",
               "model": "m"}  # fmt: skip
    calls = thread_calls(T, STATE, _inserted(_thread(()), _row(f"{T}:1:judge:0", "judge", verdict),
                                                f"{T}:1:hypothesis:0"))  # fmt: skip
    investigate = next(c for c in calls if c.node == "investigate")
    hypothesis = next(c for c in calls if c.node == "hypothesis")
    assert investigate.sent is None and investigate.tools is None and investigate.input_tokens is None
    assert hypothesis.tools == [] and hypothesis.input_tokens == hypothesis.message_tokens
    assert all(c.node != "judge" for c in calls)  # no recorded basis: no judge call is guessed
