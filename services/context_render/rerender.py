"""Invariant 10: when a thread's running token sum passes the budget, old rows are re-rendered in place.

Pure planning, row by row, oldest first: the previous round is cut to a headline and
its evidence id, older rounds to one line; the current round keeps its full digest.
The alert (and its pinned window), human turns and the judge's rejections are never
touched. Each choice becomes a ReRendered event, so a replay re-derives it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from schemas.events import ReRendered
from schemas.ids import message_id
from schemas.tokens import count_value_tokens
from services.context_render.context import ContextRow
from services.context_render.facts import salient_facts, summary_of
from services.context_render.preamble import outside_window

Policy = Literal["headline", "one_line"]


def untouchable(row: ContextRow) -> bool:
    """The four things never compacted: alert (with its window), human turns, judge rejections."""
    if row.role in ("alert", "human"):
        return True
    return row.role == "judge" and isinstance(row.value, dict) and row.value.get("grounded") is False


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(row: ContextRow, policy: Policy, window: tuple[str, str] | None = None) -> dict[str, Any]:
    """The new compact of one row under a policy; tool calls of an ai turn always survive.

    A headline keeps the row's strongest fact (a digest's, a hypothesis's summary and the
    evidence ids it rests on, a post's gist); one line keeps what the row was. Nothing the
    row does not already say is added, and the evidence id names where the whole row is.
    """
    v: dict[str, Any] = row.value if isinstance(row.value, dict) else {"text": str(row.value)}
    headline = policy == "headline"
    extra: dict[str, Any] = {}
    if row.re_rendered:  # a headline shrinking to one line: its own text, its calls, kind and verdict
        text = str(v.get("headline") or v.get("line") or "")
        extra = {k: v[k] for k in ("tool_calls", "kind", "grounded") if k in v}
    elif row.role == "tool":  # the tool's name is the message's framing source (context.row_to_message)
        facts = salient_facts(v)
        text = counted_sources(facts[0]) if headline and facts else summary_of(v)
    elif row.role == "judge":
        text = "grounded" if v.get("grounded") else "rejected"
        extra["grounded"] = v.get("grounded")
    elif row.role == "post":
        text = _post_gist(v)
        extra["kind"] = v.get("kind")
    elif row.role == "ai" and v.get("tool_calls"):
        # The calls say it; the rows that answer them keep their own evidence ids. Arguments
        # that are the alert's pinned window are implied by it (the preamble states it).
        calls = [dict(c, args=outside_window(dict(c.get("args") or {}), window)) for c in v["tool_calls"]]
        elided = calls != [dict(c, args=dict(c.get("args") or {})) for c in v["tool_calls"]]
        text = "calls inside the alert window" if elided else ""
        extra["tool_calls"] = calls
    else:
        text = str(v.get("text") or v.get("summary") or "")
        cited = [e for c in v.get("claims") or [] if isinstance(c, dict) for e in c.get("evidence_ids") or []]
        if headline and cited:
            extra["evidence_ids"] = list(dict.fromkeys(cited))
    width = 200 if headline else 90
    new: dict[str, Any] = {"re_rendered": policy, "evidence_id": row.id}
    if text:
        new["headline" if headline else "line"] = _clip(text, width)
    return {**new, **extra}


# `[2 of 4 pods: checkout-api-7d9f8b6c5-{m8p3z,x2k4q}]`: a digest line's stream attribution
# (services/compactor/log_streams.py), whose names follow the count after a colon.
_NAMED_SOURCES = re.compile(r"\[([^\[\]:]*\b\d+ of \d+ [^\[\]:]+): [^\[\]]+\]")


def counted_sources(line: str) -> str:
    """A headline says how many sources a fact spans, not their names: `[2 of 4 pods]`.

    Why: a headline is the previous round's one fact at a lower resolution; "one pod or all" is
    answered by the count, and the names stay in the full row its evidence id points to. A source
    named alone (`pod x only`) is the fact itself and is kept.
    """
    return _NAMED_SOURCES.sub(r"[\1]", line)


def _post_gist(v: dict[str, Any]) -> str:
    """A post's gist: the questions are the rejection's own (never compacted), a summary its first line."""
    text = str(v.get("text") or "")
    if v.get("kind") == "questions":
        asked = sum(1 for line in text.splitlines() if line[:1].isdigit())
        return f"the {asked} questions of the judge's rejection"
    return text.splitlines()[0] if text else ""


def _alert_window(rows: Sequence[ContextRow]) -> tuple[str, str] | None:
    for row in rows:
        if row.role == "alert" and isinstance(row.value, dict) and row.value.get("window_start"):
            return str(row.value["window_start"]), str(row.value.get("window_end"))
    return None


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
) -> Plan:
    """Which rows to re-render (oldest first) until the thread's token sum is under `budget`.

    Rows already at (or below) their target policy are left alone, so a rerun of the same
    state plans nothing new. Ids are `T:-:rerender:r<round>-<target round>-<node>-<i>`:
    outside any round (a re-rendering is not part of a round's atomic publication), one
    per target and round, stable for a retry.
    """
    total = sum(r.tokens for r in rows)
    before = total
    window = _alert_window(rows)
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
        compact = render(row, policy, window)
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
