"""What goes on the wire to each back end, and what must come back. Pure: no I/O.

Building a request and checking a response are kept apart from the HTTP client so
both can be tested without a network, and so the recorded back end validates its
own output with the very checks a real Loki answer has to pass.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from services.boundary.timearg import BadTimeArg, parse_duration_ns
from services.runtime.loading import json_object
from services.telemetry_mcp.timeparse import ns_to_unix_seconds, window_ns

PROMETHEUS_MAX_POINTS = 11_000  # Prometheus refuses a query_range above this many points per series
LOKI_MAX_LIMIT = 50_000
_TRACE_ID = re.compile(r"[0-9a-fA-F]{1,32}")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class ToolArgError(ValueError):
    """An argument the back end would reject; the message says which and why."""


class UpstreamError(RuntimeError):
    """A back end answered, but not with the JSON its API documents."""


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    headers: dict[str, str] = field(default_factory=dict)


def _require_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise ToolArgError("query must be a non-empty string")
    return query


def query_window(start: str, end: str) -> tuple[int, int]:
    try:
        return window_ns(start, end)
    except BadTimeArg as exc:
        raise ToolArgError(str(exc)) from None


def loki_query_range(query: str, start: str, end: str, limit: int) -> HttpRequest:
    """GET /loki/api/v1/query_range with nanosecond bounds, newest first as Loki defaults."""
    _require_query(query)
    start_ns, end_ns = query_window(start, end)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= LOKI_MAX_LIMIT:
        raise ToolArgError(f"limit must be an integer in 1..{LOKI_MAX_LIMIT}, got {limit!r}")
    params = (
        ("query", query),
        ("start", str(start_ns)),
        ("end", str(end_ns)),
        ("limit", str(limit)),
        ("direction", "backward"),
    )
    return HttpRequest("GET", "/loki/api/v1/query_range", params)


def prometheus_steps(start: str, end: str, step: str) -> tuple[int, int, int]:
    """The (start, end, step) of a range query in ns, refused above Prometheus's point limit."""
    start_ns, end_ns = query_window(start, end)
    try:
        step_ns = parse_duration_ns(step)
    except BadTimeArg as exc:
        raise ToolArgError(str(exc)) from None
    points = (end_ns - start_ns) // step_ns + 1
    if points > PROMETHEUS_MAX_POINTS:
        raise ToolArgError(
            f"exceeded maximum resolution of {PROMETHEUS_MAX_POINTS} points per timeseries "
            f"({points} points); use a larger step"
        )
    return start_ns, end_ns, step_ns


def prometheus_query_range(query: str, start: str, end: str, step: str) -> HttpRequest:
    """GET /api/v1/query_range with Unix-second bounds and the step in seconds."""
    _require_query(query)
    start_ns, end_ns, step_ns = prometheus_steps(start, end, step)
    params = (
        ("query", query),
        ("start", ns_to_unix_seconds(start_ns)),
        ("end", ns_to_unix_seconds(end_ns)),
        ("step", ns_to_unix_seconds(step_ns)),
    )
    return HttpRequest("GET", "/api/v1/query_range", params)


def normalise_trace_id(trace_id: str) -> str:
    """Tempo ids are up to 32 hex digits; compare them lower-case and left-padded."""
    if not isinstance(trace_id, str) or not _TRACE_ID.fullmatch(trace_id.strip()):
        raise ToolArgError(f"trace_id must be 1 to 32 hex digits, got {trace_id!r}")
    return trace_id.strip().lower().rjust(32, "0")


def tempo_trace_by_id(trace_id: str) -> HttpRequest:
    """GET /api/traces/<id>, asking for OTLP JSON rather than protobuf."""
    tid = normalise_trace_id(trace_id)
    return HttpRequest("GET", f"/api/traces/{tid}", (), {"Accept": "application/json"})


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not _DNS_LABEL.fullmatch(namespace):
        raise ToolArgError(f"namespace must be a DNS-1123 label, got {namespace!r}")
    return namespace


def check_pod(pod: str | None) -> str | None:
    if pod is None or pod == "":
        return None
    if not isinstance(pod, str) or not _DNS_SUBDOMAIN.fullmatch(pod):
        raise ToolArgError(f"pod must be a DNS-1123 name, got {pod!r}")
    return pod


def kubernetes_events(namespace: str, pod: str | None) -> HttpRequest:
    """GET /api/v1/namespaces/<ns>/events, narrowed to one pod with a field selector."""
    ns = check_namespace(namespace)
    name = check_pod(pod)
    params: tuple[tuple[str, str], ...] = ()
    if name is not None:
        params = (("fieldSelector", f"involvedObject.kind=Pod,involvedObject.name={name}"),)
    return HttpRequest("GET", f"/api/v1/namespaces/{quote(ns)}/events", params)


# ---- responses -------------------------------------------------------------------------------


def parse_json_object(text: str, service: str) -> dict[str, Any]:
    return json_object(
        text, lambda why: UpstreamError(f"{service} answered with something not a JSON object: {why}")
    )


def _success_data(body: dict[str, Any], service: str) -> dict[str, Any]:
    if body.get("status") != "success":
        raise UpstreamError(f"{service} answered status={body.get('status')!r}: {body.get('error', '')}")
    data = body.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise UpstreamError(f"{service} answer has no data.result list")
    return data


def validate_loki(body: dict[str, Any]) -> dict[str, Any]:
    """A query_range answer: streams of [ns, line] pairs, or a matrix for a metric query."""
    data = _success_data(body, "Loki")
    kind = data.get("resultType")
    if kind not in ("streams", "matrix"):
        raise UpstreamError(f"Loki answered resultType={kind!r}, expected streams or matrix")
    for entry in data["result"]:
        values = entry.get("values") if isinstance(entry, dict) else None
        labels = entry.get("stream" if kind == "streams" else "metric") if isinstance(entry, dict) else None
        if not isinstance(labels, dict) or not isinstance(values, list):
            raise UpstreamError("Loki answer has a result entry without labels and values")
        if kind == "streams" and not all(isinstance(v, list) and len(v) >= 2 for v in values):
            raise UpstreamError("Loki answer has a stream value that is not [ns, line]")
    return body


def validate_prometheus(body: dict[str, Any]) -> dict[str, Any]:
    """A query_range answer must be a matrix of {metric, values: [[t, "v"]]}."""
    data = _success_data(body, "Prometheus")
    if data.get("resultType") != "matrix":
        raise UpstreamError(f"Prometheus answered resultType={data.get('resultType')!r}, expected matrix")
    for series in data["result"]:
        if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
            raise UpstreamError("Prometheus answer has a series without metric labels")
        if not isinstance(series.get("values"), list):
            raise UpstreamError("Prometheus answer has a series without values")
    return body


def validate_tempo(body: dict[str, Any]) -> dict[str, Any]:
    """A trace by id in OTLP JSON: `batches` (Tempo v1 API) or `resourceSpans`."""
    spans = body.get("batches", body.get("resourceSpans"))
    if not isinstance(spans, list):
        raise UpstreamError("Tempo answer has neither batches nor resourceSpans")
    return body


def validate_event_list(body: dict[str, Any]) -> dict[str, Any]:
    """A Kubernetes EventList: kind EventList with an items list."""
    if body.get("kind") != "EventList" or not isinstance(body.get("items"), list):
        raise UpstreamError(
            f"Kubernetes answered kind={body.get('kind')!r}, expected an EventList with items"
        )
    return body


def upstream_error_message(service: str, status: int, text: str) -> str:
    """One line naming the back end, the HTTP status and what the back end said."""
    detail = text.strip()
    try:
        body = json.loads(detail)
    except json.JSONDecodeError:
        body = None
    if isinstance(body, dict):
        detail = str(body.get("error") or body.get("message") or detail)
    detail = " ".join(detail.split())
    if len(detail) > 300:
        detail = detail[:297] + "..."
    if status == 404 and service == "Tempo":
        return f"Tempo has no such trace (HTTP 404){': ' + detail if detail else ''}"
    return f"{service} answered HTTP {status}{': ' + detail if detail else ''}"
