"""The model calls page: what each investigate, hypothesis and judge call was sent, part by part.

The calls are rebuilt from the thread's rows by the agent's own rendering
(services/context_render/model_calls.py), so each part and its tokens are what the agent sent and
counted. Pure: the rows come from pages.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from schemas.tokens import count_tokens, render_for_model
from services.context_render.context import message_tokens
from services.context_render.model_calls import ModelCall, StoredRow
from services.review.model import ThreadRow

PART_KIND = {
    "system": "system: preamble and prompt",
    "human": "user",
    "ai": "assistant",
    "tool": "tool result",
}


def stored(row: ThreadRow, history: Sequence[Sequence[Any]] = ()) -> StoredRow:
    """A page row with its re-renderings (made for round, policy, compact, tokens) as model_calls reads it."""
    return StoredRow(
        row.id, row.role, row.tool_call_id, row.round, row.content, row.compact, row.tokens,
        row.first_compact, row.first_tokens, tuple((made, compact, tokens) for made, _p, compact, tokens in history),
    )  # fmt: skip


def part(message: BaseMessage) -> dict[str, Any]:
    text = message.content if isinstance(message.content, str) else render_for_model(message.content)
    calls = [{"name": c["name"], "args": c["args"]} for c in getattr(message, "tool_calls", None) or []]
    return {
        "kind": PART_KIND.get(message.type, message.type),
        "id": message.id,
        "tokens": message_tokens([message]),
        "text": text,
        "tool_calls": render_for_model(calls) if calls else None,
    }


def tool_part(spec: dict[str, Any]) -> dict[str, Any]:
    """One tool schema as sent, with its own tokens (the call's total counts the list, as the agent does)."""
    function = spec.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    text = render_for_model(spec)
    return {"name": str(name or "?"), "tokens": count_tokens(text), "text": text}


def sent_view(call: ModelCall) -> dict[str, Any]:
    """What the call was sent beside its messages: tool schemas, response_format, a refusal."""
    sent = call.sent
    fmt = None if sent is None or sent.response_format is None else render_for_model(sent.response_format)
    return {
        "recorded": sent is not None,
        "tools": [tool_part(t) for t in call.tools or []],
        "tool_tokens": call.tool_tokens,
        "input_tokens": call.input_tokens,
        "response_format": fmt,
        "response_format_tokens": call.format_tokens,
        "refused": None if sent is None else sent.refused,
        "attempt": call.attempt,
        "appended": 0 if sent is None else len(sent.appended),
    }


def call_view(call: ModelCall, k: int) -> dict[str, Any]:
    return {
        "anchor": f"call-{call.round}-{call.node}-{k}",
        "round": call.round,
        "node": call.node,
        "answer_id": call.answer_id,
        "message_tokens": call.message_tokens,
        "tool_schemas_sent": call.tool_schemas_sent,
        **sent_view(call),
        "exact": not call.inexact,
        "inexact": list(call.inexact),
        "parts": [part(m) for m in call.messages],
        "rows": [{"id": r.id, "role": r.role, "how": r.how, "tokens": r.tokens} for r in call.rows],
    }


def calls_view(incident: Mapping[str, Any], calls: Sequence[ModelCall]) -> dict[str, Any]:
    seen: dict[tuple[int, str], int] = {}
    views = []
    for call in calls:
        k = seen.get((call.round, call.node), 0)
        seen[(call.round, call.node)] = k + 1
        views.append(call_view(call, k))
    return {"incident": dict(incident), "calls": views}
