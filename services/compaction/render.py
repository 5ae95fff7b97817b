"""Terse renderings more than one compactor uses: a cut that says how much it cut, a value range.

Both copy what they show from the raw: a clip is a verbatim prefix, a range is the raw's own
min and max strings (never a recomputed number)."""

from __future__ import annotations

import re

_NUMBER = re.compile(r"^([+-]?\d+(?:\.\d+)?)([A-Za-z%µ]*)$")


def clip(text: str, limit: int) -> str:
    """The text up to `limit` characters (at a word boundary when one is near), and how much was
    cut: a cut is never silent."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    cut = cut if cut > limit // 2 else limit
    return f"{text[:cut]}…(+{len(text) - cut} chars)"


def value_range(distinct: set[str]) -> str:
    """The values one variable field takes: `0.5ms..2.9ms` when all are numbers of one unit (the
    raw's min and max strings), else how many distinct values."""
    parsed = {v: _NUMBER.match(v) for v in distinct}
    units = {m.group(2) for m in parsed.values() if m}
    if all(parsed.values()) and len(units) == 1:
        ordered = sorted(distinct, key=lambda v: float(parsed[v].group(1)))  # type: ignore[union-attr]
        return f"{ordered[0]}..{ordered[-1]}"
    return f"{len(distinct)} distinct"
