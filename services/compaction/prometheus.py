"""query_prometheus: a `query_range` matrix -> every series counted, the salient ones described.

What the digest says. The header counts every series and sample (`N series, M samples`), names the
metric and the labels every series shares once, and gives the window (date once) and the step. Each
item is one text line. A salient series gets its own line: the labels that vary across the answer
(`{endpoint=alertmanager, status=401}`, not only `status`, which alone tells the series apart), min / max /
last with their times and a trend in segments (`flat ~152Mi, then rising ~33Mi/min from 03:02:00`,
spikes, jumps). Quiet series are collapsed: `28 series {pod=checkout-api-*}: 0..0.02, last 0..0.01`.
Values are the raw's sample strings, copied; a humanized form (`573Mi`) only ever stands beside one,
in parentheses. Times are the raw's, cut to HH:MM:SS by `Clock` (the date is in `window`); the last
sample's time is left out when it is the window's end, and `max=last` is said once. A series with
fewer samples than the fullest one says so (`45 pts`), and where it started (`from 12:10:49`, or
`from min` when its min, shown with its time, is its first sample) or
went away and came back (`gap 12:11:55-12:12:21`: Prometheus leaves out of a range query the steps
after a stale marker); `NaN` and `+Inf` samples are counted (`3 NaN`), never read as numbers.

Resolution. A series line has up to eight forms: all its labels, min/max/last, the trend and six
downsampled points; the same without the points; then the labels that vary and have a short value
(at most 24 characters: a cgroup path waits for the richest forms); then without min, unless the
trend opens with a rise (the min is where it rose from); the same with a humanized value only where
it converts a unit (`(606Mi)` stays, a rounding `(0.0844)` goes); then that start and last with the
current trend phrase; then the distinguishing labels only (those that tell apart the series of its
metric), last (and a gap) and the current trend phrase; then last and the trend's words. A group has three (with member names, with the last range, the range alone). The
fitter upgrades forms while the digest fits.

Salience (`Item.salience`, what the local selector ranks by), a sum of peer-relative parts so that a
series is judged against its peers: the other series of the same metric name in the response (all
of them when the name is dropped, as `rate()` does; bytes and file descriptors are not each other's
measure):
- activity x2: how far the series moves apart from its spikes, `span / largest such span of its
  peers`, times `0.1 + 0.9 x structure`. Structure is how far the baseline is from noise: its
  `mean|step| / mean|v - mean|` placed between 0.7 (smoothness 0.3, where noise and blips begin:
  0) and what a straight line of as many samples has (1), so seven samples of a ramp count as much
  as sixty; below 6 samples nobody can tell a trend from noise and it is 0.5. Noise keeps a tenth:
  a busy handler's noisy rate ranks above the dozens of flat ones, and never stands out by its
  noise alone (2 x 1 x 0.1 < QUIET); so the few series of a `rate()` that move outrank the dozens
  that sit at 0, however few the samples;
- spike: the largest spike's height (a run of at most 3 samples standing out from both neighbours,
  by more than 30% of the span and 6 median steps; or a first or last sample standing out alone)
  over the largest span, x2, at most 1, times the share of the other series that have no spike
  half as high (when every pod blips now and then, none stands out);
- saturation: 1 when a ratio/percent metric reaches 95% of its ceiling; 0.7 when the series climbs
  to its maximum and holds it (3+ equal samples at the end: clipped at a limit);
- deviation: how far the series' median stands from its peers' (robust z, squashed to 0..1), times
  that distance as a share of the largest level, x5, at most 1 (3+ series); halved for a flat
  series (span at most 1% of its level, and noise rather than a trend): a standing level (a limit,
  a steady handler) ranks after the series that change, and before the flat ones at the usual level;
- alert: 1.5 when a label the series does not share with every other is one of the alert's labels
  (`alert_context["labels"]`, or its `pod`, `instance`, `service`... keys), 0.5 when a value is the
  alert's service or one of its pods (`<service>-...`), less what every series gets (a match that
  every series shares tells nothing apart).
A series whose salience is below `QUIET` (0.5) is quiet. The `ALONE` (6) most salient active
series and every warning get a line of their own, each with its twins (series whose samples are
the same, time for time and string for string: a histogram's buckets above every observation):
`10 series {handler=/api/v1/query, le=*}: ...` is one line, not ten. The rest collapse into groups
of the same metric name, the same distinguishing label keys and the same shape (quiet: flat,
varying, no samples, only NaN; active: what it does at the end, `now rising`), each with its count
and ranges; a group of one stays a series line, and a response of at most ALONE series has no
groups. Six lines is what a 250-token digest can show with room left for the groups, and fifty
similar lines would not each earn their tokens.

Why groups are items and not `Draft.coarser`: `coarser` replaces the pinned items, and no series
is pinned (nothing in a metric is error-level). As items, each series is in exactly one item (its
own or its group's, `Item.members` = how many), so kept + omitted = the raw's totals whatever the
fitter keeps; and a group ranks by its most salient member, after the series shown alone, so it
is shown once they are, as one line instead of dozens. The most salient series and warnings are
never grouped: a group would hide which one is the worst. A series that spikes or saturates is
level `warn`, so that the `omitted` count says how many warning-shaped series were left out.
Pure and deterministic.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from services.compaction.model import Draft, Item, RawFormatError
from services.compaction.timefmt import Clock, ns_from_unix_seconds, shown

TOOL = "query_prometheus"
QUIET = 0.5  # below this salience a series may be collapsed into a group of similar ones
ALONE = 6  # at most this many active series get a line of their own (and every warning)
ROUGH = 0.3  # below this smoothness a baseline is noise or blips: no structure, no segments
NOISE = 0.1  # the share of its movement a rough (noisy) series keeps in its activity
UNTOLD = 0.5  # the structure of a movement in fewer than 6 samples: noise or a trend, nobody can tell
STANDING = 0.5  # the share of its deviation a flat series keeps (at most QUIET)
MAX_SEGMENTS = 5
POINTS = 6  # downsampled points in the richest form
_LABEL_CHARS = 40
_NAME_CHARS = 60
_LABELS_CHARS = 200  # all of a series' own labels, richest form
_HEADER_LABELS_CHARS = 300
_ID_KEYS = 3  # at most this many labels name a series in its terse forms
_SHORT_VALUE = 24  # a varying label this short is on a series' line in all but its two tersest forms
_MEMBERS = 12  # member names listed in a group's richest form
_ALERT_KEYS = ("pod", "instance", "namespace", "container", "node", "job", "service", "deployment", "app")
_DONE = {"jump": "jumped", "drop": "dropped"}
_SHORT_LABELS = ("namespace", "container", "job", "service", "app")
_MIN_TS, _MAX_TS = 0.0, 253_402_300_799.0  # timefmt.WINDOW in whole seconds: the fast path's check
_NUMBER = (int, float)  # a timestamp's JSON types (not bool)
_NOT_VALUE = re.compile(r"[^0-9A-Za-z.+\-]")  # what Prometheus' float text never holds

Point = tuple[Any, str, float, float]  # (raw timestamp, raw value, timestamp, value)


def _parse(raw: Any) -> list[tuple[dict[str, str], list[Point]]]:
    """(labels, points sorted by time) of each series; RawFormatError (one line) if not a matrix."""
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        raise RawFormatError(
            "query_prometheus: expected a Prometheus query_range response with a 'data' object"
        )
    data = raw["data"]
    if data.get("resultType") != "matrix":
        raise RawFormatError(
            f"query_prometheus: expected resultType 'matrix', got {data.get('resultType')!r}"
        )
    if not isinstance(data.get("result"), list):
        raise RawFormatError("query_prometheus: expected data.result to be a list of series")
    out = []
    for index, series in enumerate(data["result"]):
        if not isinstance(series, dict) or not isinstance(series.get("values"), list):
            raise RawFormatError(f"query_prometheus: series {index} has no 'values' list")
        metric = series.get("metric") or {}
        if not isinstance(metric, dict):
            raise RawFormatError(f"query_prometheus: series {index} metric is not an object")
        points = _points(index, series["values"])
        if any(a[2] > b[2] for a, b in itertools.pairwise(points)):
            points.sort(key=lambda p: p[2])
        out.append(({str(k): str(v) for k, v in metric.items()}, points))
    return out


def _points(index: int, values: list[Any]) -> list[Point]:
    """The samples of one series as (raw t, raw v, t, v). Converted in bulk (fast); on a bad sample,
    converted one by one to name it.

    A timestamp is unix seconds, a JSON number or an ASCII decimal string, in `timefmt.WINDOW`
    (`ns_from_unix_seconds`: never a bool, NaN, or a time before 1970). A value is Prometheus' float
    text (`0.25`, `1e+06`, `NaN`, `+Inf`): ASCII letters, digits, `.+-` only, so that what `float()`
    also takes (`" 1"`, `"1_000"`, `"١٢"`) is refused, not read as a number."""
    if all(type(x) is list and len(x) == 2 and type(x[0]) in _NUMBER and type(x[1]) is str for x in values):
        try:
            ts = [float(x[0]) for x in values]
            vs = [float(x[1]) for x in values]
        except (ValueError, OverflowError):
            pass
        else:
            if all(_MIN_TS <= t <= _MAX_TS for t in ts) and not _NOT_VALUE.search(
                "".join(x[1] for x in values)
            ):
                return list(zip([x[0] for x in values], [x[1] for x in values], ts, vs, strict=True))
    points: list[Point] = []
    for s_index, sample in enumerate(values):
        if not isinstance(sample, list) or len(sample) != 2 or not isinstance(sample[1], str):
            raise RawFormatError(f'query_prometheus: series {index} has a sample that is not [t, "v"]')
        try:
            ns_from_unix_seconds(sample[0])
        except ValueError as exc:
            raise RawFormatError(
                f"query_prometheus: series {index} sample {s_index} timestamp {exc}"
            ) from None
        try:
            if _NOT_VALUE.search(sample[1]):
                raise ValueError
            value = float(sample[1])
        except ValueError:
            raise RawFormatError(
                f"query_prometheus: series {index} sample {s_index} value {shown(sample[1])} is not a number"
            ) from None
        points.append((sample[0], sample[1], float(sample[0]), value))
    return points


def _is_bytes(labels: Mapping[str, str]) -> bool:
    name = labels.get("__name__", "")
    return "bytes" in name or "memory" in name


def humanize(value: float, as_bytes: bool) -> str:
    """`35651584` -> `34Mi` (bytes) or `1.2k`; only ever shown beside the raw value. Bounded length."""
    if not math.isfinite(value):
        return str(value)
    sign = "-" if value < 0 else ""
    mag = abs(value)
    units = (
        (("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024))
        if as_bytes
        else (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
    )
    for suffix, size in units:
        if mag >= size:
            scaled = mag / size
            if scaled >= 10_000:
                return f"{value:.2e}"
            text = f"{scaled:.0f}" if scaled >= 10 else f"{scaled:.1f}".rstrip("0").rstrip(".")
            return f"{sign}{text}{suffix}"
    return f"{sign}{mag:.3g}"


def _median(ordered: Sequence[float]) -> float:
    n = len(ordered)
    if not n:
        return 0.0
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- per series: statistics and spikes ------------------------------------------------------------


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


# --- salience ---------------------------------------------------------------------------------------


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


# --- trend in segments ------------------------------------------------------------------------------


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


# --- rendering --------------------------------------------------------------------------------------


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


def _series_forms(s: _Series, c: _Ctx, head_full: str, head_id: str, head_vary: str) -> tuple[str, ...]:
    """Up to eight resolutions of one series line, richest first."""
    pts = s.points
    if not pts:
        return tuple(dict.fromkeys(f"{h}: no samples" for h in (head_full, head_vary, head_id)))
    last = len(pts) - 1
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
        i = s.finite[-1]
        only = (
            f"1 sample {_value(pts[i], s.as_bytes)} at {c.times.at(pts[i])}" if len(s.finite) == 1 else None
        )
        flat = only or f"flat at {pts[i][1]}{' until' + end if end and i == last else ''}"
        return tuple(dict.fromkeys(f"{h}: {flat}{note}" for h in (head_full, head_vary, head_id)))
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


# --- groups of quiet series -------------------------------------------------------------------------


def _flat(s: _Series) -> bool:
    """It does not move: its span is at most 1% of its largest |value|, and that is noise, not a
    trend (a byte counter at 174Gi that climbs 13Mi a minute is not flat)."""
    top = max(abs(s.points[s.lo][3]), abs(s.points[s.hi][3]))
    return s.span <= 0.01 * top and s.structure <= UNTOLD


def _shape(s: _Series) -> str:
    """What a group says its members do: `empty`, `nonfinite`, `flat`, `varying` (quiet), or what an
    active series does at the end (`now rising`): the end is what its earlier shapes led to, and
    grouping by whole shapes would split fifty wandering series into fifty groups."""
    if not s.points:
        return "empty"
    if not s.finite:
        return "nonfinite"
    if _flat(s):
        return "flat"
    segs = _segments(s) if s.salience >= QUIET else []
    return f"now {_DONE.get(segs[-1].kind, segs[-1].kind)}" if segs else "varying"


def _prefix(values: Sequence[str]) -> str:
    first, last = min(values), max(values)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


def _group_forms(
    members: Sequence[_Series], c: _Ctx, name: str, shape: str, keys: Sequence[str]
) -> tuple[str, ...]:
    """`28 series {pod=checkout-api-*}: 0..0.02, last 0..0.01`, `5 series {pod=x-*}: now rising, lo..hi`;
    the richest form names the members."""
    parts = []
    for key in keys:
        values = [m.labels[key] for m in members if key in m.labels]
        if not values:
            continue
        distinct = set(values)
        if len(distinct) == 1 and len(values) == len(members):
            parts.append(f"{key}={_clip(values[0], _LABEL_CHARS)}")
        else:
            parts.append(f"{key}={_clip(_prefix(values), _LABEL_CHARS)}*")
    head = f"{len(members)} series {_clip(name, _NAME_CHARS)}{{{', '.join(parts)}}}"
    live = [m for m in members if m.finite]
    samples = [p for m in members for p in m.points]
    bad = _nonfinite(samples)
    note = f" ({bad})" if bad else ""
    if not live:
        text = "no samples" if not samples else f"only {bad}"
        return (f"{head}: {text}",)
    lo = min((m.points[m.lo] for m in live), key=lambda p: p[3])
    hi = max((m.points[m.hi] for m in live), key=lambda p: p[3])
    lasts = [m.points[m.finite[-1]] for m in live]
    lo_last, hi_last = min(lasts, key=lambda p: p[3]), max(lasts, key=lambda p: p[3])
    word = "" if shape == "varying" else "flat " if shape == "flat" else f"{shape}, "
    spread = _range(lo, hi, members[0].as_bytes)
    short = f"{head}: {word}{spread}{note}"
    same = (lo_last[1], hi_last[1]) == (lo[1], hi[1])
    rich = short if same else f"{short}, last {_range(lo_last, hi_last, members[0].as_bytes)}"
    names = _member_names(members, keys)
    return tuple(dict.fromkeys((f"{rich}; {names}" if names else rich, rich, short)))


def _range(lo: Point, hi: Point, as_bytes: bool) -> str:
    if lo[1] == hi[1]:
        return _value(lo, as_bytes)
    text = f"{lo[1]}..{hi[1]}"
    a, b = humanize(lo[3], as_bytes), humanize(hi[3], as_bytes)
    if _says_more(lo[1], a) or _says_more(hi[1], b):
        text += f" ({a}..{b})"
    return text


def _member_names(members: Sequence[_Series], keys: Sequence[str]) -> str:
    if not keys:
        return ""
    key = keys[0]
    values = [m.labels.get(key, "") for m in members]
    cut = len(_prefix(values)) if len(set(values)) > 1 else 0
    shown = [_clip(v[cut:] or v, 24) for v in values[:_MEMBERS]]
    more = f" +{len(values) - _MEMBERS}" if len(values) > _MEMBERS else ""
    return f"{key}: {', '.join(shown)}{more}"


# --- the draft --------------------------------------------------------------------------------------


def _common(series: Sequence[tuple[dict[str, str], list[Point]]]) -> dict[str, str]:
    if len(series) < 2:
        return {}
    common = dict(series[0][0])
    for labels, _ in series[1:]:
        common = {k: v for k, v in common.items() if labels.get(k) == v}
    return common


def _id_keys(series: Sequence[_Series], common: Mapping[str, str]) -> list[str]:
    """The fewest own labels (at most _ID_KEYS) that tell the series apart as well as all of them do:
    most distinct values first, then the usual names of a target (`pod`, `instance`...), then the
    shortest values (`pod` before a cgroup `id`)."""
    own = sorted({k for s in series for k in s.labels if k not in common and k != "__name__"})
    if not own:
        return []
    full = len({tuple(s.labels.get(k, "") for k in own) for s in series})
    stats = []
    for key in own:
        values = [s.labels.get(key, "") for s in series]
        usual = _ALERT_KEYS.index(key) if key in _ALERT_KEYS else len(_ALERT_KEYS)
        stats.append((-len(set(values)), usual, sum(map(len, values)), key))
    chosen: list[str] = []
    for *_, key in sorted(stats):
        chosen.append(key)
        if (
            len({tuple(s.labels.get(k, "") for k in chosen) for s in series}) == full
            or len(chosen) >= _ID_KEYS
        ):
            break
    return chosen


def _headers(
    evidence_id: str, summary: str, name: str | None, window: str | None, step: str, common: Mapping[str, str]
) -> tuple[dict[str, Any], ...]:
    """Richest first: every shared label, a few short ones, the window with its step, the window, and
    last the evidence id, the counts and the metric's name clipped (small and bounded)."""
    least: dict[str, Any] = {"evidence": evidence_id, "summary": summary}
    if name:
        least["metric"] = _clip(name, _NAME_CHARS)
    timed = {**least, "metric": _clip(name, 120)} if name else dict(least)
    if window:
        timed["window"] = window
    stepped = {**timed, "window": f"{window} step {step}"} if window and step else timed
    items = sorted((k, v) for k, v in common.items() if k != "__name__")
    every = ", ".join(f"{k}={_clip(v, _LABEL_CHARS)}" for k, v in items)
    short = sorted(items, key=lambda kv: (kv[0] not in _SHORT_LABELS, len(kv[1]), kv[0]))[:3]
    few = ", ".join(f"{k}={_clip(v, 24)}" for k, v in sorted(short))
    headers = (
        [{**stepped, "labels": _clip(every, _HEADER_LABELS_CHARS)}, {**stepped, "labels": few}]
        if every
        else []
    )
    headers += [stepped, timed, least]
    unique: list[dict[str, Any]] = []
    for h in headers:
        if h not in unique:
            unique.append(h)
    return tuple(unique)


def _step_seconds(series: Sequence[_Series]) -> float:
    """The query's step: the smallest interval between two samples of a series (a series that went
    away for a while has longer ones), 0 when no series has two samples."""
    steps = (b[2] - a[2] for s in series for a, b in itertools.pairwise(s.points))
    return min((d for d in steps if d > 0), default=0.0)


def _step(seconds: float) -> str:
    if not seconds > 0 or not math.isfinite(seconds):
        return ""
    return f"{seconds:.0f}s" if float(seconds).is_integer() else f"{seconds:.3g}s"


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    parsed = _parse(raw)
    common = _common(parsed)
    names = sorted({labels.get("__name__", "") for labels, _ in parsed})
    one_name = names[0] if len(names) == 1 and names[0] else None
    series = [_stats(i, labels, points) for i, (labels, points) in enumerate(parsed, start=1)]
    all_points = [p for s in series for p in s.points]
    bad = _nonfinite(all_points)
    summary = f"{len(series)} series, {len(all_points)} samples" + (f" ({bad})" if bad else "")
    step_s = _step_seconds(series)
    ctx, window = _context(series, step_s)
    step = _step(step_s)
    _score(series, common, alert_context)
    keys = _keys_by_name(series, common)
    alone, groups = _split(series, keys, one_name)
    items = [
        *(
            _series_item(f[0], ctx, *_heads(f[0], one_name, common, keys[_name(f[0])]))
            if len(f) == 1
            else _twins_item(f, ctx, *_twins_heads(f, one_name, common, keys[_name(f[0])]))
            for f in alone
        ),
        *_group_items(groups, ctx),
    ]
    headers = _headers(evidence_id, summary, one_name, window, step, common)
    return Draft(headers=headers, section="series", kind="series", unit="samples", items=_order(items))


def _context(series: Sequence[_Series], step: float) -> tuple[_Ctx, str | None]:
    """The digest's clock and window (None when there is no sample at all). The usual sample count is
    the largest: a series with fewer missed steps (it started late, went away, or stopped), and the
    note goes to it, even when half the series did."""
    starts = [s.points[0] for s in series if s.points]
    if not starts:
        zero: Point = (0, "0", 0.0, 0.0)
        return _Ctx(_Times(zero, zero), 0.0, 0.0, 0, step), None
    first = min(starts, key=lambda p: p[2])
    last = max((s.points[-1] for s in series if s.points), key=lambda p: p[2])
    times = _Times(first, last)
    usual = max(len(s.points) for s in series)
    return _Ctx(times, first[2], last[2], usual, step), times.window()


def _heads(
    s: _Series, one_name: str | None, common: Mapping[str, str], keys: Sequence[str]
) -> tuple[str, str, str]:
    """(the series with all its own labels, with its distinguishing labels only, with those and
    every other label of its own whose value is short). Its own labels are those that vary across
    the answer: `{endpoint=alertmanager, status=401}` says which endpoint refused, where `status`
    alone would tell the series apart; a long value (a cgroup path) is left to the richest forms."""
    name = "" if one_name is not None else s.labels.get("__name__", "")
    own = sorted(k for k in s.labels if k not in common and k != "__name__")
    vary = [k for k in own if k in keys or len(s.labels[k]) <= _SHORT_VALUE]
    return (
        _labels_text(name, s.labels, own, _LABELS_CHARS),
        _labels_text(name, s.labels, keys, _LABELS_CHARS),
        _labels_text(name, s.labels, vary, _LABELS_CHARS),
    )


GroupKey = tuple[str, ...]


def _name(s: _Series) -> str:
    return s.labels.get("__name__", "")


def _keys_by_name(series: Sequence[_Series], common: Mapping[str, str]) -> dict[str, list[str]]:
    """The labels that tell apart the series of each metric name (`_id_keys`): a line names its
    series among those of its metric, whose labels are not another metric's."""
    by_name: dict[str, list[_Series]] = {}
    for s in series:
        by_name.setdefault(_name(s), []).append(s)
    return {name: _id_keys(members, common) for name, members in by_name.items()}


def _split(
    series: Sequence[_Series], keys: Mapping[str, Sequence[str]], one_name: str | None
) -> tuple[list[list[_Series]], dict[GroupKey, list[_Series]]]:
    """(lines of their own, groups of the rest by name, shape and label keys). The ALONE most salient
    series and every warning stand alone, each with its twins: the series whose samples are the same
    as its own, time for time and string for string (a histogram's buckets above every observation,
    the same counter scraped twice), which say nothing it does not. A line of twins is one line, so
    the ALONE lines are ALONE different things. A group of one stays a line, and so does every series
    of a response of at most ALONE series: a group is there to spare fifty similar lines, not two."""
    ranked = sorted(series, key=lambda s: (-s.salience, s.index))
    lines: dict[tuple[str, tuple[tuple[Any, str], ...]], list[_Series]] = {}
    for s in ranked:
        samples = (_name(s), tuple((p[0], p[1]) for p in s.points))  # twins are of one metric
        if samples in lines:
            lines[samples].append(s)
        elif s.warn or len(series) <= ALONE or (s.salience >= QUIET and len(lines) < ALONE):
            lines[samples] = [s]
    alone = {id(s) for members in lines.values() for s in members}
    groups: dict[GroupKey, list[_Series]] = {}
    for s in series:
        if id(s) not in alone:
            name = "" if one_name is not None else s.labels.get("__name__", "")
            present = tuple(k for k in keys[_name(s)] if k in s.labels)
            groups.setdefault((name, _shape(s), *present), []).append(s)
    out = list(lines.values())
    for key in [k for k, members in groups.items() if len(members) == 1]:
        out.append(groups.pop(key))
    for members in out:
        members.sort(key=lambda s: s.index)
    return sorted(out, key=lambda members: members[0].index), groups


def _series_item(s: _Series, c: _Ctx, head_full: str, head_id: str, head_vary: str | None = None) -> Item:
    return Item(
        id=f"s{s.index}",
        forms=_series_forms(s, c, head_full, head_id, head_id if head_vary is None else head_vary),
        n=len(s.points),
        level="warn" if s.warn else "info",
        salience=s.salience,
        first=c.times.at(s.points[0]) if s.points else None,
    )


def _twins_heads(
    members: Sequence[_Series], one_name: str | None, common: Mapping[str, str], keys: Sequence[str]
) -> tuple[str, str]:
    """`10 series {handler=/api/v1/query, le=+Inf|0.1|0.25}` (every label, the values that differ
    listed) and `10 series {handler=/api/v1/query, le=*}` (the distinguishing labels, and those that
    differ as their common prefix and `*`)."""
    rep = members[0]
    name = "" if one_name is not None else rep.labels.get("__name__", "")
    own = sorted({k for m in members for k in m.labels if k not in common and k != "__name__"})
    differ = [k for k in own if len({m.labels.get(k) for m in members}) > 1]

    def head(chosen: Sequence[str], listed: bool) -> str:
        parts = []
        for key in chosen:
            values = [m.labels.get(key, "") for m in members]
            if key not in differ:
                if key in rep.labels:
                    parts.append(f"{key}={_clip(rep.labels[key], _LABEL_CHARS)}")
            elif listed:
                parts.append(f"{key}=" + "|".join(_clip(v, _LABEL_CHARS) for v in values))
            else:
                parts.append(f"{key}={_clip(_prefix(values), _LABEL_CHARS)}*")
        inner = _clip(", ".join(parts), _LABELS_CHARS)
        return f"{len(members)} series {_clip(name, _NAME_CHARS)}{{{inner}}}"

    return head(own, True), head([*keys, *(k for k in differ if k not in keys)], False)


def _twins_item(members: Sequence[_Series], c: _Ctx, head_full: str, head_id: str) -> Item:
    """Series with the same samples: one line, the first one's, counting them all."""
    item = _series_item(members[0], c, head_full, head_id)
    return Item(
        id=item.id,
        forms=item.forms,
        n=sum(len(m.points) for m in members),
        level=item.level,
        salience=item.salience,
        first=item.first,
        members=len(members),
    )


def _group_items(groups: Mapping[GroupKey, Sequence[_Series]], c: _Ctx) -> list[Item]:
    out = []
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0].index))
    for number, (key, members) in enumerate(ordered, start=1):
        starts = [m.points[0] for m in members if m.points]
        out.append(
            Item(
                id=f"g{number}",
                forms=_group_forms(members, c, key[0], key[1], key[2:]),
                n=sum(len(m.points) for m in members),
                salience=max(m.salience for m in members),
                first=c.times.at(min(starts, key=lambda p: p[2])) if starts else None,
                weight=0.5,
                members=len(members),
            )
        )
    return out


def _order(items: Sequence[Item]) -> tuple[Item, ...]:
    """The selector's order (salience, then warn before info, then earliest, then id), so that the
    plain fit and a selection keep the same series."""
    return tuple(sorted(items, key=lambda it: (-it.salience, it.level != "warn", it.first or "", it.id)))
