"""Text for Slack, escaped so that nothing a model (or an alert) wrote can form Slack markup. Pure.

Slack's message formatting reads `<...>` as a control sequence: `<!channel>` pings a channel,
`<@U123>` mentions a person, `<https://evil|the runbook>` disguises a link. Slack's own rule is to
escape `&`, `<` and `>` as `&amp;`, `&lt;` and `&gt;` in text that must be shown as written; then
none of those can be formed. Links and mentions the bot makes itself are built by code (`link`),
after escaping, never by splicing untrusted text.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_USER_ID = re.compile(r"[UW][A-Z0-9]{2,20}")  # Slack's user ids (W: Enterprise Grid)


def escape(text: str) -> str:
    """Text shown as written: `&`, `<`, `>` escaped (Slack's three control characters)."""
    return text.translate(_ESCAPES)


def link(url: str, label: str) -> str:
    """A link the bot makes itself: an http(s) URL without control characters, its label escaped."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c in url for c in "<>| \n"):
        raise ValueError(f"not a link the bot may post: {url!r}")
    return f"<{url}|{escape(label).replace('|', '¦')}>"


def mention(user: str) -> str:
    """A mention the bot makes itself of a person it answers: `<@U123>` for a Slack user id, and
    anything else shown as written (`@name`), so it can form no other markup."""
    return f"<@{user}>" if _USER_ID.fullmatch(user) else "@" + escape(user)
