"""prometheus: trend in segments (docs/compaction.md)."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from services.compaction.prometheus.parse import MAX_SEGMENTS, ROUGH, _median
from services.compaction.prometheus.stats import _Series


@dataclass(frozen=True)
class _Seg:
    kind: str  # flat | rising | falling | jump | drop
    a: int  # first point (index into the series' points)
    b: int  # last point
    rate: float  # per minute
    level: float  # median


def _fit(ts: Sequence[float], vs: Sequence[float], a: int, b: int) -> tuple[float, float]:
    """(least-squares slope per second, median) over samples a..b."""
    n = b - a + 1
    t0 = ts[a]
    xs = [t - t0 for t in ts[a : b + 1]]
    ys = vs[a : b + 1]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx if sxx > 0 else 0.0
    return (slope if math.isfinite(slope) else 0.0), _median(sorted(ys))


def _farthest(ts: Sequence[float], vs: Sequence[float], a: int, b: int) -> tuple[float, int]:
    """The sample between a and b farthest (vertically) from the chord a-b, and its distance."""
    dt = ts[b] - ts[a]
    slope = (vs[b] - vs[a]) / dt if dt > 0 else 0.0
    best, at = -1.0, a
    va, ta = vs[a], ts[a]
    for i in range(a + 1, b):
        d = abs(vs[i] - (va + slope * (ts[i] - ta)))
        if d > best:
            best, at = d, i
    return best, at


def _outline(ts: Sequence[float], vs: Sequence[float], tol: float) -> list[int]:
    """Vertices of a piecewise-linear outline: split where the chord is farthest off, at most
    MAX_SEGMENTS pieces, until every sample is within `tol` (Douglas-Peucker, vertical distance)."""
    verts = [0, len(vs) - 1]
    found: dict[tuple[int, int], tuple[float, int]] = {}
    while len(verts) <= MAX_SEGMENTS:
        best: tuple[float, int] | None = None
        for a, b in itertools.pairwise(verts):
            if b - a < 2:
                continue
            if (a, b) not in found:
                found[(a, b)] = _farthest(ts, vs, a, b)
            d, at = found[(a, b)]
            if d > tol and (best is None or d > best[0]):
                best = (d, at)
        if best is None:
            break
        bisect.insort(verts, best[1])
    return verts


def _segments(s: _Series) -> list[_Seg]:
    """The baseline's outline (spikes taken out), classified and with like neighbours merged."""
    spiked = {i for a, b, _ in s.spikes for i in range(a, b + 1)}
    keep = [i for i in s.finite if i not in spiked]
    if len(keep) < 2 or s.span <= 0 or not math.isfinite(s.span):
        return []
    ts = [s.points[i][2] for i in keep]
    vs = [s.points[i][3] for i in keep]
    base = max(vs) - min(vs)
    rough = s.smooth < ROUGH  # noise or blips: one least-squares piece, not an outline of the noise
    verts = [0, len(vs) - 1] if rough else _outline(ts, vs, max(0.1 * base, 4 * s.noise))
    flat = max(0.1 * s.span, 3 * s.noise)  # a change smaller than this is noise, not a trend
    pieces: list[_Seg] = []  # indexes into the baseline while merging
    for a, b in itertools.pairwise(verts):
        piece = _piece(ts, vs, a, b, flat, s.span)
        if pieces and _alike(pieces[-1], piece, s.span):
            a = pieces.pop().a
            piece = _piece(ts, vs, a, b, flat, s.span, piece.kind)
        pieces.append(piece)
    return [_Seg(p.kind, keep[p.a], keep[p.b], p.rate, p.level) for p in pieces]


def _piece(
    ts: Sequence[float],
    vs: Sequence[float],
    a: int,
    b: int,
    flat: float,
    span: float,
    kind: str | None = None,
) -> _Seg:
    """Samples a..b as one segment: flat, a jump or drop (one step, 30%+ of the span), rising, falling."""
    slope, level = _fit(ts, vs, a, b)
    if kind is None:
        if abs(slope * (ts[b] - ts[a])) < flat:
            kind = "flat"
        elif b == a + 1 and abs(vs[b] - vs[a]) >= 0.3 * span:
            kind = "jump" if vs[b] > vs[a] else "drop"
        else:
            kind = "rising" if slope > 0 else "falling"
    return _Seg(kind, a, b, slope * 60, level)


def _alike(x: _Seg, y: _Seg, span: float) -> bool:
    if x.kind != y.kind:
        return False
    if x.kind == "flat":
        return abs(x.level - y.level) < 0.1 * span
    if x.kind in ("rising", "falling"):
        lo, hi = sorted((abs(x.rate), abs(y.rate)))
        return hi <= 2 * lo
    return False
