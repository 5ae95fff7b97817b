"""The round check (`rounds.RoundLedger`) on its own: no Postgres, the rule as both plans ask it."""

from __future__ import annotations

from dataclasses import replace

from deploy.local.testdata import T0, synthetic_round
from services.projector.mapping import CommitRound, Row, map_event
from services.projector.rounds import RoundLedger

T = "1710406800.000100"


def staged_rows_and_marker(tools: int = 2) -> tuple[list[Row], CommitRound]:
    ops = [op for e in synthetic_round(T, 1, T0, tools=tools) for op in map_event(e)]
    rows = [op for op in ops if isinstance(op, Row) and op.staged]
    (marker,) = [op for op in ops if isinstance(op, CommitRound)]
    return rows, marker


def test_a_complete_round_publishes_once_and_a_marker_again_moves_nothing() -> None:
    rows, marker = staged_rows_and_marker()
    ledger = RoundLedger(marker.message_ids)
    for row in rows:
        ledger.stage(row)
    first = ledger.commit(marker)
    assert first.published and first.moving == marker.message_ids
    again = ledger.commit(marker)
    assert again.published and again.moving == ()  # its rows are visible now: nothing left to move


def test_a_missing_row_refuses_the_round_and_names_the_row() -> None:
    rows, marker = staged_rows_and_marker()
    tool = next(r for r in rows if r.role == "tool")
    ledger = RoundLedger(marker.message_ids)
    for row in rows:
        if row is not tool:
            ledger.stage(row)
    verdict = ledger.commit(marker)
    assert not verdict.published and verdict.moving == ()
    assert verdict.reason is not None and f"listed ids not projected: {tool.id}" in verdict.reason
    assert tool.id not in ledger.visible and all(r.id in ledger.staged for r in rows if r is not tool)


def test_an_unlisted_tool_row_leaves_its_call_unanswered() -> None:
    rows, marker = staged_rows_and_marker()
    tool = next(r for r in rows if r.role == "tool")
    short = CommitRound(T, 1, marker.marker_id, tuple(m for m in marker.message_ids if m != tool.id))
    ledger = RoundLedger(short.message_ids)
    for row in rows:
        ledger.stage(row)  # the tool row is staged, but the marker does not list it
    verdict = ledger.commit(short)
    assert not verdict.published
    assert verdict.reason is not None and f"-> {tool.tool_call_id}" in verdict.reason


def test_rows_found_in_postgres_count_and_a_call_without_id_is_shown_as_a_question_mark() -> None:
    rows, marker = staged_rows_and_marker(tools=1)
    ai, tool = rows[0], rows[1]
    found = [
        (ai.id, True, "ai", None, [tool.tool_call_id, None]),  # staged before this batch, one call has no id
        (tool.id, False, "tool", tool.tool_call_id, None),  # visible already
    ]
    ledger = RoundLedger([ai.id, tool.id], found)
    verdict = ledger.commit(CommitRound(T, 1, marker.marker_id, (ai.id, tool.id)))
    assert not verdict.published and verdict.reason is not None and f"{ai.id} -> ?" in verdict.reason


def test_staging_keeps_the_first_copy_and_never_restages_a_visible_row() -> None:
    rows, marker = staged_rows_and_marker()
    ai, tool = rows[0], rows[1]
    ledger = RoundLedger(marker.message_ids, [(ai.id, False, "ai", None, None)])
    ledger.stage(ai)
    assert ai.id in ledger.visible and ai.id not in ledger.staged  # as INSERT_STAGED skips visible ids
    ledger.stage(tool)
    ledger.stage(replace(tool, role="judge"))  # a later copy of the same id changes nothing
    assert ledger.staged[tool.id].role == "tool"
