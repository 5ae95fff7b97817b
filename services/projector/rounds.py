"""The round check (invariant 3), in one place: may a round marker publish its round?

A marker publishes when every id it lists is projected (staged, or visible already) and every
tool call of a staged `ai` row it lists is answered by a `tool` row it lists. Both plans ask
this ledger, and only this ledger: it starts from where Postgres says the listed ids stand
(`sql.LOOKUP_BATCH`) and follows the batch, so the SQL never judges a round by itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from services.projector.mapping import CommitRound, Row


@dataclass(frozen=True, slots=True)
class Standing:
    """What the check needs of one listed row: its role, the call it answers, the calls it makes."""

    role: str
    tool_call_id: str | None
    call_ids: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """A marker's outcome: `moving` (ids leaving round_staging) if published, else `reason`."""

    published: bool
    moving: tuple[str, ...] = ()
    reason: str | None = None


class RoundLedger:
    """Where every listed id stands (staged or visible) as the batch goes, operation by operation."""

    def __init__(self, listed: Iterable[str], found: Iterable[tuple[Any, ...]] = ()) -> None:
        """`found`: rows of `sql.LOOKUP_BATCH` (id, is_staged, role, tool_call_id, call ids or NULL)."""
        self.listed = frozenset(listed)
        self.staged: dict[str, Standing] = {}
        self.visible: dict[str, Standing] = {}
        for mid, is_staged, role, tcid, calls in found:
            if is_staged:
                self.staged[mid] = Standing(role, tcid, tuple(calls or ()))
            else:
                self.visible[mid] = Standing(role, tcid)

    def knows(self, message_id: str) -> bool:
        return message_id in self.staged or message_id in self.visible

    def stage(self, row: Row) -> None:
        """As INSERT_STAGED: a row already staged or visible is not staged again (the first copy stays)."""
        if row.id in self.listed and not self.knows(row.id):
            self.staged[row.id] = Standing(
                row.role, row.tool_call_id, row.call_ids if row.role == "ai" else ()
            )

    def commit(self, op: CommitRound) -> Verdict:
        """Judge `op` against the ledger; a published round's rows count as visible from then on."""
        ids = op.message_ids
        missing = sorted(m for m in ids if not self.knows(m))
        answered = set()
        for m in ids:
            info = self.staged.get(m) or self.visible.get(m)
            if info is not None and info.role == "tool" and info.tool_call_id is not None:
                answered.add(info.tool_call_id)
        unanswered = sorted(
            f"{m} -> {'?' if call is None else call}"
            for m in ids
            if m in self.staged and self.staged[m].role == "ai"
            for call in self.staged[m].call_ids
            if call not in answered
        )
        if missing or unanswered:
            return Verdict(False, reason=round_reason(op, missing, unanswered))
        moving = tuple(m for m in ids if m in self.staged)
        for m in moving:
            self.visible[m] = self.staged.pop(m)
        return Verdict(True, moving)


def round_reason(op: CommitRound, missing: list[str], unanswered: list[str]) -> str:
    reason = f"round {op.round} of {op.thread_ts} cannot be published"
    if missing:
        reason += f"; listed ids not projected: {', '.join(missing[:5])}"
    if unanswered:
        reason += f"; tool calls without a listed tool row: {', '.join(unanswered[:5])}"
    return reason + " (its rows stay in round_staging)"
