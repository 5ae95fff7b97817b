"""The judge's one input message, framed as data (invariant 13), and the payload it carries. Pure.

Here rather than in the agent because the review page rebuilds the judge's call from the rows with the
same functions (services/context_render/model_calls.py): what it shows is what the judge was sent.

The payload carries the hypothesis (written by a model that read untrusted text), the evidence
digests (log lines, event messages, Slack words) and the raw checks: all of it is data to grade,
never instructions to the judge. So it reaches the judge inside one frame naming its source, like
every other untrusted text (services/boundary/framing.py), and the judge's prompt says what frames mean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from schemas.events import canonical_json
from schemas.tokens import render_for_model
from services.boundary.framing import frame, framed_within, unframe
from services.context_render.context import LoadedContext

PREFIX = "JUDGE INPUT "
SOURCE = "the hypothesis under judgment and its evidence (model and tool output)"


def judge_message(payload: dict[str, Any]) -> HumanMessage:
    """`JUDGE INPUT <data N from ...>{canonical JSON}</data N>`: the frame's nonce comes from the
    payload itself, so a retried round sends the same bytes. Escaping `</data` as `<\\/data` keeps the
    JSON valid and equal once parsed (`\\/` is JSON's escape for `/`)."""
    row_id = str(payload.get("hypothesis_id") or "")
    return HumanMessage(content=PREFIX + frame(SOURCE, row_id, canonical_json(payload)))


def read_judge_input(text: str) -> dict[str, Any] | None:
    """The payload of a judge input message, or None when `text` is not one (or not framed)."""
    if not text.startswith(PREFIX):
        return None
    source, content = unframe(text[len(PREFIX) :])
    if source is None:
        return None
    value = json.loads(content)
    return value if isinstance(value, dict) else None


def evidence_index(ctx: LoadedContext, turn: Sequence[BaseMessage]) -> dict[str, dict[str, Any]]:
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


def judge_payload(
    ctx: LoadedContext,
    turn: Sequence[BaseMessage],
    hypothesis: Mapping[str, Any],
    hypothesis_id: str | None,
    raw_checks: list[dict[str, Any]],
) -> dict[str, Any]:
    """What the judge reads, before shaping: the claims, the evidence they cite as the model saw it,
    and the raw checks (the numbers each claim states that its evidence lacks, read by the agent from
    the raws: recorded with the call, since the rows shown to the model do not hold the raws' words)."""
    evidence = evidence_index(ctx, turn)
    claims = list(hypothesis["claims"])
    cited = {e for c in claims for e in c["evidence_ids"]}
    return {
        "hypothesis_id": hypothesis_id,
        "service": ctx.state.service if ctx.state else None,
        "summary": hypothesis["summary"],
        "claims": claims,
        "evidence": {eid: evidence[eid] for eid in sorted(cited) if eid in evidence},
        "raw_checks": raw_checks,
    }
