"""tempo: the shared parts (docs/compaction.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.compaction.model import RawFormatError
from services.compaction.timefmt import ns_from_integer

TOOL = "query_tempo"
_ERROR_CODES = frozenset({2, "2", "STATUS_CODE_ERROR", "ERROR"})
# Infrastructure attributes that repeat on every span of a service: left in the raw (get_evidence).
_SKIP_ATTRS = frozenset(
    {
        "code.filepath",
        "code.function",
        "code.lineno",
        "net.host.name",
        "net.host.port",
        "net.peer.port",
        "thread.id",
        "thread.name",
        "deployment.environment",
        "http.flavor",
        "http.user_agent",
        "otel.library.name",
    }
)
_SPAN_KEYS = ("spanId", "startTimeUnixNano", "endTimeUnixNano")
_DIGITS = re.compile(r"[0-9]+")
_ARROW = " → "
_NAME_CHARS = (120, 60)  # a span name at the richer forms, at the tersest
_SERVICE_CHARS = 40
_MESSAGE_CHARS = (400, 160, 60)  # an error message at each form
_ATTR_CHARS = 80
_MAX_ATTRS = 12
_FULL_PATH_STEPS = 100  # the full path shows this many steps, the middle ones counted
_HEAVY_SHARE = 10  # a path step holding >= 1/10 of the root's time is shown at the middle resolution
_HEADER_NAME_TOKENS = 16  # the root's name in the last (bounded) header
_SERVICES_SHOWN = 8


@dataclass(frozen=True)
class Span:
    span_id: str
    parent: str
    service: str
    name: str
    start: int
    end: int
    error: bool
    status: str
    attrs: tuple[tuple[str, str], ...]
    order: int

    @property
    def duration(self) -> int:
        return self.end - self.start


def _attr_value(value: Any) -> str:
    if not isinstance(value, dict):
        return str(value)
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key in value:
            return str(value[key])
    return str(value)


def _attrs(raw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(raw, list):
        for attr in raw:
            if isinstance(attr, dict) and "key" in attr:
                out[str(attr["key"])] = _attr_value(attr.get("value"))
    return out


def _is_error(code: Any) -> bool:
    return isinstance(code, int | str) and code in _ERROR_CODES


def _list(value: Any) -> list[Any]:
    """An optional list field: absent or null is empty; any other non-list is not OTLP."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError
    return value


def parse(raw: Any) -> list[Span]:
    if isinstance(raw, dict) and isinstance(raw.get("trace"), dict):
        raw = raw["trace"]
    if not isinstance(raw, dict):
        raise RawFormatError(
            "query_tempo: expected an OTLP JSON trace object with 'batches' or 'resourceSpans'"
        )
    batches = raw.get("batches", raw.get("resourceSpans"))
    if not isinstance(batches, list):
        raise RawFormatError(
            "query_tempo: expected an OTLP JSON trace with a 'batches' or 'resourceSpans' list"
        )
    spans: list[Span] = []
    for b_index, batch in enumerate(batches):
        if not isinstance(batch, dict):
            raise RawFormatError(f"query_tempo: batch {b_index} is not an object")
        resource = batch.get("resource")
        service = _attrs(resource.get("attributes") if isinstance(resource, dict) else None).get(
            "service.name", "?"
        )
        try:
            scopes = _list(batch.get("scopeSpans", batch.get("instrumentationLibrarySpans")))
            raw_spans = [s for scope in scopes if isinstance(scope, dict) for s in _list(scope.get("spans"))]
        except TypeError:
            raise RawFormatError(
                f"query_tempo: batch {b_index} scopeSpans is not a list of span lists"
            ) from None
        for span in raw_spans:
            if not isinstance(span, dict) or not all(k in span for k in _SPAN_KEYS):
                raise RawFormatError(
                    f"query_tempo: batch {b_index} has a span without spanId/startTimeUnixNano/endTimeUnixNano"
                )
            span_id = str(span["spanId"])
            try:
                start = ns_from_integer(span["startTimeUnixNano"])
                end = ns_from_integer(span["endTimeUnixNano"])
            except ValueError as exc:
                raise RawFormatError(
                    f"query_tempo: batch {b_index} span {span_id[:40]!r} time {exc}"
                ) from None
            status = span.get("status") or {}
            if not isinstance(status, dict):
                raise RawFormatError(f"query_tempo: batch {b_index} has a span whose status is not an object")
            attrs = _attrs(span.get("attributes"))
            events = span.get("events")
            for event in events if isinstance(events, list) else []:
                if isinstance(event, dict) and event.get("name") == "exception":
                    for key, value in _attrs(event.get("attributes")).items():
                        attrs.setdefault(key, value)
            kept = tuple((k, v) for k, v in attrs.items() if k not in _SKIP_ATTRS)
            spans.append(
                Span(
                    span_id=span_id,
                    parent=str(span.get("parentSpanId") or ""),
                    service=str(service),
                    name=str(span.get("name", "")),
                    start=start,
                    end=end,
                    error=_is_error(status.get("code", 0)),
                    status=str(status.get("message") or ""),
                    attrs=kept,
                    order=len(spans),
                )
            )
    if not spans:
        raise RawFormatError("query_tempo: the trace has no spans")
    return spans


def _children(spans: Sequence[Span]) -> dict[str, list[Span]]:
    children: dict[str, list[Span]] = {}
    for s in spans:
        children.setdefault(s.parent, []).append(s)
    return children


def _orphans(spans: Sequence[Span]) -> list[Span]:
    """Spans without a parent in the trace: the root, and any span whose parent was not returned."""
    ids = {s.span_id for s in spans}
    return [s for s in spans if not s.parent or s.parent not in ids]


def _roots(spans: Sequence[Span]) -> list[Span]:
    """Where a walk down the tree may start: the orphans, else (a raw made only of parent cycles)
    every span, so that the path still starts somewhere."""
    return _orphans(spans) or list(spans)


def critical_path(spans: list[Span], children: Mapping[str, list[Span]] | None = None) -> list[Span]:
    """Root first; each next span is the child that ended last (ties: the earliest in the raw).
    A span is visited once, so parent cycles and duplicate ids in a broken raw end the path."""
    children = _children(spans) if children is None else children
    node = min(_roots(spans), key=lambda s: (s.start, -s.end, s.order))
    path = [node]
    seen = {node.order}
    while True:
        nexts = [c for c in children.get(node.span_id, ()) if c.order not in seen]
        if not nexts:
            return path
        node = max(nexts, key=lambda s: (s.end, -s.order))
        path.append(node)
        seen.add(node.order)


def _depths(spans: Sequence[Span], children: Mapping[str, list[Span]]) -> dict[int, int]:
    """Depth of every span reachable from a root (by raw order); breadth first, each span once."""
    depth = {s.order: 0 for s in _roots(spans)}
    frontier = [s for s in spans if s.order in depth]
    while frontier:
        nxt = []
        for s in frontier:
            for c in children.get(s.span_id, ()):
                if c.order not in depth:
                    depth[c.order] = depth[s.order] + 1
                    nxt.append(c)
        frontier = nxt
    return depth
