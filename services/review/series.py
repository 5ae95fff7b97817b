"""A Prometheus compact's series lines, traced back to the samples behind each trend segment.

A series line starts with the labels that tell it apart (`{pod=checkout-api-7d9f8b6c5-x2k4q}: ...`,
or `28 series {pod=checkout-api-*}: ...` for a collapsed group) and names its trend's turning points
by time (`flat ~173Mi, then rising ~34Mi/min from 03:02:00`). Its samples are the raw series whose
labels match those words (a `*` matches any run of characters); the times the line names split them
into the segments the line describes, so a reviewer reads the points behind "rising from 03:02:00".
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg

from services.review import queries
from services.review.compact_items import matched_lines

_HEAD = re.compile(r"^(?:(\d+) series )?\{([^}]*)\}:")
_TIME = re.compile(r"\b(\d\d:\d\d:\d\d)\b")


def _labels(text: str) -> dict[str, str]:
    out = {}
    for pair in text.split(","):
        key, sep, value = pair.strip().partition("=")
        if sep and key:
            out[key.strip()] = value.strip()
    return out


def series_items(compact: Any) -> list[dict[str, Any]]:
    """Each series line of the compact with its labels, how many series it stands for, and the times
    that split its trend."""
    out = []
    for index, text, m in matched_lines(compact, "series", _HEAD):
        rest = text[m.end() :]
        out.append({
            "index": index, "text": text, "labels": _labels(m.group(2)),
            "count": int(m.group(1) or 1), "splits": sorted(set(_TIME.findall(rest))),
        })  # fmt: skip
    return out


def matches(metric: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return all(fnmatch.fnmatchcase(str(metric.get(k, "")), v) for k, v in labels.items())


def _clock(ts: Any) -> str:
    try:
        return datetime.fromtimestamp(float(ts), UTC).strftime("%H:%M:%S")
    except (TypeError, ValueError, OverflowError):
        return "?"


def segment_of(clock: str, splits: Sequence[str]) -> int:
    """0 before the first time the line names, k from its k-th time on (HH:MM:SS sort as strings)."""
    return sum(1 for t in splits if clock >= t)


def segments(points: Sequence[Mapping[str, Any]], splits: Sequence[str]) -> list[dict[str, Any]]:
    starts = ["start", *(f"from {t}" for t in splits)]
    out = []
    for k, label in enumerate(starts):
        mine = [p for p in points if p["segment"] == k]
        numbers = [float(p["value"]) for p in mine if _finite(p["value"])]
        out.append({
            "segment": k, "label": label, "points": len(mine),
            "first": mine[0]["value"] if mine else None, "last": mine[-1]["value"] if mine else None,
            "min": min(numbers) if numbers else None, "max": max(numbers) if numbers else None,
        })  # fmt: skip
    return out


def _finite(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return number == number and abs(number) != float("inf")


def series_points(
    conn: psycopg.Connection, args: Mapping[str, Any], found: Sequence[Mapping[str, Any]], k: int, page_lines: int
) -> dict[str, Any]:  # fmt: skip
    chosen = found[k]
    record = conn.execute(queries.PROM_RESULT, args).fetchone()
    result = record[0] if record and isinstance(record[0], list) else []
    mine = [s for s in result if isinstance(s, dict) and matches(s.get("metric") or {}, chosen["labels"])]
    points: list[dict[str, Any]] = []
    for k, series in enumerate(mine):
        for ts, value in series.get("values") or []:
            clock = _clock(ts)
            points.append({"n": len(points), "stream": k, "ts": clock, "value": value,
                           "segment": segment_of(clock, chosen["splits"])})  # fmt: skip
    start = int(args["offset"])
    lines = [{**p, "text": f"{p['value']}  (segment {p['segment']}, series {p['stream']})"}
             for p in points[start : start + page_lines]]  # fmt: skip
    return {
        "kind": "series", "index": chosen["index"], "text": chosen["text"], "labels": chosen["labels"],
        "stated": chosen["count"], "found": len(mine), "agrees": len(mine) == chosen["count"],
        "segments": segments(points, chosen["splits"]), "lines": lines, "listed": len(points),
        "names": [", ".join(f"{k}={v}" for k, v in sorted((s.get("metric") or {}).items())) for s in mine[:20]],
    }  # fmt: skip
