"""A tool that failed: the model is told the tool's own error, never a complaint about the raw.

When a tool call fails, the agent records the failure as its result (`schemas.tools.tool_error_raw`:
`{"error": <the tool's message>, "tool": <name>}`), and a back end may answer with its API's own
error envelope (Prometheus and Loki: `{"status": "error", "error": ...}`; Kubernetes: a `Status`
with `"status": "Failure"`). None of these is a raw of the tool's format, and none is a compaction
problem: the digest is the tool's message (its first `MESSAGE_TOKENS` tokens), labelled as the
tool's error, with the evidence id where the whole of it is kept. Pure and deterministic.
"""

from __future__ import annotations

from typing import Any

from schemas.tokens import count_value_tokens, encoding
from schemas.tools import recorded_tool_error
from services.compaction.render import clip

MESSAGE_TOKENS = 80  # of the tool's message, at most; the rest stays in the raw
_TOOL_CHARS = 48


def tool_failure(raw: Any, tool: str) -> tuple[str, str] | None:
    """(the tool, its own error message) when `raw` says the call failed, else None."""
    recorded = recorded_tool_error(raw)
    if recorded is not None:
        return recorded
    if not isinstance(raw, dict):
        return None
    if raw.get("status") == "error" and isinstance(raw.get("error"), str):
        kind = raw.get("errorType")
        message = raw["error"] if not isinstance(kind, str) or not kind else f"{kind}: {raw['error']}"
        return tool, message
    if raw.get("kind") == "Status" and raw.get("status") == "Failure":
        parts = [str(raw[k]) for k in ("code", "reason", "message") if raw.get(k) not in (None, "")]
        return tool, " ".join(parts) or "Failure"
    return None


def _head(message: str, tokens: int) -> str:
    """The first `tokens` tokens of `message` (cl100k_base) and, where it was cut, how much: a cut
    is never silent."""
    enc = encoding()
    ids = enc.encode_ordinary(message)
    if len(ids) <= tokens:
        return message
    kept = max(tokens, 0)
    return enc.decode(ids[:kept]).rstrip("\ufffd") + f"…(+{len(ids) - kept} tokens)"


def failure_digest(tool: str, message: str, evidence_id: str, budget: int) -> dict[str, str]:
    """`{"error": "<tool> failed; the tool's own error: <message>; raw kept as evidence <id>"}`,
    the message cut to what fits `budget` (at most `MESSAGE_TOKENS`)."""

    def render(text: str) -> dict[str, str]:
        return {"error": f"{tool} failed; the tool's own error: {text}; raw kept as evidence {evidence_id}"}

    message = " ".join(message.split())  # one line
    limit = _TOOL_CHARS
    while True:
        tool = clip(tool, limit)
        room = min(MESSAGE_TOKENS, budget - count_value_tokens(render("…(+1000 tokens)")))
        compact = render(_head(message, room))
        while room > 0 and count_value_tokens(compact) > budget:  # a cut can join tokens differently
            room -= 1
            compact = render(_head(message, room))
        if count_value_tokens(compact) <= budget or limit <= 8:
            return compact
        limit //= 2  # a name of odd characters: it is in the raw, whole
