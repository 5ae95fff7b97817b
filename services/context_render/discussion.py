"""Long discussions by a deterministic policy (invariant 10): what of the humans' turns the model is sent.

Pure: rows and a budget in, ReRendered events out. A human's words are never paraphrased; a turn
is either shown verbatim (clipped with a pointer when it alone passes the per-turn limit), or
left out and counted ("312 more messages from 14 people, 03:20-05:10 UTC"), and findable with
`search_thread`. The policy runs only while the discussion, as the model is sent it, is over its
share of the input budget; the seed's few turns are never touched.

What is shown, in this order, while it fits the discussion budget:
1. the alert (its annotations clipped, an alert group as its count and varying labels) and the
   turn that woke the bot: always;
2. every turn that names the bot (a mention), newest first;
3. the most recent turns, newest first, up to `recent_share` of the budget;
4. older turns by salience, highest first, then newest first. A turn is salient when it states
   a decision (rolled back, reverted, scaled, paged, restarted, failed over, drained, deployed,
   disabled, ...), and for every term it shares with the evidence (a number, a time, a version,
   a service or pod name appearing in a tool result or the alert).
Everything else older is folded. Each choice is a ReRendered event (policy `clipped` or
`folded`), so a replay re-derives the same context, and loading it stays one query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from schemas.events import ReRendered
from schemas.ids import message_id
from schemas.tokens import count_tokens, count_value_tokens, render_for_model
from services.boundary.clip import clip_text, within
from services.context_render.context import ContextRow, alert_group, alert_text, folded, row_to_message

FOLD_LINE_TOKENS = 40  # the most one counted line of folded turns costs
_TERM = re.compile(r"v?\d+(?:[.:]\d+)+|\d{2,}|[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+")
_DECISION = re.compile(
    r"\b(?:roll(?:ed|ing)?[ -]?back|revert(?:ed|ing)?|scal(?:ed|ing)|paged?|restart(?:ed|ing)?|"
    r"fail(?:ed)?[ -]?over|drain(?:ed|ing)?|deploy(?:ed|ing)?|disabled?|enabled?|cordon(?:ed)?|"
    r"mitigat(?:ed|ion)|hotfix(?:ed)?|block(?:ed)?|throttl(?:ed|ing)|freez(?:e|ing)|froze)\b",
    re.IGNORECASE,
)

Fold = Literal["clipped", "folded"]


@dataclass(frozen=True)
class DiscussionPolicy:
    budget: int  # tokens for the alert and the humans' turns, as the model is sent them
    recent_share: float  # of `budget`, for the most recent turns
    turn_limit: int  # a single turn or alert annotation above this is clipped
    trigger_id: str | None = None  # the turn that woke the bot


def terms(text: str) -> set[str]:
    """The checkable terms of a text: numbers, times, versions, hyphenated names (lowercased)."""
    return {t.lower() for t in _TERM.findall(text)}


def evidence_terms(rows: Iterable[ContextRow]) -> set[str]:
    """Terms of what the tools returned and the alert said: what a human turn can be salient against."""
    found: set[str] = set()
    for row in rows:
        if row.role == "tool":
            found |= terms(render_for_model(row.value))
        elif row.role == "alert":
            found |= terms(alert_text(row.value))
    return found


def salience(row: ContextRow, evidence: set[str]) -> int:
    """A decision counts three; each term shared with the evidence counts one (at most three)."""
    text = str(row.value.get("text") or "") if isinstance(row.value, dict) else ""
    return (3 if _DECISION.search(text) else 0) + min(3, len(terms(text) & evidence))


def names_bot(row: ContextRow) -> bool:
    return isinstance(row.value, dict) and bool(row.value.get("mention"))


def shown_tokens(row: ContextRow) -> int:
    message = row_to_message(row)
    return count_tokens(
        message.content if isinstance(message.content, str) else render_for_model(message.content)
    )


def over_limit(row: ContextRow, limit: int) -> bool:
    """Whether the row as shown passes `limit` tokens."""
    message = row_to_message(row)
    text = message.content if isinstance(message.content, str) else render_for_model(message.content)
    return not within(text, limit)


def clipped_value(row: ContextRow, limit: int) -> dict[str, Any] | None:
    """The row's value with its long text (a turn) or annotations (an alert) clipped; None if it fits."""
    v: dict[str, Any] = row.value if isinstance(row.value, dict) else {}
    if v.get("re_rendered") or not over_limit(row, limit):
        return None
    if row.role == "human":
        return {**v, "text": clip_text(str(v.get("text") or ""), limit, row.id), "re_rendered": "clipped"}
    raw_alert = v.get("alert")
    alert: dict[str, Any] = raw_alert if isinstance(raw_alert, dict) else {}
    notes = alert.get("commonAnnotations") or {}
    shown = {k: notes[k] for k in ("summary", "description") if notes.get(k)}
    each = max(limit // (2 * max(len(shown), 1)), 60)
    kept = {
        "commonLabels": alert.get("commonLabels") or {},
        "commonAnnotations": {k: clip_text(str(t), each, row.id) for k, t in shown.items()},
    }
    group = alert_group(alert.get("alerts"))
    rest = {k: val for k, val in v.items() if k != "alert"}
    return {**rest, "alert": kept, **({"group": group} if group else {}), "re_rendered": "clipped"}


def plan_discussion(
    rows: Sequence[ContextRow], policy: DiscussionPolicy, current_round: int, now: datetime
) -> tuple[ReRendered, ...]:
    """The clippings and foldings that bring the discussion within `policy.budget` (none if it fits)."""
    changes: dict[str, tuple[Fold, dict[str, Any]]] = {}
    current: list[ContextRow] = []
    for row in rows:
        value = clipped_value(row, policy.turn_limit) if row.role in ("human", "alert") else None
        if value is not None:
            changes[row.id] = ("clipped", value)
            row = replace(row, value=value)
        current.append(row)
    cost = {r.id: shown_tokens(r) for r in current if r.role in ("human", "alert") and not folded(r)}
    if _discussion_tokens(current, cost) > policy.budget:
        for row in _to_fold(current, cost, policy, evidence_terms(rows)):
            value = {"re_rendered": "folded", "user": row.value.get("user"), "ts": row.value.get("ts")}
            changes[row.id] = ("folded", value)
    return tuple(_event(target, fold, value, current_round, now) for target, (fold, value) in changes.items())


def _discussion_tokens(rows: Sequence[ContextRow], cost: dict[str, int]) -> int:
    """Shown turns' tokens plus one counted line per run of folded turns (runs as `to_messages` cuts them)."""
    runs = sum(1 for k, r in enumerate(rows) if folded(r) and (k == 0 or not folded(rows[k - 1])))
    return sum(cost.values()) + runs * FOLD_LINE_TOKENS


def _to_fold(
    rows: Sequence[ContextRow], cost: dict[str, int], policy: DiscussionPolicy, evidence: set[str]
) -> list[ContextRow]:
    """The turns left out: every open turn not kept, kept ones chosen as the module docstring says.

    Candidates are kept in priority order on an estimate (each kept older turn may split a folded
    run: one more counted line); then the exact total is checked and the last kept dropped until it fits.
    """
    open_turns = [r for r in rows if r.id in cost]
    must = [r.id for r in open_turns if r.role == "alert" or r.id == policy.trigger_id]
    kept: list[str] = list(must)
    used = sum(cost[i] for i in kept) + FOLD_LINE_TOKENS

    def take(candidates: Iterable[ContextRow], limit: int, per: int, contiguous: bool = False) -> None:
        nonlocal used
        for row in candidates:
            if row.id in kept:
                continue
            if used + cost[row.id] + per > limit:
                if contiguous:
                    return
                continue
            kept.append(row.id)
            used += cost[row.id] + per

    newest_first = [r for r in reversed(open_turns) if r.role == "human"]
    take((r for r in newest_first if names_bot(r)), policy.budget, FOLD_LINE_TOKENS)
    recent = min(policy.budget, used + int(policy.budget * policy.recent_share))
    take(newest_first, recent, 0, contiguous=True)
    ranked = sorted(
        ((salience(r, evidence), k, r) for k, r in enumerate(newest_first)), key=lambda x: (-x[0], x[1])
    )
    take((r for score, _, r in ranked if score > 0), policy.budget, FOLD_LINE_TOKENS)

    def left_out() -> list[ContextRow]:
        chosen = set(kept)
        return [r for r in open_turns if r.id not in chosen]

    while len(kept) > len(must) and _exact(rows, cost, left_out()) > policy.budget:
        kept.pop()
    return left_out()


def _exact(rows: Sequence[ContextRow], cost: dict[str, int], fold: list[ContextRow]) -> int:
    """The discussion's tokens once `fold` is folded: the shown turns and one line per folded run."""
    out = {r.id for r in fold}
    after = [replace(r, value={"re_rendered": "folded"}) if r.id in out else r for r in rows]
    return _discussion_tokens(after, {i: n for i, n in cost.items() if i not in out})


def _event(target: str, fold: Fold, compact: dict[str, Any], current_round: int, now: datetime) -> ReRendered:
    thread_ts, round_part, node, i = target.split(":", 3)
    return ReRendered(
        thread_ts=thread_ts,
        message_id=message_id(
            thread_ts, None, "rerender", f"r{current_round}-{fold}-{round_part}-{node}-{i}"
        ),
        event_time=now,
        target_id=target,
        compact=compact,
        tokens=count_value_tokens(compact),
        policy=fold,
    )
