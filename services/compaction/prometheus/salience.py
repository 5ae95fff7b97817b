"""prometheus: salience (docs/compaction.md)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.compaction.prometheus.parse import _ALERT_KEYS, NOISE, STANDING, _median
from services.compaction.prometheus.stats import _flat, _Series


def _ceiling(name: str, top: float) -> float | None:
    """The natural ceiling of a ratio or percent metric, when its name says so."""
    lower = name.lower()
    if any(w in lower for w in ("ratio", "utilization", "utilisation")) and top <= 1.5:
        return 1.0
    if "percent" in lower or lower.endswith("_pct"):
        return 100.0
    return None


def _saturation(s: _Series) -> float:
    if s.hi < 0 or s.span <= 0:
        return 0.0
    top = s.points[s.hi][3]
    ceiling = _ceiling(s.labels.get("__name__", ""), top)
    if ceiling is not None and top >= 0.95 * ceiling:
        return 1.0
    last = s.finite[-1]
    held = 0
    for i in reversed(s.finite):
        if s.points[i][1] != s.points[last][1]:
            break
        held += 1
    first = s.points[s.finite[0]][3]
    if s.points[last][3] == top and held >= 3 and first < top - 0.5 * s.span:
        return 0.7
    return 0.0


def _alert_terms(ctx: Mapping[str, Any]) -> tuple[dict[str, str], tuple[str, ...]]:
    """(label -> value the alert names, services whose pods count as the alert's)."""
    exact: dict[str, str] = {}
    labels = ctx.get("labels")
    if isinstance(labels, Mapping):
        exact.update({str(k): str(v) for k, v in labels.items() if k not in ("alertname", "severity")})
    for key in _ALERT_KEYS:
        value = ctx.get(key)
        if isinstance(value, str) and value:
            exact.setdefault(key, value)
    services = tuple(
        v for v in (ctx.get("service"), exact.get("service"), exact.get("app")) if isinstance(v, str) and v
    )
    return exact, services


def _alert_match(own: Mapping[str, str], exact: Mapping[str, str], services: Sequence[str]) -> float:
    if any(exact.get(k) == v for k, v in own.items()):
        return 1.5
    if any(v == svc or v.startswith(svc + "-") for v in own.values() for svc in services):
        return 0.5
    return 0.0


@dataclass(frozen=True)
class _Peers:
    """What the series of one metric share, to judge each of them against the others."""

    live: int  # how many have a finite sample
    widest: float  # the largest span
    widest_base: float  # the largest span without spikes
    spikes: list[float]  # every live series' largest spike or edge height, sorted
    mid: float  # the median of their medians
    spread: float  # the median distance of a median from `mid`
    largest: float  # the largest |median|

    @classmethod
    def of(cls, live: Sequence[_Series]) -> _Peers:
        levels = sorted(s.med for s in live)
        mid = _median(levels)
        return cls(
            live=len(live),
            widest=max((s.span for s in live if math.isfinite(s.span)), default=0.0),
            widest_base=max((s.base_span for s in live if math.isfinite(s.base_span)), default=0.0),
            spikes=sorted(_height(s) for s in live),
            mid=mid,
            spread=_median(sorted(abs(v - mid) for v in levels)),
            largest=max((abs(v) for v in levels), default=0.0),
        )


def _height(s: _Series) -> float:
    return max((h for _, _, h in (*s.spikes, *s.edges)), default=0.0)


def _score(series: list[_Series], common: Mapping[str, str], ctx: Mapping[str, Any]) -> None:
    """Set `salience` and `warn` of every series (see the module docstring). A series is judged
    against its peers: the series of the same metric name (all of them when the name is dropped, as
    `rate()` does); a byte count and a file-descriptor count are not each other's measure."""
    by_name: dict[str, list[_Series]] = {}
    for s in series:
        if s.finite:
            by_name.setdefault(s.labels.get("__name__", ""), []).append(s)
    peers = {name: _Peers.of(live) for name, live in by_name.items()}
    exact, services = _alert_terms(ctx)
    matches = [
        _alert_match({k: v for k, v in s.labels.items() if k not in common}, exact, services) for s in series
    ]
    if len(series) > 1:
        shared = min(matches)  # what every series matches tells nothing apart
        matches = [m - shared for m in matches]
    for s, match in zip(series, matches, strict=True):
        s.alerted = match > 0
        if not s.finite:
            s.salience = round(match, 3)
            continue
        p = peers[s.labels.get("__name__", "")]
        move = structure = spike = 0.0
        if not math.isfinite(s.base_span):  # finite values ~1e308 apart: it moves more than any other
            move, structure = 1.0, 0.5
        elif p.widest_base > 0 and s.base_span > 0:
            # noise is movement too (a busy handler's rate): it ranks a series above the flat ones,
            # and alone never makes it stand out (2 x 1 x NOISE < QUIET)
            move, structure = s.base_span / p.widest_base, NOISE + (1 - NOISE) * s.structure
        height = _height(s)
        if height > 0 and p.widest > 0 and math.isfinite(height):
            alike = p.live - bisect.bisect_left(p.spikes, height / 2)  # series with a spike half as high
            spike = min(1.0, 2 * height / p.widest) * (1 - (alike - 1) / p.live)
        deviation = 0.0
        if p.live >= 3 and p.largest > 0 and math.isfinite(p.largest):
            gap = abs(s.med - p.mid)
            z = gap / (1.4826 * p.spread) if p.spread > 0 else (math.inf if gap > 0 else 0.0)
            squash = 1.0 if math.isinf(z) else z / (z + 3)
            deviation = squash * min(1.0, 5 * gap / p.largest)
            if _flat(s):  # a standing level: after every series that changes, before the usual ones
                deviation *= STANDING
        saturation = _saturation(s)
        total = 2 * move * structure + spike + saturation + deviation + match
        s.salience = round(total, 3) if math.isfinite(total) else 0.0
        s.warn = saturation >= 0.7 or spike >= 0.5
