"""A Loki compact's patterns, traced back to the raw lines they stand for, by the compact's own words.

No service imports another, and a check that re-ran the compactor's own grouping would only agree
with itself. So a pattern's lines are found from what the compact says: each pattern item
(`198× 03:12:44–03:14:01 ERROR <exemplar> [ranges]`) keeps its exemplar verbatim (or, in its terser
forms, its opening and distinctive words, digits as `*`). Its *fixed words* are the item's words
without digits, `*`, a clip mark or the added level tag; a raw line belongs to the pattern whose
fixed words it contains (in any order: a JSON line keeps its own field order; a `key=value` word needs
only the key's last segment and the value), the pattern with the most fixed words winning (so `reset by peer`
is not counted under `reset`). Each line is given to one pattern at most, the page shows the count
found beside the compact's, and a difference is flagged, never hidden: the count is checked against
the lines themselves, independently of the code that made it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from services.review import queries
from services.review.compact_items import matched_lines

_ITEM = re.compile(r"^(\d+)×\s*(.*)$", re.S)
_RANGES = re.compile(r"\s\[[^\[\]]*\]$")
_CLIP = re.compile(r"…\(\+\d+ chars\)$")
_LEVEL_TAGS = {"WARN", "ERROR", "CRIT", "FATAL"}
# The streams a pattern came from, after its times and level tag (`[app=checkout-api]`, `[2 of 4 pods: …]`):
# labels of the stream, not words of the line.
_ATTRIBUTION = re.compile(r"^((?:\S*\d\S*\s+)*(?:(?:WARN|ERROR|CRIT|FATAL)\s+)?)\[[^\[\]]*\]\s+")


def fixed_words(text: str) -> list[str]:
    """The words of a pattern item that every line of the pattern contains verbatim, in order."""
    text = _ATTRIBUTION.sub(r"\1", text.strip())
    body = _RANGES.sub("", _CLIP.sub("", text))
    clipped = _CLIP.search(text) is not None
    words = body.split()
    if clipped and words:
        words = words[:-1]  # the word at a clip may itself be cut
    out: list[str] = []
    for word in words:
        for part in _parts(word):
            if part and not re.search(r"[0-9*…–]", part) and part not in _LEVEL_TAGS and part != "...":
                out.append(part)
    return out


def _parts(word: str) -> list[str]:
    """`req.method=POST` -> [`method`, `POST`]: a field the compactor shows as `key=value` may sit in the
    raw as JSON (`"req":{"method":"POST"}`), so only the key's last segment and the value are required."""
    if "=" not in word:
        return [word]
    key, _, value = word.partition("=")
    return [key.rsplit(".", 1)[-1], value]


def loki_patterns(compact: Any) -> list[dict[str, Any]]:
    """The compact's pattern items: index, text, the count it states and its fixed words."""
    out = []
    for index, text, m in matched_lines(compact, "patterns", _ITEM):
        out.append({"index": index, "text": text, "count": int(m.group(1)), "words": fixed_words(m.group(2))})
    return out


def _matcher(words: Sequence[str]) -> re.Pattern[str] | None:
    """Every fixed word present, in any order: a JSON or logfmt line holds its fields in its own order."""
    if not words:
        return None
    return re.compile("".join(f"(?=.*?{re.escape(w)})" for w in dict.fromkeys(words)), re.S)


def assign(lines: Sequence[str], patterns: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """For each line, the index (into `patterns`) of the most specific pattern it matches, or None."""
    ranked = sorted(
        ((k, m) for k, p in enumerate(patterns) if (m := _matcher(p["words"])) is not None),
        key=lambda km: -len(patterns[km[0]]["words"]),
    )
    out: list[int | None] = []
    for line in lines:
        out.append(next((k for k, m in ranked if m.search(line)), None))
    return out


def pattern_lines(
    conn: psycopg.Connection, args: Mapping[str, Any], patterns: Sequence[Mapping[str, Any]], chosen: int,
    page_lines: int,
) -> dict[str, Any]:  # fmt: skip
    """One pattern's raw lines (a page of them, from `args["offset"]`) and how many there are."""
    records = [(k, e[0] if isinstance(e, list) and e else None, e[1] if isinstance(e, list) and len(e) > 1 else e)
               for k, values in conn.execute(queries.LOKI_ALL, args).fetchall() for e in values]  # fmt: skip
    owners = assign([str(r[2]) for r in records], patterns)
    mine = [n for n, owner in enumerate(owners) if owner == chosen]
    start = int(args["offset"])
    shown = [{"n": n, "stream": records[n][0], "ts": records[n][1], "text": records[n][2]}
             for n in mine[start : start + page_lines]]  # fmt: skip
    stated = int(patterns[chosen]["count"])
    return {
        "index": patterns[chosen]["index"],
        "text": patterns[chosen]["text"],
        "words": patterns[chosen]["words"],
        "stated": stated,
        "found": len(mine),
        "agrees": stated == len(mine),
        "lines": shown,
        "unassigned": sum(1 for o in owners if o is None),
        "listed": len(mine),
    }
