"""The write-time compact of the thread's own turns: a human message and an alert, as the model sees them.

A tool result is compacted by its compactor (registry.py); a human message and an alert are the
thread's words and are never paraphrased (invariant 10), but what reaches the model is still
redacted (invariant 13): a password pasted into Slack or a token in an alert annotation becomes a
typed marker, and the raw stays verbatim in `content`. Each function returns the row's compact in
the row content's own shape, or None when the model would see the content unchanged, so a thread
without secrets projects byte-identical rows. Pure and deterministic: the same event always gives
the same compact (invariant 8). A human message's pastes (logs, stack traces) are compacted here
too, like the tool results they are (services/compaction/pastes.py); a long turn is clipped at read time
(services/agent/discussion.py), from this compact.
"""

from __future__ import annotations

from typing import Any

from schemas.events import AlertReceived, EventBase, HumanMessage
from services.boundary.redact import redact_text, redact_value
from services.compaction.pastes import compact_pastes


def compact_human(event: HumanMessage) -> dict[str, Any] | None:
    """The human row as the model sees it: the message's text redacted, then its log and stack-trace
    pastes compacted (services/compactor/services/compaction/pastes.py; the words around them verbatim); None when nothing
    changed."""
    text = compact_pastes(redact_text(event.text), event.message_id)
    if text == event.text:
        return None
    return {**event.row_content(), "text": text}


def compact_alert(event: AlertReceived) -> dict[str, Any] | None:
    """The alert row as the model sees it: every string of the alert (labels, annotations, URLs)
    redacted, the structure kept; None when nothing changed."""
    content = event.row_content()
    redacted = redact_value(content)
    return None if redacted == content else redacted


def with_turn_compact(event: EventBase) -> EventBase | None:
    """The event with its write-time compact, or None when it needs none (its bytes go on as they came).

    An event that already carries a compact (written by an earlier compactor, or redacted at ingest)
    is rendered again from its own fields, so a replay through a newer redactor re-derives it."""
    compact: dict[str, Any] | None
    if isinstance(event, HumanMessage):
        compact = compact_human(event)
    elif isinstance(event, AlertReceived):
        compact = compact_alert(event)
    else:
        return None
    if compact == event.compact:
        return None
    return event.model_copy(update={"compact": compact})
