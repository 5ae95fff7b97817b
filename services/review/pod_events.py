"""A pod-events compact's groups, traced back to the events they sum, by the group's own words.

A group item (`27× 03:11:00–03:12:30 Warning Unhealthy 1 pod`) states its summed count, then the type
when it is not Normal, then the reason. Its events are the raw's items of that type and reason; the
page sums their `count` (an event's occurrences, what the compactor sums) beside the stated count and
flags a difference. A reason split into several groups by message template sums over all of them and
so shows as a difference: honest, not hidden.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from services.review import queries
from services.review.compact_items import matched_lines

_ITEM = re.compile(r"^(\d+)×\s+(.*)$", re.S)


def groups(compact: Any) -> list[dict[str, Any]]:
    out = []
    for index, text, m in matched_lines(compact, "events", _ITEM):
        words = [w for w in m.group(2).split() if not re.search(r"[0-9]", w)]
        if not words:
            continue
        kind = "Warning" if words[0] == "Warning" else "Normal"
        reason = words[1] if kind == "Warning" and len(words) > 1 else words[0]
        out.append({"index": index, "text": text, "count": int(m.group(1)), "type": kind, "reason": reason})
    return out


def _occurrences(count: str | None) -> int:
    return int(count) if count and count.isdigit() else 1


def group_events(
    conn: psycopg.Connection, args: Mapping[str, Any], found: Sequence[Mapping[str, Any]], k: int, page_lines: int
) -> dict[str, Any]:  # fmt: skip
    chosen = found[k]
    mine = [r for r in conn.execute(queries.POD_EVENTS, args).fetchall()
            if (r[1] or "Normal") == chosen["type"] and r[2] == chosen["reason"]]  # fmt: skip
    total = sum(_occurrences(r[3]) for r in mine)
    start = int(args["offset"])
    lines = [{"n": r[0], "stream": 0, "ts": f"{r[5]}–{r[6]}",
              "text": f"{r[1]} {r[2]} ×{_occurrences(r[3])} {r[7]}: {r[4]}"} for r in mine[start : start + page_lines]]  # fmt: skip
    return {
        "index": chosen["index"], "text": chosen["text"], "words": [chosen["type"], chosen["reason"]],
        "stated": chosen["count"], "found": total, "agrees": total == chosen["count"], "lines": lines,
        "unassigned": 0, "events": len(mine), "unit": "occurrences", "listed": len(mine),
    }  # fmt: skip
