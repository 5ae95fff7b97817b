"""Wakes coalesced: which mentions a round answers, and when a batch of wakes is ready. Pure.

Ten mentions in ten seconds are one question asked ten times, so they get one round and one post
that names everyone it answers. The rule is a function of the thread's rows, so a rerun after a
crash, or a redelivered wake, reaches the same answer from the event log alone:

- A round answers every mention visible in the context it loads that no committed post answered;
  its post records their ids (`ThreadPost.answers`). A post recorded before posts named them
  answered every mention above it (what a round saw then).
- A mention wake is done with once its mention is answered; an alert wake once a committed round
  follows the alert. A mention recorded while a round runs, after that round loaded its context,
  is not in that round's answers, so its own wake runs the next round (the bug this replaces
  skipped it: a committed round followed it in seq order, though that round never saw it).

How long the agent lets wakes gather before a round starts is `ready_at`: a quiet window after the
latest wake of the thread, capped from the first (AgentConfig.wake_window, wake_window_max).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.context_render.context import ContextRow


@dataclass(frozen=True)
class Mention:
    """A human message that addressed the bot: its row id and who wrote it."""

    message_id: str
    user: str


def is_mention(row: ContextRow) -> bool:
    return row.role == "human" and isinstance(row.value, dict) and bool(row.value.get("mention"))


def answered(rows: Sequence[ContextRow]) -> frozenset[str]:
    """The ids of the mentions committed posts answer, in the rows' (seq) order."""
    done: set[str] = set()
    above: list[str] = []
    for row in rows:
        if is_mention(row):
            above.append(row.id)
        elif row.role == "post" and row.round is not None:
            done.update(above if row.answers is None else row.answers)
    return frozenset(done)


def unanswered(rows: Sequence[ContextRow]) -> list[Mention]:
    """The mentions a round loading these rows answers: every one no committed post answered."""
    done = answered(rows)
    return [
        Mention(row.id, str(row.value.get("user") or "someone"))
        for row in rows
        if is_mention(row) and row.id not in done
    ]


def wake_done(rows: Sequence[ContextRow], reason: str, trigger_id: str) -> bool:
    """A wake needs no round: its mention is answered, or (an alert) a committed round follows it."""
    if reason == "mention":
        return trigger_id in answered(rows)
    ids = [r.id for r in rows]
    if trigger_id not in ids:
        return False
    return any(r.round is not None and r.role == "ai" for r in rows[ids.index(trigger_id) + 1 :])


def ready_at(first: float, latest: float, window: float, longest: float) -> float:
    """When a thread's gathered wakes start their round: `window` seconds after the latest wake, but
    never later than `longest` after the first (a thread that never falls quiet is still answered)."""
    return min(latest + window, first + max(longest, window))
