"""The judge's one input message, framed as data (invariant 13).

The payload carries the hypothesis (written by a model that read untrusted text), the evidence
digests (log lines, event messages, Slack words) and the raw checks: all of it is data to grade,
never instructions to the judge. So it reaches the judge inside one frame naming its source, like
every other untrusted text (services/boundary/framing.py), and the judge's prompt says what frames mean.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import HumanMessage

from schemas.events import canonical_json
from services.boundary.framing import frame, unframe

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
