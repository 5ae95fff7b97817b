"""Seeded generators of raw tool results in the real systems' own JSON formats.

Same arguments, same bytes: every random choice comes from `random.Random(seed)`.
Used by the property tests (knobs: lines, patterns, series, points, spans, events)
and by the seed incident, which builds its raws from the same pieces.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

DAY_START_S = 1_773_446_400  # 2026-03-14T00:00:00Z: every seeded timestamp is on this day
MI = 1024 * 1024


def unix_s(hh: int, mm: int, ss: float = 0.0) -> float:
    """Unix seconds of HH:MM:SS on the seed day."""
    return DAY_START_S + hh * 3600 + mm * 60 + ss


def ns_at(hh: int, mm: int, ss: float = 0.0) -> int:
    """Unix nanoseconds (millisecond precision, like promtail) of HH:MM:SS on the seed day."""
    return round(unix_s(hh, mm, ss) * 1000) * 1_000_000


def iso_s(seconds: float) -> str:
    """RFC 3339 with whole seconds, as Kubernetes writes event timestamps."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hex_id(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def pod_name(rng: random.Random, app: str) -> str:
    alnum = "bcdfghjklmnpqrstvwxz2456789"
    return f"{app}-{hex_id(rng, 9)}-{''.join(rng.choice(alnum) for _ in range(5))}"


# --- Loki ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LogTemplate:
    """A line shape; `{}` slots are filled with random numbers/ids, so lines differ but share a pattern."""

    text: str
    level: str = "info"


TEMPLATES: tuple[LogTemplate, ...] = (
    LogTemplate(
        'level=info msg="request completed" method=POST route=/api/v1/checkout status=200 duration_ms={ms}'
    ),
    LogTemplate("GET /healthz 200 {ms}ms"),
    LogTemplate('level=info msg="cart loaded" cart_id={uuid} items={n}'),
    LogTemplate('level=warn msg="slow upstream" upstream=inventory latency_ms={ms} attempt={n}', "warn"),
    LogTemplate('level=error msg="payment declined" order_id={hex} code={n}', "error"),
    LogTemplate("cache refresh took {ms}ms for {n} keys"),
    LogTemplate('level=info msg="user session" session={hex} user=u{n}'),
    LogTemplate("FATAL ERROR: worker {n} crashed at 0x{hex}", "fatal"),
    LogTemplate('level=debug msg="metrics flushed" series={n}'),
    LogTemplate("panic: runtime error: index out of range [{n}] with length {n}", "fatal"),
)


def fill(template: str, rng: random.Random) -> str:
    out = template
    while "{" in out:
        if "{ms}" in out:
            out = out.replace("{ms}", f"{rng.randint(1, 2000)}.{rng.randint(0, 9)}", 1)
        elif "{n}" in out:
            out = out.replace("{n}", str(rng.randint(0, 99999)), 1)
        elif "{hex}" in out:
            out = out.replace("{hex}", hex_id(rng, 12), 1)
        elif "{uuid}" in out:
            h = hex_id(rng, 32)
            out = out.replace("{uuid}", f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}", 1)
        else:
            break
    return out


def loki_response(entries_by_stream: list[tuple[dict[str, str], list[tuple[int, str]]]]) -> dict[str, Any]:
    """A Loki `query_range` streams response; each stream's values newest first, as Loki returns them."""
    result = [
        {"stream": labels, "values": [[str(ns), line] for ns, line in sorted(values, key=lambda v: -v[0])]}
        for labels, values in entries_by_stream
        if values
    ]
    total = sum(len(s["values"]) for s in result)
    total_bytes = sum(len(line) for s in result for _, line in s["values"])
    return {
        "status": "success",
        "data": {
            "resultType": "streams",
            "result": result,
            "stats": {
                "summary": {
                    "bytesProcessedPerSecond": 48_211_337,
                    "linesProcessedPerSecond": 201_734,
                    "totalBytesProcessed": total_bytes,
                    "totalLinesProcessed": total,
                    "execTime": 0.002042,
                    "queueTime": 0.000351,
                    "subqueries": 1,
                    "totalEntriesReturned": total,
                },
                "querier": {
                    "store": {"totalChunksRef": 12, "totalChunksDownloaded": 12, "chunksDownloadTime": 3121}
                },
                "ingester": {
                    "totalReached": 3,
                    "totalChunksMatched": 9,
                    "totalBatches": 4,
                    "totalLinesSent": total,
                },
            },
        },
    }


def generate_loki(
    seed: int,
    *,
    lines: int = 400,
    patterns: int = 6,
    streams: int = 3,
    start_ns: int | None = None,
    span_s: int = 900,
    templates: tuple[LogTemplate, ...] = TEMPLATES,
) -> dict[str, Any]:
    """`lines` lines drawn from the first `patterns` templates over `streams` pods within `span_s` seconds."""
    rng = random.Random(seed)
    start = ns_at(3, 0) if start_ns is None else start_ns
    chosen = templates[: max(1, min(patterns, len(templates)))]
    pods = [pod_name(rng, "checkout-api") for _ in range(max(1, streams))]
    by_stream: list[list[tuple[int, str]]] = [[] for _ in pods]
    used: set[int] = set()
    for _ in range(lines):
        ns = start + rng.randrange(span_s * 1000) * 1_000_000
        while ns in used:  # one line per timestamp keeps the raw order unambiguous
            ns += 1_000_000
        used.add(ns)
        template = rng.choice(chosen)
        by_stream[rng.randrange(len(pods))].append((ns, fill(template.text, rng)))
    labels = [
        {
            "app": "checkout-api",
            "namespace": "shop",
            "pod": pod,
            "container": "checkout-api",
            "stream": "stdout",
        }
        for pod in pods
    ]
    return loki_response(list(zip(labels, by_stream, strict=True)))


# --- Prometheus ---------------------------------------------------------------------


def prometheus_response(series: list[tuple[dict[str, str], list[tuple[float, float]]]]) -> dict[str, Any]:
    """A Prometheus `query_range` matrix; sample values are strings, as the HTTP API writes them."""

    def fmt(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else repr(v)

    def ts(t: float) -> float | int:
        return int(t) if float(t).is_integer() else t

    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": m, "values": [[ts(t), fmt(v)] for t, v in pts]} for m, pts in series],
        },
    }


def generate_prometheus(
    seed: int, *, series: int = 4, points: int = 60, step_s: int = 15, start_s: float | None = None
) -> dict[str, Any]:
    """Memory-like series: a flat start, then a linear climb at a random rate, with small noise."""
    rng = random.Random(seed)
    start = unix_s(3, 0) if start_s is None else start_s
    out = []
    for index in range(series):
        base = rng.randint(100, 300) * MI
        rate = rng.choice([-1, 0, 1, 2]) * rng.randint(1, 40) * MI / 60
        knee = rng.randrange(max(1, points))
        pts = []
        for i in range(points):
            t = start + i * step_s
            v = base + max(0, i - knee) * step_s * rate + rng.randint(-200_000, 200_000)
            pts.append((t, float(max(0, round(v)))))
        labels = {
            "__name__": "container_memory_working_set_bytes",
            "namespace": "shop",
            "pod": f"checkout-api-{index}",
            "container": "checkout-api",
        }
        out.append((labels, pts))
    return prometheus_response(out)


# --- Tempo (OTLP JSON) --------------------------------------------------------------


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


@dataclass
class SpanSpec:
    span_id: str
    parent: str
    service: str
    name: str
    start_ns: int
    end_ns: int
    kind: int = 1
    attrs: dict[str, Any] | None = None
    error: str | None = None


def tempo_response(
    trace_id: str, specs: list[SpanSpec], resources: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """A Tempo trace-by-id response in OTLP JSON (`batches`), one batch per service."""
    batches = []
    for service in sorted({s.service for s in specs}):
        spans = []
        for s in (x for x in specs if x.service == service):
            span: dict[str, Any] = {
                "traceId": trace_id,
                "spanId": s.span_id,
                "name": s.name,
                "kind": s.kind,
                "startTimeUnixNano": str(s.start_ns),
                "endTimeUnixNano": str(s.end_ns),
                "attributes": [_attr(k, v) for k, v in (s.attrs or {}).items()],
                "status": {"code": 2, "message": s.error} if s.error else {"code": 0},
            }
            if s.parent:
                span["parentSpanId"] = s.parent
            if s.error:
                span["events"] = [
                    {
                        "timeUnixNano": str(s.end_ns),
                        "name": "exception",
                        "attributes": [_attr("exception.type", "Error"), _attr("exception.message", s.error)],
                    }
                ]
            spans.append(span)
        attrs = {"service.name": service, **resources.get(service, {})}
        batches.append(
            {
                "resource": {"attributes": [_attr(k, v) for k, v in attrs.items()]},
                "scopeSpans": [
                    {
                        "scope": {"name": "@opentelemetry/instrumentation-http", "version": "0.52.1"},
                        "spans": spans,
                    }
                ],
            }
        )
    return {"batches": batches}


def generate_tempo(seed: int, *, spans: int = 40, errors: int = 1, services: int = 4) -> dict[str, Any]:
    """A random tree of `spans` spans across `services` services; `errors` of them have status ERROR."""
    rng = random.Random(seed)
    trace_id = hex_id(rng, 32)
    names = [f"svc-{i}" for i in range(max(1, services))]
    start = ns_at(3, 12, 40)
    root = SpanSpec(
        hex_id(rng, 16),
        "",
        names[0],
        "POST /api/v1/checkout",
        start,
        start + rng.randint(5, 3000) * 1_000_000,
    )
    specs = [root]
    for _ in range(max(0, spans - 1)):
        parent = rng.choice(specs)
        length = parent.end_ns - parent.start_ns
        a = parent.start_ns + rng.randrange(max(1, length))
        b = a + rng.randrange(max(1, parent.end_ns - a)) + 1
        specs.append(
            SpanSpec(
                hex_id(rng, 16),
                parent.span_id,
                rng.choice(names),
                f"op-{rng.randint(0, 30)}",
                a,
                min(b, parent.end_ns),
            )
        )
    for s in rng.sample(specs, min(errors, len(specs))):
        s.error = f"error {rng.randint(100, 999)}"
    return tempo_response(trace_id, specs, {})


# --- Kubernetes events --------------------------------------------------------------


EVENT_SHAPES = (
    (
        "Normal",
        "Pulled",
        'Container image "registry.shop.internal/checkout-api:3.14.0" already present on machine',
        "kubelet",
    ),
    ("Normal", "Created", "Created container checkout-api", "kubelet"),
    ("Normal", "Started", "Started container checkout-api", "kubelet"),
    ("Warning", "BackOff", "Back-off restarting failed container checkout-api in pod {pod}", "kubelet"),
    (
        "Warning",
        "Unhealthy",
        'Readiness probe failed: Get "http://10.42.1.17:8080/healthz": context deadline exceeded',
        "kubelet",
    ),
    ("Normal", "Killing", "Container checkout-api failed liveness probe, will be restarted", "kubelet"),
    (
        "Warning",
        "OOMKilling",
        "Memory cgroup out of memory: Killed process {n} (node) total-vm:1843212kB",
        "kernel-monitor",
    ),
    ("Normal", "Scheduled", "Successfully assigned shop/{pod} to node-{n}", "default-scheduler"),
)


def event_item(
    *,
    uid: str,
    ev_type: str,
    reason: str,
    message: str,
    component: str,
    pod: str,
    count: int,
    first: float,
    last: float,
    host: str = "ip-10-42-1-17.eu-west-1.compute.internal",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{pod}.{uid[:16]}",
            "namespace": "shop",
            "uid": f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}",
            "resourceVersion": str(int(last) % 10_000_000),
            "creationTimestamp": iso_s(first),
        },
        "involvedObject": {
            "kind": "Pod",
            "namespace": "shop",
            "name": pod,
            "uid": f"7c1e{uid[4:8]}-0b2d-4f8a-9e61-{uid[20:32]}",
            "apiVersion": "v1",
            "resourceVersion": "48211",
            "fieldPath": "spec.containers{checkout-api}",
        },
        "reason": reason,
        "message": message,
        "source": {"component": component, "host": host},
        "firstTimestamp": iso_s(first),
        "lastTimestamp": iso_s(last),
        "count": count,
        "type": ev_type,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host,
    }


def event_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "EventList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "9184412"},
        "items": items,
    }


def generate_events(
    seed: int, *, events: int = 30, pods: int = 3, start_s: float | None = None
) -> dict[str, Any]:
    """`events` Events about `pods` pods, with repeated reason+pod pairs so deduplication has work."""
    rng = random.Random(seed)
    start = unix_s(3, 0) if start_s is None else start_s
    names = [pod_name(rng, "checkout-api") for _ in range(max(1, pods))]
    items = []
    for _ in range(events):
        ev_type, reason, message, component = rng.choice(EVENT_SHAPES)
        pod = rng.choice(names)
        first = start + rng.randrange(900)
        last = first + rng.randrange(300)
        items.append(
            event_item(
                uid=hex_id(rng, 32),
                ev_type=ev_type,
                reason=reason,
                message=message.replace("{pod}", pod).replace("{n}", str(rng.randint(1, 99999))),
                component=component,
                pod=pod,
                count=rng.randint(1, 12),
                first=first,
                last=last,
            )
        )
    return event_list(items)
