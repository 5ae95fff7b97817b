"""Serve recorded raws as the real APIs would answer a given query. Pure: no I/O.

A recording is one raw per back end (the seed incident's, or a user's file). The
arguments still matter: Loki streams are chosen by the stream selector, lines by
the line filters, the window and the limit; Prometheus series by the query's
vector selectors, points by the window and the step; events by namespace and pod;
traces by id. When nothing is filtered out, the recorded raw is returned unchanged.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from services.boundary.timearg import NS_PER_S
from services.telemetry_mcp.selectors import parse_log_query, promql_selectors, series_selected
from services.telemetry_mcp.wire import (
    ToolArgError,
    check_namespace,
    check_pod,
    normalise_trace_id,
    prometheus_steps,
    query_window,
    validate_event_list,
    validate_loki,
    validate_prometheus,
    validate_tempo,
)

PROMETHEUS_LOOKBACK_NS = 300 * NS_PER_S  # Prometheus's default query.lookback-delta


class TraceNotFound(LookupError):
    """Tempo answers 404 for an unknown trace id; so does the recording."""


@dataclass(frozen=True)
class Recording:
    loki: dict[str, Any]
    prometheus: dict[str, Any]
    tempo: tuple[dict[str, Any], ...]
    pod_events: dict[str, Any]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Recording:
        """Build from {"loki", "prometheus", "tempo" (one trace or a list), "pod_events"}, validated."""
        missing = [k for k in ("loki", "prometheus", "tempo", "pod_events") if k not in data]
        if missing:
            raise ValueError(f"recording lacks {', '.join(missing)}")
        traces = data["tempo"] if isinstance(data["tempo"], list) else [data["tempo"]]
        return cls(
            loki=validate_loki(data["loki"]),
            prometheus=validate_prometheus(data["prometheus"]),
            tempo=tuple(validate_tempo(t) for t in traces),
            pod_events=validate_event_list(data["pod_events"]),
        )


# ---- Loki ------------------------------------------------------------------------------------


def serve_loki(recorded: dict[str, Any], query: str, start: str, end: str, limit: int) -> dict[str, Any]:
    """The streams the selector picks, lines the filters keep, in [start, end], the newest `limit`."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ToolArgError(f"limit must be a positive integer, got {limit!r}")
    parsed = parse_log_query(query)
    start_ns, end_ns = query_window(start, end)
    streams = recorded["data"]["result"]
    kept: list[tuple[int, int, int]] = []  # (ns, stream index, value index)
    total = 0
    for si, stream in enumerate(streams):
        values = stream["values"]
        total += len(values)
        if not parsed.selects(stream["stream"]):
            continue
        for vi, (ns, line, *_rest) in enumerate(values):
            if start_ns <= int(ns) <= end_ns and parsed.keeps(line):
                kept.append((int(ns), si, vi))
    if len(kept) > limit:  # direction=backward: the newest entries win
        kept = sorted(kept, key=lambda k: (-k[0], k[1], k[2]))[:limit]
    if len(kept) == total:
        return recorded
    chosen: dict[int, set[int]] = {}
    for _, si, vi in kept:
        chosen.setdefault(si, set()).add(vi)
    result = [
        {**streams[si], "values": [v for vi, v in enumerate(streams[si]["values"]) if vi in chosen[si]]}
        for si in sorted(chosen)
    ]
    data = {**recorded["data"], "result": result}
    stats = copy.deepcopy(data.get("stats"))
    summary = stats.get("summary") if isinstance(stats, dict) else None
    if isinstance(summary, dict) and "totalEntriesReturned" in summary:
        summary["totalEntriesReturned"] = len(kept)
        data["stats"] = stats
    return {**recorded, "data": data}


# ---- Prometheus ------------------------------------------------------------------------------


def _ts_ns(t: Any) -> int:
    return int(Decimal(str(t)) * NS_PER_S)


def _ns_ts(ns: int) -> int | float:
    seconds, frac = divmod(ns, NS_PER_S)
    return seconds if frac == 0 else float(Decimal(ns) / NS_PER_S)


def _resample(values: list[list[Any]], start_ns: int, end_ns: int, step_ns: int) -> list[list[Any]]:
    """Evaluate at start, start+step, ... like Prometheus: the latest sample within the lookback."""
    samples = [(_ts_ns(t), v) for t, v in values]
    out: list[list[Any]] = []
    i = 0
    latest: tuple[int, Any] | None = None
    t = start_ns
    while t <= end_ns:
        while i < len(samples) and samples[i][0] <= t:
            latest = samples[i]
            i += 1
        if latest is not None and t - latest[0] < PROMETHEUS_LOOKBACK_NS:
            out.append([_ns_ts(t), latest[1]])
        t += step_ns
    return out


def _spacing_ns(values: list[list[Any]]) -> int | None:
    times = [_ts_ns(t) for t, _ in values]
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return min(gaps) if gaps else None


def serve_prometheus(recorded: dict[str, Any], query: str, start: str, end: str, step: str) -> dict[str, Any]:
    """Series the query's selectors match. At or below the recorded resolution the recorded points in
    [start, end] are served as they are; a coarser step is evaluated as Prometheus would."""
    if not isinstance(query, str) or not query.strip():
        raise ToolArgError("query must be a non-empty string")
    start_ns, end_ns, step_ns = prometheus_steps(start, end, step)
    selectors = promql_selectors(query)
    original = recorded["data"]["result"]
    result = []
    for series in original:
        if not series_selected(series["metric"], selectors):
            continue
        values = series["values"]
        spacing = _spacing_ns(values)
        if spacing is None or step_ns <= spacing:
            points = [v for v in values if start_ns <= _ts_ns(v[0]) <= end_ns]
        else:
            points = _resample(values, start_ns, end_ns, step_ns)
        if points:
            result.append(series if points == values else {**series, "values": points})
    if len(result) == len(original) and all(a is b for a, b in zip(result, original, strict=True)):
        return recorded
    out = {k: v for k, v in recorded.items() if k != "data"}
    out["data"] = {**recorded["data"], "result": result}
    return out


# ---- Tempo and Kubernetes --------------------------------------------------------------------


def trace_ids(trace: dict[str, Any]) -> set[str]:
    """Every trace id that the spans of an OTLP JSON trace carry, normalised."""
    ids: set[str] = set()
    for batch in trace.get("batches", trace.get("resourceSpans", [])):
        for scope in batch.get("scopeSpans", batch.get("instrumentationLibrarySpans", [])):
            for span in scope.get("spans", []):
                if isinstance(span.get("traceId"), str):
                    ids.add(span["traceId"].lower().rjust(32, "0"))
    return ids


def serve_tempo(traces: tuple[dict[str, Any], ...], trace_id: str) -> dict[str, Any]:
    wanted = normalise_trace_id(trace_id)
    for trace in traces:
        if wanted in trace_ids(trace):
            return trace
    raise TraceNotFound(f"trace {trace_id} not found")


def serve_events(recorded: dict[str, Any], namespace: str, pod: str | None) -> dict[str, Any]:
    """The EventList of one namespace, narrowed to one pod's events when `pod` is given."""
    ns = check_namespace(namespace)
    name = check_pod(pod)

    def keep(item: dict[str, Any]) -> bool:
        involved = item.get("involvedObject", {})
        item_ns = item.get("metadata", {}).get("namespace", involved.get("namespace"))
        if item_ns != ns:
            return False
        return name is None or (involved.get("kind") == "Pod" and involved.get("name") == name)

    items = [item for item in recorded["items"] if keep(item)]
    if len(items) == len(recorded["items"]):
        return recorded
    return {**recorded, "items": items}
