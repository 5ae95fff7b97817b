"""prometheus: the shared parts (docs/compaction.md)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from services.compaction.model import RawFormatError
from services.compaction.timefmt import ns_from_unix_seconds, shown

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
