"""The review page's views, built from rows of the projection: pure functions, no I/O.

Each view is a plain dict (the JSON answer) that the templates render as HTML, so the page and
its JSON never disagree. Raw tokens are `count_value_tokens(content)`, context tokens the row's
`tokens` column: the same two numbers `incident-memory show` prints.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import quote

from schemas.canonical import canonical_json
from schemas.row_description import describe
from schemas.row_view import has_bookkeeping, model_view

SLACK_CHANNEL = re.compile(r"^[A-Z0-9]{1,32}$")
SLACK_TS = re.compile(r"^[0-9]{1,12}\.[0-9]{1,9}$")
BAR_WIDTH = 240


@dataclass(frozen=True)
class ThreadRow:
    """One agent_messages row as the review page reads it (content is None when not fetched)."""

    seq: int
    round: int | None
    role: str
    id: str
    tool_call_id: str | None
    content: Any
    compact: Any
    tokens: int
    created_at: datetime
    tool: str | None
    first_compact: Any
    first_tokens: int | None


def slack_link(channel: str | None, slack_ts: str | None) -> str | None:
    """Slack's permalink form for a thread root; None unless both parts have Slack's own shape, so a
    stored value can never become a `javascript:` or foreign link."""
    if not channel or not slack_ts or not SLACK_CHANNEL.match(channel) or not SLACK_TS.match(slack_ts):
        return None
    return f"https://slack.com/archives/{channel}/p{slack_ts.replace('.', '')}"


def bar(tokens: int, largest: int) -> int:
    """A bar's width on a log scale: 21,504 beside 56 must both be visible."""
    if tokens <= 0 or largest <= 0:
        return 0
    return max(1, round(BAR_WIDTH * math.log1p(tokens) / math.log1p(largest)))


def _iso(value: datetime | date | None) -> str | None:
    return None if value is None else value.isoformat()


def incident_item(record: Sequence[Any]) -> dict[str, Any]:
    thread_ts, service, status, rounds, opened_at, alertname, channel, slack_ts, rows, ctx, verdict = record
    return {
        "thread_ts": thread_ts,
        "service": service,
        "status": status,
        "rounds": rounds,
        "opened_at": _iso(opened_at),
        "alertname": alertname,
        "channel": channel,
        "slack_ts": slack_ts,
        "slack_url": slack_link(channel, slack_ts),
        "rows": rows,
        "context_tokens": int(ctx),
        "last_verdict": None if verdict is None else ("grounded" if verdict is True else "rejected"),
    }


def filter_options(records: Iterable[Sequence[Any]]) -> dict[str, list[str]]:
    options: dict[str, set[str]] = {"service": set(), "state": set(), "alert": set(), "channel": set()}
    for kind, value in records:
        if value is not None and kind in options:
            options[kind].add(str(value))
    return {k: sorted(v) for k, v in options.items()}


def silent(row: ThreadRow) -> bool:
    """Recorded while the bot was silent: a human message outside any round that did not address it."""
    mention = isinstance(row.content, dict) and bool(row.content.get("mention"))
    return row.role == "human" and row.round is None and not mention


def renderings(row: ThreadRow, history: Sequence[Sequence[Any]] = ()) -> list[dict[str, Any]]:
    """What the model was shown of this row, oldest first: the rendering it was written with, then
    each re-rendering in the order applied (rendering_history, migration 011: `(made for round,
    policy, compact, tokens)`). Without a history (a row projected before it was kept) a row
    re-rendered twice shows its first and current renderings only."""
    if history:
        shown: list[dict[str, Any]] = []
        if row.first_compact is not None:
            shown.append({"label": "written", "tokens": row.first_tokens, "value": row.first_compact})
        elif row.role in ("ai", "judge", "post") and has_bookkeeping(row.content):  # schemas/row_view.py
            shown.append({"label": "written", "tokens": None, "value": model_view(row.content)})
        elif row.role in ("ai", "judge", "post"):  # written with compact NULL: the model saw the raw
            shown.append({"label": "written (the raw)", "tokens": None, "value": row.content})
        for made, policy, compact, tokens in history:
            when = f", for round {made}" if made is not None else ""
            shown.append({"label": f"{policy or 're-rendered'}{when}", "tokens": tokens, "value": compact})
        return shown
    if row.compact is None:
        return [{"label": "raw (no compact)", "tokens": row.tokens}]
    shown = []
    if row.first_compact is not None and row.first_compact != row.compact:
        shown.append({"label": "written", "tokens": row.first_tokens, "value": row.first_compact})
    label = "re-rendered" if isinstance(row.compact, dict) and row.compact.get("re_rendered") else "written"
    shown.append({"label": label, "tokens": row.tokens, "value": row.compact})
    return shown


def table_row(
    row: ThreadRow, raw_tokens: int, largest: int, history: Sequence[Sequence[Any]] = ()
) -> dict[str, Any]:
    shown = [{"label": r["label"], "tokens": r["tokens"]} for r in renderings(row, history)]
    return {
        "seq": row.seq,
        "round": row.round,
        "role": row.role,
        "id": row.id,
        "what": describe(row.role, row.content, row.compact, row.tool),
        "tool": row.tool,
        "raw_tokens": raw_tokens,
        "context_tokens": row.tokens,
        "raw_bar": bar(raw_tokens, largest),
        "context_bar": bar(row.tokens, largest),
        "silent": silent(row),
        "renderings": shown,
        # Formatted once here: the page's table is the hot loop of its template.
        "href": quote(row.id, safe=":"),
        "round_shown": "-" if row.round is None else str(row.round),
        "raw_shown": f"{raw_tokens:,}",
        "context_shown": f"{row.tokens:,}",
        "history": " → ".join(
            f"{r['label']} {r['tokens']:,}" if r["tokens"] is not None else r["label"] for r in shown
        )
        if len(shown) > 1
        else "",
    }


def verdicts(rows: Sequence[ThreadRow]) -> list[dict[str, Any]]:
    """Each judge verdict with its graded claims, each claim with the evidence rows it cites."""
    by_id = {r.id: r for r in rows}
    out = []
    for row in rows:
        if row.role != "judge" or not isinstance(row.content, dict):
            continue
        hyp = by_id.get(str(row.content.get("hypothesis_id")))
        claims = (hyp.content.get("claims") if hyp and isinstance(hyp.content, dict) else None) or []
        graded = []
        for grade in row.content.get("graded_claims") or []:
            if not isinstance(grade, dict):
                continue
            k = grade.get("claim")
            claim = claims[k] if isinstance(k, int) and 0 <= k < len(claims) else {}
            cited = [str(e) for e in (claim.get("evidence_ids") or []) if isinstance(claim, dict)]
            graded.append({
                "claim": k,
                "text": str(claim.get("text", k)) if isinstance(claim, dict) else str(k),
                "grounded": bool(grade.get("grounded")),
                "reason": grade.get("reason"),
                "evidence": [{"id": e, "in_thread": e in by_id} for e in cited],
            })  # fmt: skip
        out.append({
            "id": row.id, "round": row.round, "grounded": bool(row.content.get("grounded")),
            "questions": [str(q) for q in row.content.get("questions") or []], "graded_claims": graded,
            "model": row.content.get("model"),
        })  # fmt: skip
    return out


def posts(rows: Sequence[ThreadRow], records: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """The bot's posts as posted: the text of each post row beside its intent and outcome records."""
    recs: dict[str, list[dict[str, Any]]] = {}
    for post_id, phase, channel, slack_ts, root, recorded_at in records:
        recs.setdefault(post_id, []).append({
            "phase": phase, "channel": channel, "slack_ts": slack_ts, "root": root,
            "recorded_at": _iso(recorded_at), "slack_url": slack_link(channel, slack_ts),
        })  # fmt: skip
    out = []
    for row in rows:
        if row.role not in ("post", "alert") or row.id not in recs:
            continue
        text = row.content.get("text") if isinstance(row.content, dict) else None
        kind = row.content.get("kind") if isinstance(row.content, dict) else None
        out.append({"id": row.id, "round": row.round, "kind": kind or row.role, "text": text,
                    "records": recs[row.id]})  # fmt: skip
    return out


def thread_view(
    incident: Mapping[str, Any], rows: Sequence[ThreadRow], raw_tokens: Mapping[str, int], post_records: Any,
    history: Mapping[str, Sequence[Sequence[Any]]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    largest = max([*raw_tokens.values(), *(r.tokens for r in rows), 1])
    table = [table_row(r, raw_tokens[r.id], largest, (history or {}).get(r.id, ())) for r in rows]
    return {
        "incident": dict(incident),
        "rows": table,
        "totals": {
            "rows": len(table),
            "raw_tokens": sum(r["raw_tokens"] for r in table),
            "context_tokens": sum(r["context_tokens"] for r in table),
        },
        "verdicts": verdicts(rows),
        "posts": posts(rows, post_records),
    }


def incident_header(record: Sequence[Any]) -> dict[str, Any]:
    thread_ts, service, status, rounds, opened_at, w_start, w_end, channel, slack_ts = record
    return {
        "thread_ts": thread_ts, "service": service, "status": status, "rounds": rounds,
        "opened_at": _iso(opened_at), "window": [_iso(w_start), _iso(w_end)], "channel": channel,
        "slack_ts": slack_ts, "slack_url": slack_link(channel, slack_ts),
    }  # fmt: skip


def pretty(value: Any) -> str:
    """A compact as the reviewer reads it: indented JSON, or the text itself."""
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def canonical(value: Any) -> str:
    return canonical_json(value)
