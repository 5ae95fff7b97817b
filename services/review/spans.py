"""A Tempo compact's error groups, traced back to the spans they count, by the group's own words.

A group line (`40× 03:12:44.220 checkout-api payment.charge ERROR "upstream timeout" 101..140ms`)
states its count, then the service, the span name and ERROR, then the status message quoted (clipped
with `…` when long). Its spans are the raw's error spans of that service whose name and message start
as the line writes them; the page lists them beside the stated count and flags a difference.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psycopg

from services.review import queries
from services.review.compact_items import matched_lines

_GROUP = re.compile(
    r'^(\d+)×\s+(?:\d\d:\d\d:\d\d(?:\.\d+)?\s+)?(\S+)\s+(.+?)\s+ERROR\b(?:\s+"(.*?)"(?:\s|$))?', re.S
)
_CLIPPED = re.compile(r"(…(\(\+\d+ chars\))?)$")
_ERROR_CODES = {2, "2", "STATUS_CODE_ERROR", "ERROR"}


def groups(compact: Any) -> list[dict[str, Any]]:
    out = []
    for index, text, m in matched_lines(compact, "groups", _GROUP):
        out.append({
            "index": index, "text": text, "count": int(m.group(1)), "service": m.group(2),
            "name": _CLIPPED.sub("", m.group(3)), "message": _CLIPPED.sub("", m.group(4) or ""),
        })  # fmt: skip
    return out


def _attrs(values: Any) -> dict[str, str]:
    out = {}
    for a in values if isinstance(values, list) else []:
        if isinstance(a, dict) and isinstance(a.get("value"), dict):
            out[str(a.get("key"))] = str(next(iter(a["value"].values()), ""))
    return out


def error_spans(raw: Any) -> Iterator[dict[str, Any]]:
    """Every error span of an OTLP JSON trace (`batches` or `resourceSpans`), in the raw's order."""
    trace = raw.get("trace", raw) if isinstance(raw, dict) else {}
    batches = trace.get("batches", trace.get("resourceSpans")) if isinstance(trace, dict) else None
    n = 0
    for batch in batches if isinstance(batches, list) else []:
        if not isinstance(batch, dict):
            continue
        service = _attrs((batch.get("resource") or {}).get("attributes")).get("service.name", "?")
        for scope in batch.get("scopeSpans", batch.get("instrumentationLibrarySpans")) or []:
            for span in (scope.get("spans") if isinstance(scope, dict) else None) or []:
                status = span.get("status") if isinstance(span, dict) else None
                n += 1
                if not isinstance(status, dict) or status.get("code") not in _ERROR_CODES:
                    continue
                message = str(status.get("message") or "")
                if not message:
                    for event in span.get("events") or []:
                        message = message or _attrs(event.get("attributes")).get("exception.message", "")
                yield {"n": n - 1, "service": service, "name": str(span.get("name", "")), "message": message,
                       "span_id": str(span.get("spanId", "")), "start": span.get("startTimeUnixNano"),
                       "end": span.get("endTimeUnixNano")}  # fmt: skip


def _duration_ms(span: Mapping[str, Any]) -> str:
    try:
        return f"{(int(span['end']) - int(span['start'])) / 1e6:.1f}ms"
    except (TypeError, ValueError, KeyError):
        return "?"


def group_spans(
    conn: psycopg.Connection, args: Mapping[str, Any], found: Sequence[Mapping[str, Any]], k: int, page_lines: int
) -> dict[str, Any]:  # fmt: skip
    chosen = found[k]
    record = conn.execute(queries.RAW_OF_ROW, args).fetchone()
    mine = [s for s in error_spans(record[0] if record else None)
            if s["service"] == chosen["service"] and s["name"].startswith(chosen["name"])
            and s["message"].startswith(chosen["message"])]  # fmt: skip
    start = int(args["offset"])
    lines = [{"n": s["n"], "stream": 0, "ts": _duration_ms(s),
              "text": f"{s['service']} {s['name']} ERROR \"{s['message']}\" span {s['span_id']}"}
             for s in mine[start : start + page_lines]]  # fmt: skip
    return {
        "index": chosen["index"], "text": chosen["text"], "words": [chosen["service"], chosen["name"], "ERROR"],
        "stated": chosen["count"], "found": len(mine), "agrees": len(mine) == chosen["count"], "lines": lines,
        "unassigned": 0, "events": len(mine), "unit": "spans", "listed": len(mine),
    }  # fmt: skip
