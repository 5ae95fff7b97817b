"""Invariant 10: when a thread's running token sum passes the budget, old rows are re-rendered in place.

Pure planning, row by row, oldest first: the previous round is cut to a headline and
its evidence id, older rounds to one line; the current round keeps its full digest.
The alert (and its pinned window), human turns and the judge's rejections are never
touched. Each choice becomes a ReRendered event, so a replay re-derives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from schemas.events import ReRendered
from schemas.ids import message_id
from schemas.tokens import count_value_tokens
from services.agent.context import ContextRow
from services.agent.facts import salient_facts, summary_of

Policy = Literal["headline", "one_line"]


def untouchable(row: ContextRow) -> bool:
    """The four things never compacted: alert (with its window), human turns, judge rejections."""
    if row.role in ("alert", "human"):
        return True
    return row.role == "judge" and isinstance(row.value, dict) and row.value.get("grounded") is False


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(row: ContextRow, policy: Policy, tool: str | None) -> dict[str, Any]:
    """The new compact of one row under a policy; tool calls of an ai turn always survive."""
    v: dict[str, Any] = row.value if isinstance(row.value, dict) else {"text": str(row.value)}
    if row.role == "tool":
        facts = salient_facts(v)
        head = f"{tool or 'tool'}: {summary_of(v)}"
        text = f"{head}; {facts[0]}" if policy == "headline" and facts else head
    elif row.role == "judge":
        text = "grounded" if v.get("grounded") else "rejected"
    else:
        text = str(v.get("text") or v.get("summary") or "")
        if policy == "headline":
            claims = v.get("claims") or []
            if claims:
                text = str(claims[-1].get("text", text))
    width = 200 if policy == "headline" else 90
    new: dict[str, Any] = {"re_rendered": policy, "evidence_id": row.id}
    new["headline" if policy == "headline" else "line"] = _clip(text, width)
    if row.role == "ai" and v.get("tool_calls"):
        new["tool_calls"] = v["tool_calls"]
    if row.role == "post":
        new["kind"] = v.get("kind")
    if row.role == "judge":
        new["grounded"] = v.get("grounded")
    return new


def _suffix(target_id: str, current_round: int) -> str:
    _, round_part, node, i = target_id.split(":", 3)
    return f"r{current_round}-{round_part}-{node}-{i}"


@dataclass(frozen=True)
class Plan:
    events: tuple[ReRendered, ...]
    tokens_before: int
    tokens_after: int


def plan_rerenders(
    rows: Sequence[ContextRow],
    current_round: int,
    budget: int,
    now: datetime,
    tool_names: dict[str, str] | None = None,
) -> Plan:
    """Which rows to re-render (oldest first) until the thread's token sum is under `budget`.

    Rows already at (or below) their target policy are left alone, so a rerun of the same
    state plans nothing new. Ids are `T:-:rerender:r<round>-<target round>-<node>-<i>`:
    outside any round (a re-rendering is not part of a round's atomic publication), one
    per target and round, stable for a retry.
    """
    total = sum(r.tokens for r in rows)
    before = total
    events: list[ReRendered] = []
    rank = {"headline": 1, "one_line": 2}
    for row in rows:
        if total <= budget:
            break
        if untouchable(row) or row.round is None or row.round >= current_round:
            continue
        policy: Policy = "headline" if row.round == current_round - 1 else "one_line"
        if row.re_rendered and rank.get(str(row.value.get("re_rendered")), 0) >= rank[policy]:
            continue
        thread_ts = row.id.split(":", 1)[0]
        compact = render(row, policy, (tool_names or {}).get(row.id))
        tokens = count_value_tokens(compact)
        if tokens >= row.tokens:
            continue
        events.append(
            ReRendered(
                thread_ts=thread_ts,
                message_id=message_id(thread_ts, None, "rerender", _suffix(row.id, current_round)),
                event_time=now,
                target_id=row.id,
                compact=compact,
                tokens=tokens,
                policy=policy,
            )
        )
        total += tokens - row.tokens
    return Plan(tuple(events), before, total)
