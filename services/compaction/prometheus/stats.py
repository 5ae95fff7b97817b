"""prometheus: per series: statistics and spikes (docs/compaction.md)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from services.compaction.prometheus.parse import ROUGH, UNTOLD, Point, _is_bytes, _median


@dataclass
class _Series:
    """One series and what is known of it. Indexes (`lo`, `hi`, spikes) point into `points`."""

    index: int
    labels: dict[str, str]
    points: list[Point]
    finite: list[int]  # indexes of the finite samples
    lo: int = -1
    hi: int = -1
    span: float = 0.0
    base_span: float = 0.0  # the span without its spikes and edge blips
    smooth: float = 0.0  # 1 for a ramp or a step, 0 for noise or blips (see `_smoothness`)
    structure: float = 0.0  # 0 for noise, 1 for a straight line however few its samples (`_structure`)
    edges: tuple[tuple[int, int, float], ...] = ()  # a first or last sample standing out alone
    med: float = 0.0
    noise: float = 0.0  # median |step| between consecutive finite samples
    spikes: tuple[tuple[int, int, float], ...] = ()  # (first, last, height) runs standing out
    salience: float = 0.0
    warn: bool = False
    alerted: bool = False  # its own labels match the alert's (set with `salience`)

    @property
    def as_bytes(self) -> bool:
        return _is_bytes(self.labels)


def _stats(index: int, labels: dict[str, str], points: list[Point]) -> _Series:
    finite = [i for i, p in enumerate(points) if math.isfinite(p[3])]
    s = _Series(index, labels, points, finite)
    if not finite:
        return s
    vs = [points[i][3] for i in finite]
    lo_k, hi_k = vs.index(min(vs)), vs.index(max(vs))  # the first time each is reached
    s.lo, s.hi = finite[lo_k], finite[hi_k]
    s.span = vs[hi_k] - vs[lo_k]
    if not math.isfinite(s.span):  # two finite values can still be ~1e308 apart
        s.span = math.inf
    s.med = _median(sorted(vs))
    s.noise = _median(sorted(abs(b - a) for a, b in itertools.pairwise(vs)))
    s.spikes = _spikes(vs, s.span, s.noise, finite)
    s.edges = _edges(vs, s.span, s.noise, finite)
    base = vs
    if s.spikes or s.edges:
        out = {k for a, b, _ in (*s.spikes, *s.edges) for k in range(a, b + 1)}
        base = [points[i][3] for i in finite if i not in out]
    s.base_span = max(base) - min(base) if base else 0.0
    s.smooth = _smoothness(base)
    s.structure = _structure(base)
    return s


def _smoothness(vs: Sequence[float]) -> float:
    """`1 - mean|step| / mean|v - mean|`: ~1 for a ramp, a step or a slow drift (samples follow
    their neighbours), <= 0 for noise or isolated blips (a step is as large as the spread)."""
    if len(vs) < 3:
        return 0.0
    mean = sum(vs) / len(vs)
    spread = sum(abs(v - mean) for v in vs) / len(vs)
    if not spread > 0 or not math.isfinite(spread):
        return 0.0
    steps = sum(abs(b - a) for a, b in itertools.pairwise(vs)) / (len(vs) - 1)
    return max(0.0, 1 - steps / spread) if math.isfinite(steps) else 0.0


def _structure(vs: Sequence[float]) -> float:
    """How far a baseline is from noise, 0..1, whatever its number of samples n. Its ratio
    `r = mean|step| / mean|v - mean|` is ~1.4 for white noise and ~1 for isolated blips; 0.7 (the
    smoothness ROUGH) is the cut, where this is 0. The smallest r that n samples moving one way can
    have is that of a straight line, `4/n` (`4n/(n^2-1)` for odd n), where this is 1. So seven samples
    of a clean ramp (r = 0.58: 0.42 smooth, near the cut) count as fully structured; as n grows the
    line's r goes to 0 and this is the smoothness above ROUGH, rescaled. Below 6 samples even a line
    has r >= 0.7: a movement cannot be told from noise, and counts half (UNTOLD). 0 when it does not
    move."""
    n = len(vs)
    cut = 1 - ROUGH
    mean = sum(vs) / n if vs else 0.0
    spread = sum(abs(v - mean) for v in vs) / n if vs else 0.0
    if not spread > 0 or not math.isfinite(spread):
        return 0.0
    line = 4 / n if n % 2 == 0 else 4 * n / (n * n - 1)
    if line >= cut:
        return UNTOLD
    ratio = sum(abs(b - a) for a, b in itertools.pairwise(vs)) / (n - 1) / spread
    if not math.isfinite(ratio):
        return 0.0
    return min(1.0, max(0.0, (cut - ratio) / (cut - line)))


def _edges(
    vs: Sequence[float], span: float, noise: float, finite: Sequence[int]
) -> tuple[tuple[int, int, float], ...]:
    """The first or last sample when it alone stands out from a steady neighbour: a blip, or a step
    just begun; it counts like a spike for salience (not as a trend), and is described by the trend."""
    if span <= 0 or not math.isfinite(span) or len(vs) < 3:
        return ()
    threshold = max(0.3 * span, 6 * noise)
    out = []
    for end, near, next_ in ((0, 1, 2), (len(vs) - 1, len(vs) - 2, len(vs) - 3)):
        if abs(vs[end] - vs[near]) > threshold and abs(vs[near] - vs[next_]) <= threshold:
            out.append((finite[end], finite[end], abs(vs[end] - vs[near])))
    return tuple(out)


def _spikes(
    vs: Sequence[float], span: float, noise: float, finite: Sequence[int]
) -> tuple[tuple[int, int, float], ...]:
    """Runs of 1-3 samples standing out from both neighbours (which agree with each other) by more
    than 30% of the span and 6 median steps: a spike up or a dip down. Indexes into the points."""
    if span <= 0 or not math.isfinite(span) or len(vs) < 3:
        return ()
    threshold = max(0.3 * span, 6 * noise)
    n = len(vs)
    starts = [i for i in range(1, n - 1) if abs(vs[i] - vs[i - 1]) > threshold]  # a run starts with a jump
    out = []
    after = 0
    for i in starts:
        if i < after:
            continue
        for width in (1, 2, 3):
            j = i + width - 1
            if j >= n - 1:
                break
            left, right = vs[i - 1], vs[j + 1]
            if abs(left - right) > threshold:
                continue
            run = vs[i : j + 1]
            if min(run) - max(left, right) > threshold or min(left, right) - max(run) > threshold:
                height = max(abs(v - (left + right) / 2) for v in run)
                out.append((finite[i], finite[j], height))
                after = j + 1
                break
    return tuple(out)


def _still(s: _Series) -> bool:
    """It never moves: no finite sample, or `_flat`."""
    return not s.finite or _flat(s)


def _flat(s: _Series) -> bool:
    """It does not move: its span is at most 1% of its largest |value|, and that is noise, not a
    trend (a byte counter at 174Gi that climbs 13Mi a minute is not flat)."""
    top = max(abs(s.points[s.lo][3]), abs(s.points[s.hi][3]))
    return s.span <= 0.01 * top and s.structure <= UNTOLD
