"""What a row of a thread is, in a few words: the `what` column of `show` and of the review page.

Pure, and below the services, so the CLI table and the review page describe a row identically
(their tests compare the two).
"""

from __future__ import annotations

from typing import Any


def describe(role: str, content: Any, compact: Any, tool: str | None) -> str:
    """A short, human description of a row: what it is, not what it says in full."""
    c = content if isinstance(content, dict) else {}
    if role == "alert" and isinstance(c.get("recall"), list):
        kinds = [str(h.get("kind")) for h in c["recall"] if isinstance(h, dict)]
        return f"recall: {kinds.count('concurrent')} concurrent, {kinds.count('historical')} historical"
    if role == "alert":
        return f"alert {c.get('alertname', '?')} {c.get('service', '')} ({c.get('status', '?')})".strip()
    if role == "human":
        text = str(c.get("text", "")).replace("\n", " ")
        prefix = "mention " if c.get("mention") else ""
        return f"{prefix}{c.get('user', '?')}: {clip(text, 44)}"
    if role == "ai":
        calls = c.get("tool_calls") or []
        node = c.get("node", "ai")
        if calls:
            return f"{node}: calls {', '.join(call.get('name', '?') for call in calls)}"
        return f"{node}: {clip(str(c.get('text', '')).replace(chr(10), ' '), 44)}"
    if role == "tool":
        shrunk = " (re-rendered)" if isinstance(compact, dict) and compact.get("re_rendered") else ""
        return f"{tool or 'tool'} digest{shrunk}"
    if role == "judge":
        if c.get("grounded"):
            return "judge: grounded"
        return f"judge: rejected, {len(c.get('questions') or [])} questions"
    if role == "post":
        return f"post: {c.get('kind', '?')}"
    return role


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
