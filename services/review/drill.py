"""Drilling from a digest's item down to the raw behind it, one table for every tool the page knows.

Each tool's module reads the items back from the compact as written (`items`) and pages through the raw
lines of one of them (`lines`); which item the reader asked for is found here, once for all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from services.review import patterns, pod_events, series, spans

Items = Sequence[Mapping[str, Any]]
# (connection, the row's query args with its page offset, the items, the chosen item's position, page size)
Lines = Callable[[psycopg.Connection, Mapping[str, Any], Items, int, int], dict[str, Any]]


@dataclass(frozen=True)
class Drill:
    items: Callable[[Any], list[dict[str, Any]]]
    lines: Lines


DRILLS: Mapping[str, Drill] = {
    "query_loki": Drill(patterns.loki_patterns, patterns.pattern_lines),
    "query_prometheus": Drill(series.series_items, series.series_points),
    "query_tempo": Drill(spans.groups, spans.group_spans),
    "get_pod_events": Drill(pod_events.groups, pod_events.group_events),
}


def drill_down(
    conn: psycopg.Connection, args: Mapping[str, Any], tool: str | None, compact: Any, wanted: str | None,
    page_lines: int,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:  # fmt: skip
    """The digest's items, and the page of raw lines of the one whose index is `wanted` (None if absent)."""
    drill = DRILLS.get(tool or "")
    if drill is None:
        return [], None
    found = drill.items(compact)
    k = next((k for k, item in enumerate(found) if str(item["index"]) == wanted), None)
    return found, None if k is None else drill.lines(conn, args, found, k, page_lines)
