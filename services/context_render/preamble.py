"""The fixed system preamble, rendered at load time from the rows and stored nowhere (invariant 4).

A pure function of (context, round, trigger, now): everything it says is already
in the thread, so nothing needs remembering between runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from schemas.tokens import render_for_model
from services.boundary.framing import PREAMBLE_RULE
from services.context_render.context import ContextRow, LoadedContext


@dataclass(frozen=True)
class Trigger:
    """Why this round runs: the wake's reason, its trigger row and who tagged the bot."""

    reason: str
    message_id: str
    user: str | None = None


def _ago(start: datetime, now: datetime) -> str:
    seconds = max(0, int((now - start).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m"


def pinned_window(ctx: LoadedContext) -> tuple[str, str] | None:
    """The alert's fixed window: incident_state first, else the alert row itself."""
    if ctx.state is not None:
        return ctx.state.window_start.isoformat(), ctx.state.window_end.isoformat()
    for row in ctx.rows:
        if row.role == "alert" and isinstance(row.value, dict):
            return str(row.value.get("window_start")), str(row.value.get("window_end"))
    return None


def _calls_by_id(rows: tuple[ContextRow, ...]) -> dict[str, dict[str, Any]]:
    return {str(c["id"]): c for r in rows for c in r.tool_calls()}


def evidence_in_hand(ctx: LoadedContext) -> list[tuple[str, str, dict[str, Any]]]:
    """(evidence id, tool, args) of every tool result already in the thread."""
    calls = _calls_by_id(ctx.rows)
    found = []
    for row in ctx.rows:
        if row.role == "tool" and row.tool_call_id in calls:
            call = calls[row.tool_call_id]
            found.append((row.id, str(call["name"]), dict(call.get("args") or {})))
    return found


def outside_window(args: dict[str, Any], window: tuple[str, str] | None) -> dict[str, Any]:
    """A call's args without the pinned window's bounds (said once, in the preamble): same meaning."""
    if window is None:
        return args
    bounds = {_instant(w) for w in window}
    return {k: v for k, v in args.items() if not (isinstance(v, str) and _instant(v) in bounds)}


def _instant(value: str) -> str:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        return value


def _clip(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def established(ctx: LoadedContext) -> list[str]:
    """Claims a judge graded as grounded, each with its evidence ids.

    A grade names its claim by index in the hypothesis it judged. While that hypothesis is in
    full, the claim's own text and ids are quoted; once it is re-rendered, its headline keeps
    the evidence ids it rests on, and the claim is named by number (get_evidence has its text).
    """
    by_id = {r.id: r for r in ctx.rows}
    lines = []
    for row in ctx.rows:
        if row.role != "judge" or not isinstance(row.value, dict) or row.re_rendered:
            continue
        hyp = by_id.get(str(row.value.get("hypothesis_id")))
        hyp_value = hyp.value if hyp is not None and isinstance(hyp.value, dict) else {}
        claims = [] if hyp is None or hyp.re_rendered else list(hyp_value.get("claims") or [])
        by_number: list[str] = []
        for graded in row.value.get("graded_claims") or []:
            if not isinstance(graded, dict) or not graded.get("grounded"):
                continue
            k = graded.get("claim")
            if isinstance(k, int) and 0 <= k < len(claims):
                ids = ", ".join(claims[k].get("evidence_ids") or [])
                lines.append(f"{_clip(str(claims[k].get('text')))} [{ids}]")
            elif isinstance(k, int):
                by_number.append(str(k))
            else:  # a grade that carries its claim's text
                ids = ", ".join(graded.get("evidence_ids") or [])
                lines.append(f"{_clip(str(k))} [{ids}]")
        if by_number and hyp is not None:
            ids = ", ".join(hyp_value.get("evidence_ids") or [])
            rests = f" [{ids}]" if ids else ""
            lines.append(f"claims {', '.join(by_number)} of {hyp.id}{rests}")
    return list(dict.fromkeys(lines))


def last_rejection(ctx: LoadedContext) -> ContextRow | None:
    judges = [r for r in ctx.rows if r.role == "judge" and isinstance(r.value, dict)]
    rejected = [r for r in judges if r.value.get("grounded") is False]
    return rejected[-1] if rejected else None


def open_questions(ctx: LoadedContext) -> list[str]:
    """The last judge's questions, unless a later judge grounded the hypothesis."""
    judges = [r for r in ctx.rows if r.role == "judge" and isinstance(r.value, dict)]
    if not judges or judges[-1].value.get("grounded") is not False:
        return []
    return [str(q) for q in judges[-1].value.get("questions") or []]


def trigger_time(ctx: LoadedContext, trigger: Trigger) -> datetime | None:
    """The moment a round's trigger happened, read from the rows: a mention's Slack ts, or the
    incident's opening for an alert. The preamble's clock, so a retried or rebuilt round says the
    same thing (a wall clock would make the preamble differ on every run)."""
    if trigger.reason == "mention":
        ts = trigger.message_id.rsplit(":", 1)[-1]
        try:
            return datetime.fromtimestamp(float(ts), UTC)
        except (ValueError, OverflowError):
            return None
    return ctx.state.opened_at if ctx.state is not None else None


def render_preamble(ctx: LoadedContext, round_: int, trigger: Trigger, now: datetime) -> str:
    """The system preamble of one round. Pure; never written anywhere. `now` is the trigger's time
    (`trigger_time`) wherever the rows tell it, so a rerun or a review rebuilds the same text."""
    lines = [
        f"You are the incident-memory bot of Slack thread {ctx.thread_ts}. This is round {round_}.",
        PREAMBLE_RULE,
    ]
    if ctx.state is not None:
        lines.append(
            f"Incident: service {ctx.state.service}, status {ctx.state.status}. "
            f"The investigation began {_ago(ctx.state.opened_at, now)} ago ({ctx.state.opened_at.isoformat()})."
        )
    window = pinned_window(ctx)
    if window:
        lines.append(f"Alert window: {window[0]} .. {window[1]} (fixed). Do not query outside it.")
    facts = established(ctx)
    lines.append("Established so far (with evidence ids): " + ("; ".join(facts) if facts else "nothing yet."))
    rejection = last_rejection(ctx)
    questions = open_questions(ctx)
    asked = [str(q) for q in rejection.value.get("questions") or []] if rejection is not None else []
    if rejection is not None and asked != questions:
        lines.append(f"The judge's last rejection ({rejection.id}): {' | '.join(asked)}")
    elif rejection is not None:
        lines.append(f"The judge's last rejection ({rejection.id}) left the open questions below.")
    lines.append("Open questions: " + (" | ".join(questions) if questions else "none."))
    if trigger.reason == "mention":
        lines.append(f"{trigger.user or 'someone'} just tagged you ({trigger.message_id}); answer them.")
    else:
        lines.append(f"The alert just opened this thread ({trigger.message_id}).")
    evidence = evidence_in_hand(ctx)
    if evidence:
        listed = "; ".join(
            f"{tool}({render_for_model(outside_window(args, window))}) -> {eid}"
            for eid, tool, args in evidence
        )
        lines.append(f"Do not repeat tool calls whose results are already in evidence: {listed}")
    else:
        lines.append("Do not repeat tool calls whose results are already in evidence.")
    return "\n".join(lines)
