"""query_prometheus: a `query_range` matrix -> per series labels, min/max/last, trend, points.

Labels shared by every series are written once (`common_labels`); each series keeps the rest.
Each of min/max/last is `[t, "v", human v, HH:MM]`: the raw pair first, the human forms beside.

Values and timestamps are copied as they appear in the raw (the sample strings, the
unix seconds); a humanized form (`512Mi`, `03:02`) is written beside them, never
instead. Resolution levels drop downsampled points before any series is dropped.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

from services.compactor.model import Draft, Item, RawFormatError
from services.compactor.timefmt import hhmm_from_unix

TOOL = "query_prometheus"
POINT_LEVELS = (12, 6, 3, 0)


def _parse(raw: Any) -> list[tuple[dict[str, str], list[tuple[Any, str, float]]]]:
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
        points = []
        for sample in series["values"]:
            if not isinstance(sample, list) or len(sample) != 2 or not isinstance(sample[1], str):
                raise RawFormatError(f'query_prometheus: series {index} has a sample that is not [t, "v"]')
            try:
                value = float(sample[1])
                float(sample[0])
            except (TypeError, ValueError):
                raise RawFormatError(
                    f"query_prometheus: series {index} sample {sample!r} is not numeric"
                ) from None
            points.append((sample[0], sample[1], value))
        out.append(({str(k): str(v) for k, v in metric.items()}, points))
    return out


def _is_bytes(labels: Mapping[str, str]) -> bool:
    name = labels.get("__name__", "")
    return "bytes" in name or "memory" in name


def humanize(value: float, as_bytes: bool) -> str:
    """`35651584` -> `34Mi` (bytes) or `1.2k`; only ever shown beside the raw value."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    sign = "-" if value < 0 else ""
    mag = abs(value)
    units = (
        (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)) if as_bytes else (("G", 1e9), ("M", 1e6), ("k", 1e3))
    )
    for suffix, size in units:
        if mag >= size:
            scaled = mag / size
            text = f"{scaled:.0f}" if scaled >= 10 else f"{scaled:.1f}".rstrip("0").rstrip(".")
            return f"{sign}{text}{suffix}"
    return f"{sign}{mag:.3g}"


def _knee(ts: list[float], vs: list[float]) -> int:
    """Index where a flat start turns into a straight line: the best two-segment fit (O(n), prefix sums)."""
    n = len(vs)
    if n < 3:
        return 0
    t0 = ts[0]
    xs = [t - t0 for t in ts]
    # prefix sums of v and v^2 for the flat part
    pv, pvv = [0.0], [0.0]
    for v in vs:
        pv.append(pv[-1] + v)
        pvv.append(pvv[-1] + v * v)
    # suffix sums for the linear part
    sx, sy, sxx, sxy, syy = (
        [0.0] * (n + 1),
        [0.0] * (n + 1),
        [0.0] * (n + 1),
        [0.0] * (n + 1),
        [0.0] * (n + 1),
    )
    for i in range(n - 1, -1, -1):
        x, y = xs[i], vs[i]
        sx[i], sy[i] = sx[i + 1] + x, sy[i + 1] + y
        sxx[i], sxy[i], syy[i] = sxx[i + 1] + x * x, sxy[i + 1] + x * y, syy[i + 1] + y * y
    best, best_k = 0.0, -1
    for k in range(0, n - 1):  # flat on [0..k], line on [k..n-1]
        m = k + 1
        flat = pvv[m] - pv[m] ** 2 / m
        c = n - k
        cxx = sxx[k] - sx[k] ** 2 / c
        cxy = sxy[k] - sx[k] * sy[k] / c
        cyy = syy[k] - sy[k] ** 2 / c
        line = cyy - (cxy * cxy / cxx if cxx > 0 else 0.0)
        if best_k < 0 or flat + line < best - 1e-9 * max(1.0, abs(best)):
            best, best_k = flat + line, k
    return best_k


def _slope(ts: list[float], vs: list[float]) -> float:
    n = len(vs)
    mx, my = sum(ts) / n, sum(vs) / n
    sxx = sum((t - mx) ** 2 for t in ts)
    return sum((t - mx) * (v - my) for t, v in zip(ts, vs, strict=True)) / sxx if sxx else 0.0


def trend(points: list[tuple[Any, str, float]], as_bytes: bool) -> str:
    """Shape of a series: `flat`, or `rising ~33Mi/min from 03:02` (the last monotone run, from its knee),
    prefixed `sawtooth (N resets)` when the series fell back sharply before that run."""
    if len(points) < 3:
        return "too few points"
    values = [p[2] for p in points]
    span = max(values) - min(values)
    if span == 0 or span <= 0.01 * max(abs(v) for v in values):
        return "flat"
    tolerance = 0.05 * span
    direction = 1 if values[-1] >= values[0] else -1
    run = len(values) - 1
    while run > 0 and direction * (values[run] - values[run - 1]) >= -tolerance:
        run -= 1
    drops = sum(1 for a, b in itertools.pairwise(values) if direction * (b - a) < -0.3 * span)
    ts = [float(p[0]) for p in points[run:]]
    knee = run + _knee(ts, values[run:])
    seg_t = [float(p[0]) for p in points[knee:]]
    rate = _slope(seg_t, values[knee:]) * 60
    if abs(rate) * (seg_t[-1] - seg_t[0]) / 60 < 0.05 * span:
        return f"flat since {hhmm_from_unix(points[knee][0])}"
    word = "rising" if rate > 0 else "falling"
    shape = f"{word} ~{humanize(abs(rate), as_bytes)}/min from {hhmm_from_unix(points[knee][0])}"
    return f"sawtooth ({drops} resets), then {shape}" if drops else shape


def _sample(points: list[tuple[Any, str, float]], index: int) -> list[Any]:
    return [points[index][0], points[index][1]]


def _downsample(points: list[tuple[Any, str, float]], k: int) -> list[list[Any]]:
    if k <= 0 or not points:
        return []
    if len(points) <= k:
        return [[p[0], p[1]] for p in points]
    picks = sorted({round(i * (len(points) - 1) / (k - 1)) for i in range(k)}) if k > 1 else [len(points) - 1]
    return [_sample(points, i) for i in picks]


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    series = _parse(raw)
    names = sorted({labels.get("__name__", "") for labels, _ in series} - {""})
    common = dict(series[0][0]) if len(series) > 1 else {}
    for labels, _ in series[1:]:
        common = {k: v for k, v in common.items() if labels.get(k) == v}
    common.pop("__name__", None)
    bases: list[tuple[str, dict[str, Any], int, str | None]] = []
    for index, (labels, points) in enumerate(series, start=1):
        as_bytes = _is_bytes(labels)
        own = {
            k: v for k, v in sorted(labels.items()) if k not in common and (k != "__name__" or len(names) > 1)
        }
        body: dict[str, Any] = {"labels": own}
        if points:
            lo = min(range(len(points)), key=lambda i: (points[i][2], i))
            hi = max(range(len(points)), key=lambda i: (points[i][2], -i))
            for key, i in (("min", lo), ("max", hi), ("last", len(points) - 1)):
                body[key] = [
                    *_sample(points, i),
                    humanize(points[i][2], as_bytes),
                    hhmm_from_unix(points[i][0]),
                ]
            body["trend"] = trend(points, as_bytes)
        bases.append((f"s{index}", body, len(points), str(points[0][0]) if points else None))
    levels = []
    for k in POINT_LEVELS:
        items = []
        for (sid, body, n, first), (_, points) in zip(bases, series, strict=True):
            full = dict(body)
            if k:
                full["points"] = _downsample(points, k)
            items.append(Item(id=sid, body=full, n=n, first=first))
        levels.append(tuple(items))
    total = sum(len(p) for _, p in series)
    header: dict[str, Any] = {
        "evidence_id": evidence_id,
        "summary": f"{len(series)} series, {total} samples",
        "more": f"get_evidence({evidence_id})",
    }
    if len(names) == 1:
        header["metric"] = names[0]
    if common:
        header["common_labels"] = dict(sorted(common.items()))
    return Draft(header=header, section="series", unit="samples", levels=tuple(levels))
