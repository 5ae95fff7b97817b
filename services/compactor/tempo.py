"""query_tempo: a trace in OTLP JSON (`batches` or `resourceSpans`) -> critical path + error spans.

The critical path runs from the root, each step to the child that ends last (the
one the parent waited for). Error spans (status code 2 / STATUS_CODE_ERROR) are
pinned, with their status message and exception text verbatim. Durations are
derived from the raw nanoseconds and rendered in ms; the raw start is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.compactor.model import Draft, Item, RawFormatError
from services.compactor.timefmt import iso_from_ns

TOOL = "query_tempo"
_ERROR_CODES = {2, "2", "STATUS_CODE_ERROR", "ERROR"}
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
        service = _attrs((batch.get("resource") or {}).get("attributes")).get("service.name", "?")
        scopes = batch.get("scopeSpans", batch.get("instrumentationLibrarySpans", []))
        if not isinstance(scopes, list):
            raise RawFormatError(f"query_tempo: batch {b_index} scopeSpans is not a list")
        for scope in scopes:
            for span in (scope or {}).get("spans", []) if isinstance(scope, dict) else []:
                try:
                    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
                    span_id = str(span["spanId"])
                except (KeyError, TypeError, ValueError):
                    raise RawFormatError(
                        f"query_tempo: batch {b_index} has a span without spanId/startTimeUnixNano/endTimeUnixNano"
                    ) from None
                status = span.get("status") or {}
                code = status.get("code", 0)
                attrs = _attrs(span.get("attributes"))
                for event in span.get("events") or []:
                    if isinstance(event, dict) and event.get("name") == "exception":
                        for key, value in _attrs(event.get("attributes")).items():
                            attrs.setdefault(key, value)
                kept = tuple((k, v) for k, v in attrs.items() if k not in _SKIP_ATTRS)
                spans.append(
                    Span(
                        span_id=span_id,
                        parent=str(span.get("parentSpanId") or ""),
                        service=service,
                        name=str(span.get("name", "")),
                        start=start,
                        end=end,
                        error=code in _ERROR_CODES,
                        status=str(status.get("message", "")),
                        attrs=kept,
                        order=len(spans),
                    )
                )
    if not spans:
        raise RawFormatError("query_tempo: the trace has no spans")
    return spans


def critical_path(spans: list[Span]) -> list[Span]:
    """Root first; each next span is the child that ended last (ties: the earliest in the raw)."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[Span]] = {}
    for s in spans:
        children.setdefault(s.parent, []).append(s)
    roots = [s for s in spans if not s.parent or s.parent not in ids]
    node = min(roots, key=lambda s: (s.start, -s.end, s.order))
    path = [node]
    while children.get(node.span_id):
        node = max(children[node.span_id], key=lambda s: (s.end, -s.order))
        path.append(node)
    return path


def _body(span: Span, with_attrs: bool, on_path: bool) -> dict[str, Any]:
    dur = span.end - span.start
    body: dict[str, Any] = {
        "svc": span.service,
        "name": span.name,
        "ms": round(dur / 1e6, 3),
        "start": iso_from_ns(span.start),
    }
    if span.error:
        body["status"] = "ERROR"
        if span.status:
            body["message"] = span.status
    if on_path:
        body["path"] = True
    attrs = {k: v for k, v in span.attrs if not (k == "exception.message" and v == span.status)}
    if with_attrs and attrs:
        body["attrs"] = attrs
    return body


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    spans = parse(raw)
    path = critical_path(spans)
    on_path = {s.span_id for s in path}
    chosen = sorted(
        {s.span_id: s for s in [*path, *(s for s in spans if s.error)]}.values(),
        key=lambda s: (s.start, s.order),
    )
    root = path[0]
    services = sorted({s.service for s in spans})
    levels = []
    for with_attrs in (True, False):
        items = tuple(
            Item(
                id=f"{s.span_id}",
                body=_body(s, with_attrs, s.span_id in on_path),
                n=1,
                pinned=s.error,
                level="error" if s.error else "info",
                first=iso_from_ns(s.start),
            )
            for s in chosen
        )
        levels.append(items)
    header: dict[str, Any] = {
        "evidence_id": evidence_id,
        "summary": (
            f"{len(spans)} spans, {len(services)} services, {sum(s.error for s in spans)} error spans, "
            f"root {root.name} {round((root.end - root.start) / 1e6, 3)}ms"
        ),
        "trace_start": iso_from_ns(root.start),
        "more": f"get_evidence({evidence_id})",
    }
    return Draft(header=header, section="spans", unit="spans", levels=tuple(levels))
