"""loadContext: a thread's memory in ONE SQL query, turned into LangChain messages (invariant 4).

No model call and no pass that rewrites the rows: what the model sees was decided
at write time (`coalesce(compact, content)`). The only repair is dropping an ai
turn whose tool calls did not all come back; a result is never invented (invariant 9).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from schemas import read_model
from schemas.canonical import canonical_json_bytes
from schemas.ids import parse_message_id
from schemas.tokens import count_tokens, render_for_model
from services.boundary.framing import frame
from services.context_render.recall_view import hits_of, is_recall_row, recall_message


@dataclass(frozen=True)
class ContextRow:
    """One visible row as the model sees it: `value` is coalesce(compact, content)."""

    id: str
    role: str
    tool_call_id: str | None
    value: Any
    tokens: int

    @property
    def round(self) -> int | None:
        return parse_message_id(self.id)[1]

    @property
    def node(self) -> str:
        return parse_message_id(self.id)[2]

    @property
    def re_rendered(self) -> bool:
        return isinstance(self.value, dict) and bool(self.value.get("re_rendered"))

    def tool_calls(self) -> list[dict[str, Any]]:
        if self.role != "ai" or not isinstance(self.value, dict):
            return []
        return [dict(c) for c in self.value.get("tool_calls") or []]


@dataclass(frozen=True)
class IncidentState:
    service: str
    status: str
    window_start: datetime
    window_end: datetime
    rounds: int
    opened_at: datetime


@dataclass(frozen=True)
class LoadedContext:
    thread_ts: str
    rows: tuple[ContextRow, ...]
    state: IncidentState | None

    @property
    def token_sum(self) -> int:
        return sum(r.tokens for r in self.rows)

    def last_round(self) -> int:
        """The highest committed round: incident_state.rounds, or the rows' own if the state lags."""
        seen = [r.round for r in self.rows if r.round is not None]
        return max([self.state.rounds if self.state else 0, *seen])


def row_digest(value: Any) -> str:
    """A short digest of a row's value (`coalesce(compact, content)`), to tell two projections apart."""
    return hashlib.sha256(canonical_json_bytes(value)).hexdigest()[:16]


def load_rows(conn: psycopg.Connection, thread_ts: str) -> list[ContextRow]:
    """The one query. Everything after it is pure."""
    records = conn.execute(read_model.CONTEXT_ROWS, (thread_ts,)).fetchall()
    return [ContextRow(r[0], r[1], r[2], r[3], int(r[4])) for r in records]


def load_state(conn: psycopg.Connection, thread_ts: str) -> IncidentState | None:
    record = conn.execute(read_model.INCIDENT_STATE, (thread_ts,)).fetchone()
    return None if record is None else IncidentState(*record)


def load_context(conn: psycopg.Connection, thread_ts: str) -> LoadedContext:
    """loadContext(thread_ts): the rows (one query) with incident_state read beside them.

    Both statements run in one transaction, which ends here (later waits must see later commits). Read
    through the views of a blue/green switch, the first statement's lock on its view holds the swap
    off until the commit, so the rows and the state always come from the same projection."""
    with conn.transaction():
        rows = load_rows(conn, thread_ts)
        state = load_state(conn, thread_ts)
    return LoadedContext(thread_ts, tuple(repair_dangling_tool_calls(rows)), state)


def repair_dangling_tool_calls(rows: Sequence[ContextRow]) -> list[ContextRow]:
    """Drop every ai turn whose tool calls did not all come back, and the partial answers to it.

    Never writes a synthetic result: a turn is either whole or absent.
    """
    answered = {r.tool_call_id for r in rows if r.role == "tool" and r.tool_call_id}
    dropped_calls: set[str] = set()
    for row in rows:
        ids = {str(c.get("id")) for c in row.tool_calls()}
        if ids and not ids <= answered:
            dropped_calls |= ids
    kept = []
    for row in rows:
        ids = {str(c.get("id")) for c in row.tool_calls()}
        if ids & dropped_calls:
            continue
        if row.role == "tool" and row.tool_call_id in dropped_calls:
            continue
        kept.append(row)
    known_calls = {str(c.get("id")) for r in kept for c in r.tool_calls()}
    return [r for r in kept if not (r.role == "tool" and r.tool_call_id not in known_calls)]


# --- rows -> LangChain messages ---------------------------------------------------------------


def stored_args(args: dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as its row stores them (canonical JSON: keys sorted at every level).
    The round's own turn is sent in this form too, so a call is sent the same bytes in the round that
    made it as in every later round, and the review page rebuilds it exactly."""
    loaded: dict[str, Any] = json.loads(canonical_json_bytes(args))
    return loaded


def alert_text(value: Any) -> str:
    v = value if isinstance(value, dict) else {}
    raw_alert = v.get("alert")
    alert: dict[str, Any] = raw_alert if isinstance(raw_alert, dict) else {}
    annotations = alert.get("commonAnnotations") or {}
    labels = alert.get("commonLabels") or {}
    parts = [
        f"ALERT {v.get('alertname', '?')} ({v.get('status', '?')}) for service {v.get('service', '?')}",
        f"window {v.get('window_start')} .. {v.get('window_end')}",
    ]
    said = {"alertname": v.get("alertname"), "service": v.get("service")}
    labels = {k: val for k, val in labels.items() if said.get(k) != val}  # said on the first line
    if labels:
        parts.append("labels " + render_for_model(labels))
    group = v.get("group") if isinstance(v.get("group"), dict) else alert_group(alert.get("alerts"))
    if group:
        parts.append(group_line(group))
    for key in ("summary", "description"):
        if annotations.get(key):
            parts.append(f"{key}: {annotations[key]}")
    return "\n".join(parts)


GROUP_VALUES_SHOWN = 8  # distinct values named per varying label; the rest are counted


def alert_group(alerts: Any) -> dict[str, Any] | None:
    """An Alertmanager group of several alerts as its count and the labels that vary between them.

    The common labels are the group's own (`commonLabels`, said on their own line); a varying label
    gets its distinct values in first-seen order, the first few named and the rest counted.
    """
    if not isinstance(alerts, list) or len(alerts) < 2:
        return None
    labels = [a.get("labels") or {} for a in alerts if isinstance(a, dict)]
    keys = sorted({k for one in labels for k in one})
    varying: dict[str, Any] = {}
    for key in keys:
        values = list(dict.fromkeys(str(one.get(key, "")) for one in labels))
        if len(values) > 1:
            varying[key] = {"distinct": len(values), "values": values[:GROUP_VALUES_SHOWN]}
    statuses = sorted({str(a.get("status")) for a in alerts if isinstance(a, dict) and a.get("status")})
    return {"alerts": len(alerts), "statuses": statuses, "varying": varying}


def group_line(group: dict[str, Any]) -> str:
    parts = []
    for key, seen in (group.get("varying") or {}).items():
        values = ", ".join(seen["values"])
        more = seen["distinct"] - len(seen["values"])
        parts.append(f"{key} ({seen['distinct']}: {values}{f', +{more} more' if more > 0 else ''})")
    varying = "; varying labels: " + "; ".join(parts) if parts else ""
    return f"group of {group.get('alerts')} alerts ({', '.join(group.get('statuses') or [])}){varying}"


def tool_body(row_id: str, source: str, value: Any) -> str:
    """A tool result as the model reads it: its evidence id, then the digest framed as data."""
    return f"[evidence {row_id}] {frame(source, row_id, render_for_model(value))}"


def row_to_message(row: ContextRow, tool_name: str | None = None) -> BaseMessage:
    """One row as a message; untrusted text (alert, Slack, tool results) framed as data with its source
    (services/boundary/framing.py)."""
    v = row.value if isinstance(row.value, dict) else {"text": render_for_model(row.value)}
    if is_recall_row(row.id, row.role):  # recall's recorded result (services/context_render/recall_view.py)
        return recall_message(row.id, hits_of(v))
    if row.role == "alert":
        return HumanMessage(content=frame("alert from Alertmanager", row.id, alert_text(v)), id=row.id)
    if row.role == "human":
        prefix = "(mentions the bot) " if v.get("mention") else ""
        user = str(v.get("user", "?"))
        said = frame(f"Slack message from {user}", row.id, str(v.get("text", "")))
        return HumanMessage(content=f"{prefix}[{row.id}] <{user}> {said}", id=row.id)
    if row.role == "ai":
        calls = [{"name": c["name"], "args": c.get("args") or {}, "id": c["id"]} for c in row.tool_calls()]
        text = re_rendered_text(row, v) if row.re_rendered else str(v.get("text") or "")
        return AIMessage(content=text, tool_calls=calls, id=row.id)
    if row.role == "tool":
        source = f"tool result of {tool_name or 'a tool'}"
        if row.re_rendered:  # a headline or one line: plain text, its evidence id up front
            text = frame(source, row.id, str(v.get("headline") or v.get("line") or ""))
            return ToolMessage(
                content=f"[evidence {row.id}] {text}", tool_call_id=row.tool_call_id or "", id=row.id
            )
        return ToolMessage(
            content=tool_body(row.id, source, row.value), tool_call_id=row.tool_call_id or "", id=row.id
        )
    if row.role == "judge":
        if row.re_rendered:
            return AIMessage(content=f"judge: {re_rendered_text(row, v)}", id=row.id)
        if v.get("failure"):  # nothing was graded: say so, never "NOT grounded"
            return AIMessage(content=f"judge ({row.id}): no verdict: {v['failure']}", id=row.id)
        verdict = "grounded" if v.get("grounded") else "NOT grounded"
        questions = v.get("questions") or []
        text = f"judge ({row.id}): hypothesis {verdict}."
        if questions:
            text += " Open questions: " + " | ".join(str(q) for q in questions)
        return AIMessage(content=text, id=row.id)
    if row.role == "post":
        text = re_rendered_text(row, v) if row.re_rendered else v.get("text", "")
        return AIMessage(content=f"posted to thread ({v.get('kind', 're-rendered')}): {text}", id=row.id)
    return HumanMessage(content=render_for_model(row.value), id=row.id)


def re_rendered_text(row: ContextRow, v: dict[str, Any]) -> str:
    """A re-rendered row as text: its headline or line, where the whole row is, what it rested on."""
    text = str(v.get("line") or v.get("headline") or "")
    rests = v.get("evidence_ids") or []
    if rests:
        text += f" (rests on {', '.join(str(e) for e in rests)})"
    return f"{text} [get_evidence({row.id})]" if text else ""


def folded(row: ContextRow) -> bool:
    """A human turn the discussion policy left out of the context (services/context_render/discussion.py)."""
    return isinstance(row.value, dict) and row.value.get("re_rendered") == "folded"


def fold_line(rows: Sequence[ContextRow]) -> str:
    """A run of left-out turns, counted: how many, from how many people, over which minutes."""
    people = {str(r.value.get("user")) for r in rows}
    times = sorted(_slack_time(str(r.value.get("ts") or r.id.rsplit(":", 1)[-1])) for r in rows)
    span = f"{times[0]}-{times[-1]} UTC" if times[0] != times[-1] else f"{times[0]} UTC"
    return (
        f"[{len(rows)} more message{'s' if len(rows) > 1 else ''} from {len(people)} "
        f"{'people' if len(people) > 1 else 'person'}, {span}, not shown: search_thread(query) finds them]"
    )


def _slack_time(ts: str) -> str:
    """HH:MM (UTC) of a Slack ts."""
    try:
        return datetime.fromtimestamp(float(ts), UTC).strftime("%H:%M")
    except (ValueError, OverflowError):
        return "?"


def to_messages(rows: Sequence[ContextRow]) -> list[BaseMessage]:
    """The rows as the model is sent them; each run of folded turns becomes one counted line."""
    names = {str(c.get("id")): str(c.get("name")) for r in rows for c in r.tool_calls()}
    out: list[BaseMessage] = []
    run: list[ContextRow] = []
    for row in rows:
        if folded(row):
            run.append(row)
            continue
        if run:
            out.append(HumanMessage(content=fold_line(run), id=f"{run[0].id}..{run[-1].id}"))
            run = []
        out.append(row_to_message(row, names.get(row.tool_call_id or "")))
    if run:
        out.append(HumanMessage(content=fold_line(run), id=f"{run[0].id}..{run[-1].id}"))
    return out


def message_tokens(messages: Sequence[BaseMessage]) -> int:
    """Tokens the model is sent: every message's text plus its tool calls, cl100k_base."""
    total = 0
    for m in messages:
        total += count_tokens(m.content if isinstance(m.content, str) else render_for_model(m.content))
        calls = getattr(m, "tool_calls", None)
        if calls:
            total += count_tokens(render_for_model([{"name": c["name"], "args": c["args"]} for c in calls]))
    return total
