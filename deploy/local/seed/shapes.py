"""Raws of shapes the seed incident never had, each with the facts a faithful digest must keep.

The compactors were first written against the seed; these are the shapes that broke them when
tried as a new user would (issue 14), plus a few more of the same spirit. Each case names the
strings that must appear in its digest: values copied from the raw (a spike's sample string, a
reason, a count), never a rendering choice. Used by the quality benchmark and by tests.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from deploy.local.seed.generators import (
    SpanSpec,
    event_item,
    event_list,
    hex_id,
    loki_response,
    ns_at,
    pod_name,
    prometheus_response,
    tempo_response,
    unix_s,
)
from deploy.local.seed.incident import seed_incident


@dataclass(frozen=True)
class Case:
    name: str
    tool: str
    raw: Any
    facts: tuple[str, ...]
    alert_context: dict[str, Any] = field(default_factory=dict)


def spiky_series(
    seed: int = 7, *, series: int = 40, spikes: int = 2, points: int = 60
) -> tuple[dict[str, Any], list[str]]:
    """`series` flat-ish latency series, of which `spikes` jump for three samples; (raw, spike maxima)."""
    rng = random.Random(seed)
    start = unix_s(3, 0)
    chosen = set(rng.sample(range(series), spikes))
    out, maxima = [], []
    for index in range(series):
        base = rng.uniform(0.02, 0.05)
        pts = [(start + i * 15, round(base + rng.uniform(-0.004, 0.004), 4)) for i in range(points)]
        if index in chosen:
            at = rng.randrange(10, points - 5)
            peak = round(rng.uniform(2.0, 4.0), 3)
            for j, bump in enumerate((0.6, 1.0, 0.7)):
                pts[at + j] = (pts[at + j][0], round(peak * bump, 4))
            maxima.append(str(peak) if not float(peak).is_integer() else str(int(peak)))
        labels = {
            "__name__": "http_request_duration_seconds",
            "pod": f"api-{index:02d}",
            "route": "/checkout",
        }
        out.append((labels, pts))
    return prometheus_response(out), maxima


def mostly_idle_rate(
    seed: int = 11, *, series: int = 64, active: int = 3, points: int = 40
) -> tuple[dict[str, Any], list[str]]:
    """A `rate(...)` of `series` series where only `active` move; (raw, the active series' labels)."""
    rng = random.Random(seed)
    start = unix_s(3, 0)
    chosen = set(rng.sample(range(series), active))
    out, names = [], []
    for index in range(series):
        handler = f"/h{index:02d}"
        if index in chosen:
            pts = [(start + i * 15, round(rng.uniform(5, 40), 3)) for i in range(points)]
            names.append(handler)
        else:
            pts = [(start + i * 15, 0.0) for i in range(points)]
        out.append(({"__name__": "http_requests", "handler": handler, "job": "ingest"}, pts))
    return prometheus_response(out), names


def fanout_events(seed: int = 3, *, objects: int = 34) -> tuple[dict[str, Any], int]:
    """One Warning about `objects` different pods (a rollout that cannot pull); (raw, total count)."""
    rng = random.Random(seed)
    start = unix_s(3, 5)
    items, total = [], 0
    for _ in range(objects):
        pod = pod_name(rng, "payments")
        count = rng.randint(1, 6)
        total += count
        first = start + rng.randrange(120)
        items.append(
            event_item(
                uid=hex_id(rng, 32),
                ev_type="Warning",
                reason="Failed",
                message=f'Failed to pull image "registry.shop.internal/payments:4.2.{rng.randint(0, 9)}": not found',
                component="kubelet",
                pod=pod,
                count=count,
                first=first,
                last=first + rng.randrange(60),
            )
        )
    return event_list(items), total


def retry_storm_trace(seed: int = 5, *, retries: int = 40) -> dict[str, Any]:
    """A checkout whose payment call times out and is retried `retries` times."""
    rng = random.Random(seed)
    start = ns_at(3, 12, 40)
    root = SpanSpec(
        hex_id(rng, 16), "", "checkout-api", "POST /api/v1/checkout", start, start + 6_000_000_000
    )
    specs = [root]
    cursor = start + 5_000_000
    for _ in range(retries):
        length = rng.randint(101, 140) * 1_000_000
        specs.append(
            SpanSpec(
                hex_id(rng, 16),
                root.span_id,
                "checkout-api",
                "payment.charge",
                cursor,
                cursor + length,
                error="upstream timeout",
                attrs={"peer.service": "payments", "retry": True},
            )
        )
        cursor += length + 2_000_000
    specs.append(
        SpanSpec(
            hex_id(rng, 16), root.span_id, "checkout-api", "cart.load", start + 1_000_000, start + 4_000_000
        )
    )
    return tempo_response(hex_id(rng, 32), specs, {})


def noisy_errors_logs(seed: int = 9, *, lines: int = 600) -> dict[str, Any]:
    """Error lines that carry a request id (one pattern, hundreds of distinct lines) among info noise."""
    rng = random.Random(seed)
    values = []
    for i in range(lines):
        ns = ns_at(3, 10, i * 0.2)
        if i % 3 == 0:
            line = f'level=error ts=2026-03-14T03:10:{i % 60:02d}Z msg="charge failed" request_id={hex_id(rng, 12)} status=502'
        else:
            line = f'level=info ts=2026-03-14T03:10:{i % 60:02d}Z msg="cart loaded" cart={hex_id(rng, 8)} items={rng.randint(1, 9)}'
        values.append((ns, line))
    return loki_response([({"app": "payments", "namespace": "shop"}, values)])


def cases() -> Iterator[Case]:
    seed = seed_incident()
    yield Case(
        "seed logs",
        "query_loki",
        seed.loki,
        ("198", "FATAL ERROR: JS heap out of memory", "03:12:44", "03:14:01", "OOMKilled", "evictions=0"),
    )
    yield Case(
        "seed metrics",
        "query_prometheus",
        seed.prometheus,
        ("rising ~33Mi/min from 03:02", "635752453"),
        seed.alert_context(),
    )
    yield Case(
        "seed pod events", "get_pod_events", seed.pod_events, ("OOMKilling", "BackOff"), seed.alert_context()
    )
    yield Case(
        "seed trace",
        "query_tempo",
        seed.tempo,
        ("payload-cache.set", "FATAL ERROR: JS heap out of memory", "411.8"),
        seed.alert_context(),
    )
    raw, maxima = spiky_series()
    yield Case("40 series, 2 spike", "query_prometheus", raw, tuple(maxima))
    raw, handlers = mostly_idle_rate()
    yield Case("rate() of 64 series, 3 active", "query_prometheus", raw, tuple(handlers))
    raw, total = fanout_events()
    yield Case("34 pod events from 34 objects", "get_pod_events", raw, ("Failed", str(total)))
    yield Case(
        "retry storm, 40 error spans",
        "query_tempo",
        retry_storm_trace(),
        ("payment.charge", "upstream timeout", "40"),
    )
    yield Case(
        "error lines with request ids",
        "query_loki",
        noisy_errors_logs(),
        ("charge failed", "200", "cart loaded", "400"),
    )
