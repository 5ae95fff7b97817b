"""prometheus: groups of quiet series (docs/compaction.md)."""

from __future__ import annotations

from collections.abc import Sequence

from services.compaction.prometheus.parse import _DONE, _LABEL_CHARS, _MEMBERS, _NAME_CHARS, QUIET, _clip
from services.compaction.prometheus.render import _Ctx, _nonfinite, _range
from services.compaction.prometheus.segments import _segments
from services.compaction.prometheus.stats import _flat, _Series


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


def _member_names(members: Sequence[_Series], keys: Sequence[str]) -> str:
    if not keys:
        return ""
    key = keys[0]
    values = [m.labels.get(key, "") for m in members]
    cut = len(_prefix(values)) if len(set(values)) > 1 else 0
    shown = [_clip(v[cut:] or v, 24) for v in values[:_MEMBERS]]
    more = f" +{len(values) - _MEMBERS}" if len(values) > _MEMBERS else ""
    return f"{key}: {', '.join(shown)}{more}"
