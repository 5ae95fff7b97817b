"""Recall's recorded result as the model reads it and as the first post names it. Pure.

The text is data about other incidents (their reasons quote log patterns and people's decisions), so it
reaches the model framed with its source, like every untrusted text (invariant 13).
"""

from __future__ import annotations

from typing import Any, Final

from langchain_core.messages import HumanMessage

from schemas.events import RecalledIncident
from schemas.ids import message_id
from services.boundary.framing import frame

SOURCE: Final = "recall of other incidents (their profiles), computed once when the alert opened"
NODE: Final = "recall"


def recall_id(thread_ts: str) -> str:
    """The one recall row of a thread: `T:-:recall:0`."""
    return message_id(thread_ts, None, NODE, 0)


def is_recall_row(row_id: str, role: str) -> bool:
    return role == "alert" and row_id.split(":", 3)[2:3] == [NODE]


def hits_of(value: Any) -> list[RecalledIncident]:
    """The hits of a recall row's value (`{"recall": [...]}`), as recorded."""
    raw = value.get("recall") if isinstance(value, dict) else None
    return (
        [RecalledIncident.model_validate(h) for h in raw if isinstance(h, dict)]
        if isinstance(raw, list)
        else []
    )


def recall_text(hits: list[RecalledIncident]) -> str:
    if not hits:
        return "no similar or concurrent incident visible to this channel"
    lines = []
    for h in hits:
        where = f" {h.link}" if h.link else ""
        lines.append(f"{h.kind} {h.thread}{where} (score {h.score_milli / 1000:.3f}): {'; '.join(h.reasons)}")
    return "\n".join(lines)


def recall_message(row_id: str, hits: list[RecalledIncident]) -> HumanMessage:
    return HumanMessage(content=frame(SOURCE, row_id, recall_text(hits)), id=row_id)


def concurrent_of_hits(hits: list[RecalledIncident] | None) -> list[RecalledIncident] | None:
    """The concurrent hits the first post names (None when there are none: the post's bytes unchanged)."""
    found = [h for h in hits or [] if h.kind == "concurrent"]
    return found or None
