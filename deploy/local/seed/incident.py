"""The seed incident: checkout-api OOMKilled three times on 2026-03-14 (the demo and the tests).

Facts the compact must keep (see the fact-survival tests):
- Loki: 412 lines; 198 `FATAL ERROR: JS heap out of memory` between 03:12:44 and 03:14:01;
  3 OOMKilled lines; 21 `payload cache size=48211 evictions=0`; the rest ordinary traffic.
- Prometheus: container_memory_working_set_bytes, 4 series x 60 points, climbing ~33Mi/min from 03:02.
- Kubernetes: 30 pod events.  Tempo: the trace of one failing checkout request.
"""

from __future__ import annotations

import json
import random
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from deploy.local.seed.generators import (
    MI,
    SpanSpec,
    event_item,
    event_list,
    hex_id,
    loki_response,
    ns_at,
    prometheus_response,
    tempo_response,
    unix_s,
)

SEED = 20260314
SERVICE = "checkout-api"
NAMESPACE = "shop"
PODS = (
    "checkout-api-7d9f8b6c5-x2k4q",
    "checkout-api-7d9f8b6c5-m8p3z",
    "checkout-api-7d9f8b6c5-r5t7w",
    "checkout-api-7d9f8b6c5-h6j9n",
)
KILLED_POD = PODS[0]
WINDOW_START = "2026-03-14T03:00:00Z"
WINDOW_END = "2026-03-14T03:15:00Z"
ALERT_STARTS_AT = "2026-03-14T03:14:30Z"
THREAD_TS = "1773458070.000100"  # the bot's alert post, 03:14:30
BOT_USER = "U0BOTMEM1"

FATAL_LINE = "FATAL ERROR: JS heap out of memory"
CACHE_LINE = "payload cache size=48211 evictions=0"
FATAL_FIRST = (3, 12, 44.187)
FATAL_LAST = (3, 14, 1.902)
OOM_AT = ((3, 12, 46.031), (3, 13, 23.518), (3, 14, 2.244))
RISE_FROM = (3, 2)
RATE_MI_PER_MIN = 33


@dataclass(frozen=True)
class SeedHumanMessage:
    user: str
    ts: str
    text: str
    mention: bool = False


@dataclass(frozen=True)
class SeedIncident:
    """Everything the seed thread is made of, raw, in the real systems' formats."""

    thread_ts: str
    service: str
    alertname: str
    window_start: str
    window_end: str
    alertmanager_webhook: dict[str, Any]
    loki: dict[str, Any]
    prometheus: dict[str, Any]
    pod_events: dict[str, Any]
    tempo: dict[str, Any]
    humans: tuple[SeedHumanMessage, ...]
    facts: dict[str, Any] = field(default_factory=dict)

    def raw_for(self, tool: str) -> dict[str, Any]:
        return {
            "query_loki": self.loki,
            "query_prometheus": self.prometheus,
            "get_pod_events": self.pod_events,
            "query_tempo": self.tempo,
        }[tool]

    def alert_context(self, evidence_id: str | None = None) -> dict[str, Any]:
        ctx = {
            "service": self.service,
            "alertname": self.alertname,
            "window_start": self.window_start,
            "window_end": self.window_end,
        }
        if evidence_id:
            ctx["evidence_id"] = evidence_id
        return ctx


# --- Loki ---------------------------------------------------------------------------


def _request_line(rng: random.Random, ms_epoch: int, pod: str) -> str:
    """A pino access log line, as checkout-api (Node) writes them."""
    req_id = hex_id(rng, 8) + "-" + hex_id(rng, 4)
    remote = f"10.42.{rng.randint(0, 3)}.{rng.randint(2, 250)}"
    record = {
        "level": 30,
        "time": ms_epoch,
        "pid": 1,
        "hostname": pod,
        "req": {"id": req_id, "method": "POST", "url": "/api/v1/checkout", "remoteAddress": remote},
        "res": {"statusCode": 200},
        "responseTime": rng.randint(40, 900),
        "msg": "request completed",
    }
    return json.dumps(record, separators=(",", ":"))


def _gc_line(rng: random.Random, elapsed_ms: int) -> str:
    """Node's `--trace-gc` style line (printed before the heap gives out)."""
    used = rng.uniform(380, 500)
    return (
        f"[1:0x{hex_id(rng, 7)}]   {elapsed_ms} ms: Mark-Compact {used:.1f} ({used + 12:.1f}) -> {used - 1.3:.1f} "
        f"({used + 13.1:.1f}) MB, {rng.uniform(150, 450):.1f} / 0.0 ms  (average mu = {rng.uniform(0.1, 0.3):.3f}, "
        f"current mu = {rng.uniform(0.01, 0.1):.3f}) allocation failure; scavenge might not succeed"
    )


def _seed_loki(rng: random.Random) -> dict[str, Any]:
    out: dict[tuple[str, str], list[tuple[int, str]]] = {}
    used: set[int] = set()

    def put(pod: str, stream: str, ns: int, line: str) -> None:
        while ns in used:
            ns += 1_000_000
        used.add(ns)
        out.setdefault((pod, stream), []).append((ns, line))

    # 198 FATAL lines from the three crashes of the killed pod's node workers, 03:12:44.187 .. 03:14:01.902.
    first, last = ns_at(*FATAL_FIRST), ns_at(*FATAL_LAST)
    put(KILLED_POD, "stderr", first, FATAL_LINE)
    put(KILLED_POD, "stderr", last, FATAL_LINE)
    for _ in range(196):
        put(
            rng.choice(PODS[:2]),
            "stderr",
            first + rng.randrange(1, (last - first) // 1_000_000) * 1_000_000,
            FATAL_LINE,
        )
    # 3 OOMKilled lines, written by the kubelet-side exporter into the same query.
    for restarts, at in enumerate(OOM_AT, start=1):
        put(
            "kube-event-exporter",
            "stdout",
            ns_at(*at),
            f"Warning OOMKilled pod/{KILLED_POD} container=checkout-api exit_code=137 restarts={restarts}",
        )
    # 21 cache stats lines, every 40 s from 03:00:20: the cache never evicts.
    for i in range(21):
        put(PODS[i % 4], "stdout", ns_at(3, 0, 20 + 40 * i) + rng.randrange(0, 900) * 1_000_000, CACHE_LINE)
    # 30 GC traces as the heap fills, 03:10 .. 03:14.
    for _ in range(30):
        s = rng.uniform(600, 840)
        put(rng.choice(PODS), "stderr", ns_at(3, 0, s), _gc_line(rng, int(s * 1000) + 41_000))
    # 30 health checks and 130 completed requests across the window.
    for _ in range(30):
        put(
            rng.choice(PODS),
            "stdout",
            ns_at(3, 0, rng.uniform(0, 899)),
            f"GET /healthz 200 {rng.uniform(0.4, 3.0):.1f}ms",
        )
    for _ in range(130):
        s = rng.uniform(0, 770)
        pod = rng.choice(PODS)
        ns = ns_at(3, 0, s)
        put(pod, "stdout", ns, _request_line(rng, ns // 1_000_000, pod))
    streams = []
    for (pod, stream), values in sorted(out.items()):
        app = "kube-event-exporter" if pod == "kube-event-exporter" else SERVICE
        labels = {
            "app": app,
            "container": app,
            "job": f"{NAMESPACE}/{app}",
            "namespace": NAMESPACE,
            "node_name": "ip-10-42-1-17.eu-west-1.compute.internal",
            "pod": pod,
            "stream": stream,
            "service_name": app,
        }
        streams.append((labels, values))
    return loki_response(streams)


# --- Prometheus ---------------------------------------------------------------------


def _seed_prometheus(rng: random.Random) -> dict[str, Any]:
    rise = unix_s(*RISE_FROM)
    rate_per_s = RATE_MI_PER_MIN * MI / 60
    series = []
    for index, pod in enumerate(PODS):
        base = (152 + 7 * index) * MI
        pts = []
        for i in range(60):
            t = unix_s(3, 0) + 15 * i
            climb = max(0.0, t - rise) * rate_per_s * (1 + 0.01 * index)
            pts.append((t, float(round(base + climb + rng.randint(-150_000, 150_000)))))
        labels = {
            "__name__": "container_memory_working_set_bytes",
            "container": SERVICE,
            "endpoint": "https-metrics",
            "id": f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{hex_id(rng, 8)}.slice",
            "image": "registry.shop.internal/checkout-api:3.14.0",
            "instance": "10.42.1.17:10250",
            "job": "kubelet",
            "metrics_path": "/metrics/cadvisor",
            "namespace": NAMESPACE,
            "node": "ip-10-42-1-17.eu-west-1.compute.internal",
            "pod": pod,
            "service": "kubelet",
        }
        series.append((labels, pts))
    return prometheus_response(series)


# --- Kubernetes events --------------------------------------------------------------


def _seed_events(rng: random.Random) -> dict[str, Any]:
    items: list[dict[str, Any]] = []

    def add(
        ev_type: str, reason: str, message: str, pod: str, count: int, first: float, last: float, comp: str
    ) -> None:
        items.append(
            event_item(
                uid=hex_id(rng, 32),
                ev_type=ev_type,
                reason=reason,
                message=message,
                component=comp,
                pod=pod,
                count=count,
                first=first,
                last=last,
            )
        )

    image = 'Container image "registry.shop.internal/checkout-api:3.14.0" already present on machine'
    for k, at in enumerate(OOM_AT):
        t = unix_s(*at)
        add(
            "Warning",
            "OOMKilling",
            f"Memory cgroup out of memory: Killed process {4811 + k} (node) total-vm:1843212kB, anon-rss:524288kB",
            KILLED_POD,
            1,
            t - 1,
            t - 1,
            "kernel-monitor",
        )
        add("Normal", "Killing", "Stopping container checkout-api", KILLED_POD, 1, t, t, "kubelet")
        add("Normal", "Pulled", image, KILLED_POD, 1, t + 9, t + 9, "kubelet")
        add("Normal", "Created", "Created container checkout-api", KILLED_POD, 1, t + 9, t + 9, "kubelet")
        add("Normal", "Started", "Started container checkout-api", KILLED_POD, 1, t + 10, t + 10, "kubelet")
    for k in range(5):
        t = unix_s(3, 13, 30 + 7 * k)
        add(
            "Warning",
            "BackOff",
            f"Back-off restarting failed container checkout-api in pod {KILLED_POD}_shop(7c1e0b2d)",
            KILLED_POD,
            1 + k,
            t,
            t + 6,
            "kubelet",
        )
    for k in range(6):
        pod = PODS[1]
        t = unix_s(3, 11, 10 * k)
        add(
            "Warning",
            "Unhealthy",
            'Readiness probe failed: Get "http://10.42.1.17:8080/healthz": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
            pod,
            2 + k,
            t,
            t + 40,
            "kubelet",
        )
    add(
        "Normal",
        "Pulling",
        'Pulling image "registry.shop.internal/checkout-api:3.14.0"',
        PODS[2],
        1,
        unix_s(3, 0, 31),
        unix_s(3, 0, 31),
        "kubelet",
    )
    add(
        "Normal",
        "Scheduled",
        f"Successfully assigned shop/{PODS[3]} to ip-10-42-1-17.eu-west-1.compute.internal",
        PODS[3],
        1,
        unix_s(3, 1),
        unix_s(3, 1),
        "default-scheduler",
    )
    add(
        "Warning",
        "NodeMemoryPressure",
        "Node ip-10-42-1-17 status is now: MemoryPressure",
        KILLED_POD,
        1,
        unix_s(3, 13, 5),
        unix_s(3, 13, 5),
        "kubelet",
    )
    add(
        "Normal",
        "Pulling",
        'Pulling image "registry.shop.internal/checkout-api:3.14.0"',
        PODS[3],
        1,
        unix_s(3, 1, 2),
        unix_s(3, 1, 2),
        "kubelet",
    )
    if len(items) != 30:
        raise AssertionError(f"the seed has 30 pod events, built {len(items)}")
    items.sort(key=lambda e: (e["lastTimestamp"], e["metadata"]["name"]))
    return event_list(items)


# --- Tempo --------------------------------------------------------------------------


_COMMON_ATTRS: dict[str, dict[str, Any]] = {
    "checkout-api": {
        "code.filepath": "/app/dist/checkout/handler.js",
        "net.host.name": "checkout-api.shop.svc.cluster.local",
        "net.host.port": 8080,
        "thread.id": 1,
        "deployment.environment": "production",
    },
    "shop-gateway": {
        "net.host.name": "gateway.edge.svc.cluster.local",
        "net.host.port": 443,
        "deployment.environment": "production",
    },
    "inventory": {
        "net.host.name": "inventory.shop.svc.cluster.local",
        "net.host.port": 9090,
        "rpc.system": "http",
    },
    "pricing": {"net.host.name": "pricing.shop.svc.cluster.local", "net.host.port": 8000},
    "cart-service": {"net.host.name": "cart-service.shop.svc.cluster.local", "net.host.port": 8081},
}


def _trace_id(rng: random.Random) -> str:
    """The failing checkout's trace id: the first draw of the Tempo generator's rng."""
    return hex_id(rng, 32)


def _seed_tempo(rng: random.Random) -> dict[str, Any]:
    """The failing checkout: gateway -> checkout-api, which builds a 48 MB payload and dies mid-request."""
    trace_id = _trace_id(rng)
    t0 = ns_at(3, 12, 41.62)
    ms = 1_000_000
    specs: list[SpanSpec] = []

    def span(
        parent: SpanSpec | None, service: str, name: str, start: int, dur_ms: float, **kw: Any
    ) -> SpanSpec:
        attrs = {**_COMMON_ATTRS.get(service, {}), "code.function": name.split(" ")[0], **kw.pop("attrs", {})}
        s = SpanSpec(
            hex_id(rng, 16),
            parent.span_id if parent else "",
            service,
            name,
            start,
            start + int(dur_ms * ms),
            attrs=attrs,
            **kw,
        )
        specs.append(s)
        return s

    http = {
        "http.method": "POST",
        "http.route": "/api/v1/checkout",
        "http.flavor": "1.1",
        "net.peer.name": "checkout-api.shop.svc.cluster.local",
    }
    root = span(
        None,
        "shop-gateway",
        "POST /api/v1/checkout",
        t0,
        3021.4,
        kind=2,
        attrs={**http, "http.status_code": 502, "http.user_agent": "okhttp/4.12.0 shop-android/8.31.2"},
        error="upstream connect error or disconnect/reset before headers. reset reason: connection termination",
    )
    auth = span(root, "shop-gateway", "auth.verify_token", t0 + 1 * ms, 4.2, attrs={"auth.scheme": "bearer"})
    span(
        auth,
        "auth-service",
        "GET /v1/introspect",
        t0 + 2 * ms,
        2.9,
        kind=2,
        attrs={"http.method": "GET", "http.status_code": 200},
    )
    fwd = span(
        root,
        "shop-gateway",
        "proxy checkout-api",
        t0 + 6 * ms,
        3014.9,
        kind=3,
        attrs={"upstream.cluster": "checkout-api", "http.status_code": 502},
        error="upstream reset: connection termination",
    )
    srv = span(
        fwd,
        "checkout-api",
        "POST /api/v1/checkout",
        t0 + 7 * ms,
        3012.6,
        kind=2,
        attrs={**http, "http.request_content_length": 48211, "enduser.id": "u-81723"},
        error="JavaScript heap out of memory (process exited, code 134)",
    )
    mw = [
        span(
            srv,
            "checkout-api",
            f"middleware - {m}",
            t0 + (8 + i) * ms,
            0.3 + i / 10,
            attrs={"express.type": "middleware", "express.name": m},
        )
        for i, m in enumerate(("query", "expressInit", "jsonParser", "cors", "requestId", "pinoHttp"))
    ]
    cart = span(
        srv,
        "checkout-api",
        "cart.load",
        t0 + 15 * ms,
        38.5,
        attrs={"cart.id": f"{hex_id(rng, 8)}-{hex_id(rng, 4)}", "cart.items": 7},
    )
    span(
        cart,
        "cart-service",
        "GET /v2/carts/{id}",
        t0 + 16 * ms,
        31.2,
        kind=2,
        attrs={"http.method": "GET", "http.status_code": 200},
    )
    db1 = span(
        cart,
        "cart-service",
        "pg.query SELECT",
        t0 + 18 * ms,
        12.7,
        kind=3,
        attrs={"db.system": "postgresql", "db.statement": "SELECT * FROM cart_items WHERE cart_id = $1"},
    )
    span(db1, "cart-service", "pg.connect", t0 + 18 * ms, 0.8, kind=3, attrs={"db.system": "postgresql"})
    inv = span(
        srv,
        "checkout-api",
        "inventory.reserve",
        t0 + 55 * ms,
        61.0,
        kind=3,
        attrs={"peer.service": "inventory"},
    )
    for k in range(12):
        span(
            inv,
            "inventory",
            f"reserve sku-{1000 + k * 37}",
            t0 + (57 + 8 * k) * ms,
            6.5,
            kind=2,
            attrs={"http.method": "POST", "http.status_code": 200, "sku": f"sku-{1000 + k * 37}"},
        )
    price = span(
        srv, "checkout-api", "pricing.quote", t0 + 118 * ms, 22.4, kind=3, attrs={"peer.service": "pricing"}
    )
    quote = span(
        price,
        "pricing",
        "POST /v1/quote",
        t0 + 119 * ms,
        20.1,
        kind=2,
        attrs={"http.method": "POST", "http.status_code": 200},
    )
    for k in range(7):
        span(
            quote,
            "pricing",
            f"rule {['vat', 'promo', 'bundle', 'shipping', 'loyalty', 'rounding', 'fx'][k]}",
            t0 + (120 + 2 * k) * ms,
            1.7,
            attrs={"pricing.rule.version": f"2026.03.{k + 1}"},
        )
    build = span(
        srv,
        "checkout-api",
        "payload.build",
        t0 + 142 * ms,
        2870.3,
        attrs={"payload.items": 7, "payload.bytes": 48211337},
        error="RangeError: Invalid string length",
    )
    for k in range(16):
        span(
            build,
            "checkout-api",
            f"serialize line_item[{k}]",
            t0 + (143 + 150 * k) * ms,
            140.0 + 3 * k,
            attrs={"payload.chunk": k, "v8.heap_used_bytes": 470_000_000 + k * 4_000_000},
        )
    cache = span(
        build,
        "checkout-api",
        "payload-cache.set",
        t0 + 2600 * ms,
        411.8,
        attrs={
            "cache.name": "payload",
            "cache.size": 48211,
            "cache.evictions": 0,
            "cache.max_entries": "unbounded",
        },
        error="FATAL ERROR: JS heap out of memory",
    )
    span(
        cache,
        "checkout-api",
        "v8.gc Mark-Compact",
        t0 + 2610 * ms,
        401.3,
        attrs={
            "gc.type": "Mark-Compact",
            "v8.heap_used_bytes": 511_705_088,
            "v8.heap_limit_bytes": 536_870_912,
        },
    )
    span(
        srv,
        "checkout-api",
        "redis.GET session",
        t0 + 12 * ms,
        1.1,
        kind=3,
        attrs={"db.system": "redis", "db.statement": "GET session:<id>"},
    )
    for k, m in enumerate(mw):
        m.attrs = {**(m.attrs or {}), "express.layer": k}
    resources = {
        "checkout-api": {
            "service.version": "3.14.0",
            "k8s.namespace.name": NAMESPACE,
            "k8s.pod.name": KILLED_POD,
            "process.runtime.name": "nodejs",
            "process.runtime.version": "20.11.1",
            "telemetry.sdk.language": "nodejs",
            "telemetry.sdk.name": "opentelemetry",
            "telemetry.sdk.version": "1.21.0",
            "host.name": KILLED_POD,
        },
        "shop-gateway": {
            "service.version": "1.29.3",
            "k8s.namespace.name": "edge",
            "telemetry.sdk.language": "go",
            "telemetry.sdk.name": "opentelemetry",
        },
        "cart-service": {
            "service.version": "2.8.0",
            "k8s.namespace.name": NAMESPACE,
            "telemetry.sdk.language": "java",
        },
        "inventory": {
            "service.version": "5.1.2",
            "k8s.namespace.name": NAMESPACE,
            "telemetry.sdk.language": "go",
        },
        "pricing": {
            "service.version": "0.44.0",
            "k8s.namespace.name": NAMESPACE,
            "telemetry.sdk.language": "python",
        },
        "auth-service": {
            "service.version": "4.0.1",
            "k8s.namespace.name": "edge",
            "telemetry.sdk.language": "go",
        },
    }
    return tempo_response(trace_id, specs, resources)


# --- Alertmanager and the humans ----------------------------------------------------


def _webhook() -> dict[str, Any]:
    labels = {
        "alertname": "KubePodOOMKilled",
        "container": SERVICE,
        "namespace": NAMESPACE,
        "pod": KILLED_POD,
        "service": SERVICE,
        "severity": "critical",
        "team": "payments",
    }
    annotations = {
        "summary": "checkout-api container OOMKilled 3 times in 5 minutes",
        "description": f"Container checkout-api in pod {NAMESPACE}/{KILLED_POD} was OOMKilled (limit 512Mi) 3 times since 03:12.",
        "runbook_url": "https://runbooks.shop.internal/checkout-api/oomkilled",
    }
    return {
        "version": "4",
        "groupKey": '{}/{team="payments"}:{alertname="KubePodOOMKilled", service="checkout-api"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "incident-memory",
        "groupLabels": {"alertname": "KubePodOOMKilled", "service": SERVICE},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": "https://alertmanager.shop.internal",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": annotations,
                "startsAt": ALERT_STARTS_AT,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "https://prometheus.shop.internal/graph?g0.expr=increase%28kube_pod_container_status_restarts_total%7Breason%3D%22OOMKilled%22%7D%5B5m%5D%29+%3E%3D+3",
                "fingerprint": "c8a4f1d2e6b70391",
            }
        ],
    }


# A human quotes the failing request's trace id (copied from the gateway's access log) so that
# round 2 can fetch the trace: nothing else in the thread carries it.
TRACE_ID = _trace_id(random.Random(SEED + 3))

HUMANS: tuple[SeedHumanMessage, ...] = (
    SeedHumanMessage(
        "U02ANNA",
        "1773458412.000200",
        "3.14.0 went out yesterday 16:40 with the new payload cache (PR #2231). That's the only checkout-api change this week.",
    ),
    SeedHumanMessage(
        "U03BOB",
        "1773458588.000300",
        "prod config has no maxEntries for the payload cache, so evictions=0 is expected... it just grows",
    ),
    SeedHumanMessage(
        "U02ANNA", "1773458711.000400", "memory limit is still 512Mi, nobody touched the deployment resources"
    ),
    SeedHumanMessage(
        "U04CAROL",
        "1773459030.000500",
        "rolled one pod back to 3.13.2 as a canary (checkout-api-7d9f8b6c5-h6j9n), watching it. "
        f"failing checkout trace from the gateway log: {TRACE_ID}",
    ),
    SeedHumanMessage(
        "U04CAROL",
        "1773472870.000600",
        f"<@{BOT_USER}> with that context: does the trace of a failing checkout show where the memory goes?",
        mention=True,
    ),
)


def seed_incident() -> SeedIncident:
    """The seed incident; deterministic (same bytes on every call and every machine)."""
    return SeedIncident(
        thread_ts=THREAD_TS,
        service=SERVICE,
        alertname="KubePodOOMKilled",
        window_start=WINDOW_START,
        window_end=WINDOW_END,
        alertmanager_webhook=_webhook(),
        loki=_seed_loki(random.Random(SEED)),
        prometheus=_seed_prometheus(random.Random(SEED + 1)),
        pod_events=_seed_events(random.Random(SEED + 2)),
        tempo=_seed_tempo(random.Random(SEED + 3)),
        humans=HUMANS,
        facts={
            "loki_lines": 412,
            "fatal_line": FATAL_LINE,
            "fatal_n": 198,
            "fatal_first": "2026-03-14T03:12:44.187Z",
            "fatal_last": "2026-03-14T03:14:01.902Z",
            "oom_n": 3,
            "cache_line": CACHE_LINE,
            "cache_n": 21,
            "memory_trend": f"rising ~{RATE_MI_PER_MIN}Mi/min from 03:02",
            "pod_events": 30,
        },
    )


def seed_recording() -> dict[str, object]:
    """The seed incident's raws as a recording for the telemetry MCP server's recorded back end
    (`TELEMETRY_MCP_RECORDING` in the dev tools and tests, named by `module:function` so production never
    imports it: see `use_seed_recording`)."""
    seed = seed_incident()
    return {
        "loki": seed.loki,
        "prometheus": seed.prometheus,
        "tempo": seed.tempo,
        "pod_events": seed.pod_events,
    }


SEED_RECORDING = "deploy.local.seed:seed_recording"


def use_seed_recording(environ: MutableMapping[str, str]) -> None:
    """Where the dev tools run (the dev CLI, the tests), the recorded telemetry back end serves the seed
    unless a recording is named: production has no default and names none of the dev tree."""
    environ.setdefault("TELEMETRY_MCP_RECORDING", SEED_RECORDING)
