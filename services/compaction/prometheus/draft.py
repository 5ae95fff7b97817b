"""prometheus: the draft (docs/compaction.md)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from services.compaction.model import Draft, Item
from services.compaction.prometheus.groups import _group_forms, _prefix, _shape
from services.compaction.prometheus.parse import (
    _ALERT_KEYS,
    _HEADER_LABELS_CHARS,
    _ID_KEYS,
    _LABEL_CHARS,
    _LABELS_CHARS,
    _NAME_CHARS,
    _SHORT_LABELS,
    _SHORT_VALUE,
    ALONE,
    QUIET,
    Point,
    _clip,
    _parse,
)
from services.compaction.prometheus.render import _Ctx, _labels_text, _nonfinite, _series_forms, _Times
from services.compaction.prometheus.salience import _score
from services.compaction.prometheus.stats import _Series, _stats, _still


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
        filler=_filler([s]),
    )


def _filler(members: Sequence[_Series]) -> bool:
    """Series that never move and that the alert does not name: a line of them is worth less than
    any series that changes (`Item.filler`), whatever their salience as a standing level."""
    return all(_still(m) and not m.alerted for m in members)


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
        filler=_filler(members),
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
                filler=_filler(members),
            )
        )
    return out


def _order(items: Sequence[Item]) -> tuple[Item, ...]:
    """The selector's order (salience, then warn before info, then earliest, then id), so that the
    plain fit and a selection keep the same series."""
    return tuple(sorted(items, key=lambda it: (-it.salience, it.level != "warn", it.first or "", it.id)))
