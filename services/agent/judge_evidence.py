"""What the judge is shown of the evidence, and how its grades are recorded: pure functions.

Apart from the graph so that the judge's view of the evidence can be tested without a model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from schemas.tokens import render_for_model
from services.agent.round_state import ClaimDraft
from services.boundary.framing import framed_within
from services.context_render.context import LoadedContext

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def claim_numbers(claim: ClaimDraft) -> list[str]:
    """The numbers a claim states, each once: the judge is told which of them its evidence lacks."""
    return sorted(set(NUMBER.findall(claim["text"])))


def terse_grades(graded: Any, claims: list[ClaimDraft]) -> list[dict[str, Any]]:
    """The judge's grades as recorded: claim by index, a reason only for a failure.

    A grade that names its claim by text (a model that ignored the format) is mapped to the
    claim's index when the text matches one; otherwise it is kept as the model gave it.
    """
    texts = {str(c.get("text")): k for k, c in enumerate(claims)}
    out: list[dict[str, Any]] = []
    for g in graded if isinstance(graded, list) else []:
        if not isinstance(g, dict):
            continue
        claim = g.get("claim")
        if isinstance(claim, str) and claim in texts:
            claim = texts[claim]
        grounded = bool(g.get("grounded"))
        grade: dict[str, Any] = {"claim": claim, "grounded": grounded}
        if not grounded and g.get("reason"):
            grade["reason"] = str(g["reason"])
        out.append(grade)
    return out


def evidence_index(ctx: LoadedContext, turn: list[BaseMessage]) -> dict[str, dict[str, Any]]:
    """Every citable id -> its kind (tool name or 'human') and what the model saw of it."""
    calls = {str(c["id"]): str(c["name"]) for r in ctx.rows for c in r.tool_calls()}
    calls.update({str(c["id"]): c["name"] for m in turn if isinstance(m, AIMessage) for c in m.tool_calls})
    index: dict[str, dict[str, Any]] = {}
    for row in ctx.rows:
        if row.role == "tool":
            index[row.id] = {"kind": calls.get(row.tool_call_id or "", "tool"), "digest": row.value}
        elif row.role == "human" and isinstance(row.value, dict):
            index[row.id] = {
                "kind": "human",
                "digest": {"user": row.value.get("user"), "text": row.value.get("text")},
            }
    for m in turn:
        if isinstance(m, ToolMessage) and m.id:
            body = m.content if isinstance(m.content, str) else render_for_model(m.content)
            body = re.sub(r"^(\[checked: [^\]]*\] )?\[evidence [^\]]+\] ", "", framed_within(body))
            try:
                digest: Any = json.loads(body)
            except ValueError:
                digest = body
            index[m.id] = {"kind": calls.get(m.tool_call_id, "tool"), "digest": digest}
    return index
