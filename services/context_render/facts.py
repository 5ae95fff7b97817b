"""Short fact lines read off a compact digest, values copied verbatim (never recomputed).

Used twice: by the re-render policy (a headline keeps the digest's strongest facts) and by the
local deterministic model (its claims are these lines, so every number it cites is one the
digest holds). A digest lists its items as text lines, most telling first (errors, then the
largest or most salient), under one section key (`patterns`, `series`, `events`, `spans`...);
so its strongest facts are its first lines, whatever the tool.
"""

from __future__ import annotations

from typing import Any

_NOT_SECTIONS = frozenset({"evidence", "summary", "window", "omitted", "streams", "labels", "objects"})


def _clip(text: str, width: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _lines(compact: dict[str, Any]) -> list[str]:
    """The digest's item lines, in its own order: the first list of strings it holds."""
    for key, value in compact.items():
        if key in _NOT_SECTIONS or not isinstance(value, list):
            continue
        lines = [str(v) for v in value if isinstance(v, str)]
        if lines:
            return lines
    return []


def salient_facts(compact: Any, most: int = 3) -> list[str]:
    """The strongest facts of a digest; a re-rendered row yields its own line, an error its text."""
    if not isinstance(compact, dict):
        return [_clip(str(compact))] if compact else []
    if compact.get("re_rendered"):
        return [str(compact.get("headline") or compact.get("line") or "")]
    if isinstance(compact.get("error"), str):
        return [_clip(compact["error"], 160)]
    found = [_clip(line, 120) for line in _lines(compact)[:most]]
    return found or [_clip(str(compact.get("summary") or compact))]


def summary_of(compact: Any) -> str:
    if isinstance(compact, dict):
        return _clip(str(compact.get("summary") or compact.get("headline") or compact.get("line") or ""), 80)
    return _clip(str(compact), 80)
