"""prometheus: rendering (docs/compaction.md)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from services.compaction.prometheus.parse import _LABEL_CHARS, _NAME_CHARS, POINTS, Point, _clip, humanize
from services.compaction.prometheus.segments import _Seg, _segments
from services.compaction.prometheus.stats import _Series
from services.compaction.timefmt import Clock


class _Times:
    """Terse times through `Clock`; millis only for timestamps that carry a fraction."""

    def __init__(self, first: Point, last: Point) -> None:
        self.clock = Clock(_ns(first), _ns(last))

    def at(self, point: Point) -> str:
        ns = _ns(point)
        return self.clock.at(ns, millis=ns % 1_000_000_000 != 0)

    def window(self) -> str:
        return self.clock.window()


def _ns(point: Point) -> int:
    """Exact nanoseconds of a raw timestamp (its decimal digits), else of its float."""
    raw = point[0]
    if isinstance(raw, (int, float, str)) and not isinstance(raw, bool):
        try:
            dec = Decimal(str(raw).strip())
            if dec.is_finite():
                return int(dec * 1_000_000_000)
        except InvalidOperation:
            pass
    return int(Decimal(point[2]) * 1_000_000_000)


@dataclass(frozen=True)
class _Ctx:
    """What every line of one digest shares: the clock, the window's ends, the full sample count, the
    step."""

    times: _Times
    start: float
    end: float
    usual: int  # the most samples any series has: one at every step, where no series is missing
    step: float = 0.0  # seconds between samples (the smallest interval of any series), 0 if unknown


def _value(p: Point, as_bytes: bool, human: bool = True) -> str:
    """The raw sample string, and its humanized form beside it when that says more."""
    raw = p[1]
    if not human or not math.isfinite(p[3]):
        return raw
    h = humanize(p[3], as_bytes)
    return f"{raw} ({h})" if _says_more(raw, h) else raw


def _says_more(raw: str, human: str) -> bool:
    """A humanized form earns its tokens when it carries a unit (`573Mi`) or shortens a long raw."""
    return human != raw and (human[-1:].isalpha() or len(raw) > 8)


def _nonfinite(points: Sequence[Point]) -> str:
    counts = Counter(p[1] for p in points if not math.isfinite(p[3]))
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))


def _approx(value: float, as_bytes: bool) -> str:
    """A derived number (a rate, a level), written after `~`: two significant digits are its honesty."""
    if as_bytes or not 1e-4 <= abs(value) < 1000:
        return humanize(value, as_bytes)
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"


def _rate(seg: _Seg, as_bytes: bool) -> str:
    return f"~{_approx(abs(seg.rate), as_bytes)}/min"


def _phrase(s: _Series, seg: _Seg, c: _Ctx) -> str:
    pts = s.points
    if seg.kind == "flat":
        values = {pts[i][1] for i in s.finite if seg.a <= i <= seg.b}
        if len(values) == 1:
            return f"flat at {next(iter(values))}"
        # no trend, but moving more than its level (a burst between zeros, blips): not "flat ~0"
        spiked = {i for a, b, _ in s.spikes for i in range(a, b + 1)}
        base = [pts[i] for i in s.finite if seg.a <= i <= seg.b and i not in spiked]
        lo, hi = min(base, key=lambda p: p[3], default=None), max(base, key=lambda p: p[3], default=None)
        if lo is not None and hi is not None and hi[3] - lo[3] > abs(seg.level):
            return f"varying {_range(lo, hi, s.as_bytes)}"
        return f"flat ~{_approx(seg.level, s.as_bytes)}"
    if seg.kind in ("jump", "drop"):
        return f"{seg.kind} to {pts[seg.b][1]} at {c.times.at(pts[seg.b])}"
    return f"{seg.kind} {_rate(seg, s.as_bytes)}"


def _trend(s: _Series, segs: Sequence[_Seg], c: _Ctx, shown: frozenset[int], only_last: bool = False) -> str:
    """`flat ~152Mi, then rising ~33Mi/min from 03:02:00; spike to 950 at 03:07:15`. Indexes in
    `shown` are already written with their values and times (min/max), so a spike there says so."""
    parts = []
    chosen = list(enumerate(segs))[-1:] if only_last else list(enumerate(segs))
    for k, seg in chosen:
        text = _phrase(s, seg, c)
        after_step = k > 0 and segs[k - 1].kind in ("jump", "drop")  # its time is said already
        if seg.kind not in ("jump", "drop") and seg.a != s.finite[0] and not (after_step and not only_last):
            text += f" from {c.times.at(s.points[seg.a])}"
        parts.append(text if k == 0 or only_last else f"then {text}")
    trend = ", ".join(parts)
    spikes = _spike_text(s, shown, c)
    return f"{trend}; {spikes}" if trend and spikes else trend or spikes


def _spike_text(s: _Series, shown: frozenset[int], c: _Ctx) -> str:
    if not s.spikes:
        return ""
    ups = [s.points[a][3] > s.med for a, _, _ in s.spikes]
    a, b, _ = max(s.spikes, key=lambda r: r[2])
    run = range(a, b + 1)
    up = s.points[a][3] > s.med
    peak = max(run, key=lambda i: s.points[i][3]) if up else min(run, key=lambda i: s.points[i][3])
    word = "spike" if up else "dip"
    kinds = "spikes" if all(ups) else "dips" if not any(ups) else "spikes/dips"
    many = f"{len(s.spikes)} {kinds}, largest" if len(s.spikes) > 1 else word
    if peak in shown and peak in (s.hi, s.lo):
        return f"{many} at {'max' if peak == s.hi else 'min'}"
    return f"{many} to {s.points[peak][1]} at {c.times.at(s.points[peak])}"


def _trend_words(s: _Series, segs: Sequence[_Seg]) -> str:
    words: list[str] = []
    for seg in segs:
        if not words or words[-1] != seg.kind:
            words.append(seg.kind)
    text = " then ".join(words[-3:])
    if s.spikes:
        text = f"{text}, spike" if text else "spike"
    return text


def _labels_text(name: str, labels: Mapping[str, str], keys: Sequence[str], limit: int) -> str:
    inner = ", ".join(f"{k}={_clip(labels[k], _LABEL_CHARS)}" for k in keys if k in labels)
    return _clip(name, _NAME_CHARS) + "{" + _clip(inner, limit) + "}"


def _notes(pts: Sequence[Point], c: _Ctx) -> tuple[list[str], str, str]:
    """What a series' line notes beside its values: (every note, where it started, its longest gap)."""
    notes = []
    if len(pts) != c.usual:
        notes.append(f"{len(pts)} pts")
    started = f"from {c.times.at(pts[0])}" if pts[0][2] != c.start else ""
    if started:
        notes.append(started)
    gaps = _gaps(pts, c.step)
    gap = ""
    if gaps:
        a, b = max(gaps, key=lambda g: pts[g[1]][2] - pts[g[0]][2])
        span = f"{c.times.at(pts[a])}-{c.times.at(pts[b])}"
        gap = f"gap {span}" if len(gaps) == 1 else f"{len(gaps)} gaps, longest {span}"
        notes.append(gap)
    bad = _nonfinite(pts)
    if bad:
        notes.append(bad)
    return notes, started, gap


def _flat_forms(s: _Series, c: _Ctx, end: str, note: str, heads: tuple[str, str, str]) -> tuple[str, ...]:
    """The forms of a series with one finite sample, or that never moved: one line, said once per head."""
    pts, i = s.points, s.finite[-1]
    only = f"1 sample {_value(pts[i], s.as_bytes)} at {c.times.at(pts[i])}" if len(s.finite) == 1 else None
    flat = only or f"flat at {pts[i][1]}{' until' + end if end and i == len(pts) - 1 else ''}"
    return tuple(dict.fromkeys(f"{h}: {flat}{note}" for h in heads))


def _series_forms(s: _Series, c: _Ctx, head_full: str, head_id: str, head_vary: str) -> tuple[str, ...]:
    """Up to eight resolutions of one series line, richest first."""
    pts = s.points
    if not pts:
        return tuple(dict.fromkeys(f"{h}: no samples" for h in (head_full, head_vary, head_id)))
    last = len(pts) - 1
    notes, started, gap = _notes(pts, c)
    note = f" ({', '.join(notes)})" if notes else ""

    def note_beside(shown: Sequence[int]) -> str:
        """The note; where the series started said as `from min` (`from max`) when its first sample
        is the min (max) shown with its time beside it."""
        if not started or 0 not in shown or last == 0:
            return note
        at = "from min" if s.lo == 0 and s.lo in shown else "from max"
        return " (" + ", ".join(at if n == started else n for n in notes) + ")"

    if not s.finite:
        line = f"last {pts[last][1]}{note}"
        return tuple(dict.fromkeys(f"{h}: {line}" for h in (head_full, head_vary, head_id)))
    end = "" if pts[last][2] == c.end else f" {c.times.at(pts[last])}"

    def stat(i: int, name: str, human: bool = True) -> str:
        return f"{name} {_value(pts[i], s.as_bytes, human)}" + (
            end if i == last else f" {c.times.at(pts[i])}"
        )

    if len(s.finite) == 1 or s.span == 0:
        return _flat_forms(s, c, end, note, (head_full, head_vary, head_id))
    segs = _segments(s)
    lo, hi = s.lo, s.hi

    def extremes(human: bool) -> tuple[str, str, str]:
        """(min, max, last) as the line says them; `max=last` or `min=last` once."""
        if hi == last:
            return stat(lo, "min", human), stat(hi, "max=last", human), ""
        if lo == last:
            return stat(lo, "min=last", human), stat(hi, "max", human), ""
        return stat(lo, "min", human), stat(hi, "max", human), stat(last, "last", human)

    mini, maxi, lasti = extremes(True)
    last_name = "max=last" if hi == last else "min=last" if lo == last else "last"
    rich = ", ".join(x for x in (mini, maxi, lasti) if x) + note_beside((lo, hi))
    # A trend that opens with a rise says nothing of where it rose from ("rising ~0.053/min"): its
    # line keeps its min (the start) as long as it keeps any value but the last.
    rose = bool(segs) and segs[0].kind == "rising" and lo < hi
    shown_mid = (lo, hi) if rose else (hi,)

    def mid(human: bool) -> str:
        low, high, final = extremes(human)
        return ", ".join(x for x in (low if rose else "", high, final) if x) + note_beside(shown_mid)

    # In the terser forms a humanized value stays only where it converts a unit (`635752453
    # (606Mi)`); a rounding (`0.08436666666666667 (0.0844)`) goes before any value does.
    units = s.as_bytes
    start = stat(lo, "min", units) if rose else ""
    full = _trend(s, segs, c, frozenset((lo, hi)))
    gone = f" ({gap})" if gap else ""  # it went away: said until the tersest
    # The labels that vary (`head_vary`) before any detail but the last value: which endpoint
    # refused tells more than where the refusals peaked; the fewest that tell the series apart
    # (`head_id`) only in the two tersest forms, every label (`head_full`) in the two richest.
    trend_mid = _trend(s, segs, c, frozenset(shown_mid))
    now = _trend(s, segs, c, frozenset(), only_last=True)
    now_from = _trend(s, segs, c, frozenset((lo,)), only_last=True) if start else now
    forms = [
        (head_full, rich, full, _downsample(s, c)),
        (head_full, rich, full),
        (head_vary, rich, full),
        (head_vary, mid(True), trend_mid),
        (head_vary, mid(units), trend_mid),
        (
            head_vary,
            ", ".join(x for x in (start, stat(last, last_name, units)) if x)
            + (note_beside((lo,)) if start else gone),
            now_from,
        ),
        (head_id, stat(last, last_name) + gone, now),
        (head_id, stat(last, "last", human=False), _trend_words(s, segs)),
    ]
    return tuple(dict.fromkeys(f"{head}: " + "; ".join(p for p in parts if p) for head, *parts in forms))


def _gaps(pts: Sequence[Point], step: float) -> list[tuple[int, int]]:
    """(before, after) of each stretch with no sample where a step had one: a series that went away
    (a stale marker: Prometheus drops its points from a range query) and came back."""
    if step <= 0:
        return []
    return [(i, i + 1) for i in range(len(pts) - 1) if pts[i + 1][2] - pts[i][2] > 1.5 * step]


def _downsample(s: _Series, c: _Ctx) -> str:
    """`pts 03:00:00 159413834, 03:03:00 ...`: a few evenly spaced finite samples, raw values."""
    n = len(s.finite)
    picks = (
        sorted({s.finite[round(k * (n - 1) / (POINTS - 1))] for k in range(POINTS)}) if n > 1 else s.finite
    )
    return "pts " + ", ".join(f"{c.times.at(s.points[i])} {s.points[i][1]}" for i in picks)


def _range(lo: Point, hi: Point, as_bytes: bool) -> str:
    if lo[1] == hi[1]:
        return _value(lo, as_bytes)
    text = f"{lo[1]}..{hi[1]}"
    a, b = humanize(lo[3], as_bytes), humanize(hi[3], as_bytes)
    if _says_more(lo[1], a) or _says_more(hi[1], b):
        text += f" ({a}..{b})"
    return text
