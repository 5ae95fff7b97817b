"""What a post looks like in Slack (Block Kit): short, with its evidence ids and who wrote it.

The evidence lives in the thread's memory, not in Slack: a post names it, never pastes it. A post
written by the deterministic local model says so in the post itself. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schemas.events import AlertReceived, RecalledIncident, ThreadPost
from services.boundary.slack_escape import escape, link, mention

LOCAL_MODEL = "local-deterministic"
SECTION_CHARS = 2900  # Slack allows 3,000 characters in a section's text
METADATA_EVENT_TYPE = "incident_memory_post"  # letters, digits and `_` only, as Slack requires


@dataclass(frozen=True)
class SlackMessage:
    """The body of one `chat.postMessage`: built (and redacted) by the poster, sent as it is."""

    channel: str
    thread_ts: str | None  # None: a thread's root
    text: str  # the notification text
    blocks: list[dict[str, Any]]
    metadata: dict[str, Any]  # `metadata(post_id, thread_key)`: finds the message again after a crash


def author(model: str) -> str:
    if model == LOCAL_MODEL:
        return f"written by `{LOCAL_MODEL}`: a deterministic local stand-in for a model, not an LLM"
    return f"written by `{model}`"


def _clip(text: str, width: int = SECTION_CHARS) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def post_blocks(post: ThreadPost) -> tuple[str, list[dict[str, Any]]]:
    """(notification text, blocks) of a round's post: the summary with its claims and evidence, or
    the judge's questions; and the model that wrote it. Everything the model wrote is escaped
    (services/boundary/slack_escape.py): it can form no mention, channel ping or link."""
    lines = escape(post.text).splitlines() or [""]
    if post.kind == "summary":
        title = f"*Summary* — {lines[0]}"
        body = "\n".join(lines[1:])
    elif post.kind == "failure":
        title, body = "*This round did not finish*", post.text
    else:
        title = "*Questions before I conclude*"
        body = "\n".join(line for line in lines[1:] if line.strip()) or post.text
    whom = answering(post)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"{whom}{title}\n{body}".strip())}},
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"{escape(author(post.model))} · round {post.round}"}],
        },
    ]
    if post.concurrent:
        blocks.insert(1, concurrent_block(post.concurrent))
    label = {"summary": "Summary", "failure": "Round failed"}.get(post.kind, "Questions")
    return _clip(f"{whom}{label}: {lines[0]}", 300), blocks


def answering(post: ThreadPost) -> str:
    """Whom the post answers, each person once in thread order ("<@U1> <@U2>: "); "" when no one asked."""
    users = list(dict.fromkeys(a.user for a in post.answers or []))
    return " ".join(mention(u) for u in users) + ": " if users else ""


def concurrent_block(hits: list[RecalledIncident]) -> dict[str, Any]:
    """The concurrent incidents recall found, rendered by code: each thread's link is built by `link`
    (a Slack permalink recall checked), its reasons escaped (they quote log lines and people's words)."""
    lines = ["*Concurrent incident" + ("s" if len(hits) > 1 else "") + "* (part of a wider outage?)"]
    for h in hits:
        where = _thread_link(h)
        lines.append(f"• {where}: {escape('; '.join(h.reasons))}")
    return {"type": "section", "text": {"type": "mrkdwn", "text": _clip("\n".join(lines))}}


def _thread_link(hit: RecalledIncident) -> str:
    """The thread's link when it is one the bot may post (an http(s) permalink), else its id as code."""
    if hit.link:
        try:
            return link(hit.link, hit.thread)
        except ValueError:
            pass
    return f"`{escape(hit.thread)}`"


def alert_blocks(alert: AlertReceived) -> tuple[str, list[dict[str, Any]]]:
    """(notification text, blocks) of the message that opens an alert's thread."""
    annotations = _common(alert.alert, "commonAnnotations")
    summary = escape(str(annotations.get("summary") or annotations.get("description") or ""))
    title = escape(f"{alert.alertname} — {alert.service} ({alert.status})")
    window = f"window {alert.window_start:%Y-%m-%d %H:%M}–{alert.window_end:%H:%M}Z"
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"*{title}*\n{summary}".strip())}},
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"{window} · I keep this incident's memory; mention me in this thread",
                }
            ],
        },
    ]
    return _clip(f"{title}: {summary}" if summary else title, 300), blocks


def _common(payload: dict[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    if isinstance(value, dict):
        return value
    alerts = payload.get("alerts")
    if isinstance(alerts, list) and alerts and isinstance(alerts[0], dict):
        inner = alerts[0].get(key.removeprefix("common").lower())
        if isinstance(inner, dict):
            return inner
    return {}


def metadata(post_id: str, thread_key: str) -> dict[str, Any]:
    """The tag that finds a post again after a crash (`conversations.replies`, include_all_metadata).
    Ids only: any workspace member's app can read message metadata."""
    return {"event_type": METADATA_EVENT_TYPE, "event_payload": {"event_id": post_id, "thread": thread_key}}
