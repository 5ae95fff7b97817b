"""tempo: groups (docs/compaction.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from services.compaction.model import Item
from services.compaction.render import clip
from services.compaction.tempo.parse import _MESSAGE_CHARS, _NAME_CHARS, _SERVICE_CHARS, Span
from services.compaction.tempo.render import (
    _attr_text,
    _message,
    _name_with_ranges,
    _plural,
    _Times,
    ms_range,
)


@dataclass(frozen=True)
class _Group:
    """Spans that render as one line. `head`, the earliest, is the exemplar (name, message, attributes)."""

    spans: tuple[Span, ...]
    head: Span
    shortest: int  # ns
    longest: int
    busy: int  # summed duration, ns

    @property
    def durations(self) -> str:
        return ms_range((self.shortest, self.longest))


def _make_group(spans: Sequence[Span]) -> _Group:
    durations = [s.duration for s in spans]
    return _Group(
        spans=tuple(spans),
        head=min(spans, key=lambda s: (s.start, s.order)),
        shortest=min(durations),
        longest=max(durations),
        busy=sum(durations),
    )


def _group(spans: Iterable[Span], key: Callable[[Span], Any]) -> list[_Group]:
    by_key: dict[Any, list[Span]] = {}
    for s in spans:
        by_key.setdefault(key(s), []).append(s)
    return [_make_group(members) for members in by_key.values()]


def _quoted(message: str, limit: int) -> str:
    return f' "{clip(message, limit)}"' if message else ""


def _resolutions(
    group: _Group, times: _Times, name: str, status: Sequence[str], attrs: str
) -> tuple[str, ...]:
    """A group's line, richest first: with its first start and the exemplar's attributes; with its start;
    terse (no time, the name clipped shorter). `status` is what follows the name in each of the three."""
    head = group.head
    n, svc, when, durs = (
        len(group.spans),
        clip(head.service, _SERVICE_CHARS),
        times.at(head.start),
        group.durations,
    )
    forms = (
        f"{n}× {when} {svc} {clip(name, _NAME_CHARS[0])}{status[0]} {durs}{attrs}",
        f"{n}× {when} {svc} {clip(name, _NAME_CHARS[0])}{status[1]} {durs}",
        f"{n}× {svc} {clip(name, _NAME_CHARS[1])}{status[2]} {durs}",
    )
    return tuple(dict.fromkeys(forms))


def _error_item(item_id: str, group: _Group, times: _Times) -> Item:
    """One group of error spans (same service, name and message): count, ERROR, the message verbatim,
    duration range; its first start and the exemplar's attributes at the richer forms."""
    head = group.head
    message = _message(head)
    status = [f" ERROR{_quoted(message, chars)}" for chars in _MESSAGE_CHARS]
    forms = _resolutions(group, times, head.name, status, _attr_text(head, message))
    return Item(
        id=item_id, forms=forms, n=len(group.spans), level="error", pinned=True, first=times.at(head.start)
    )


def _folded_item(item_id: str, groups: Sequence[_Group], times: _Times, by_name: bool) -> Item:
    """Error groups folded into one line (by service and name template, or by service): their spans
    and groups counted, how many messages they hold, the largest group's message as the exemplar."""
    merged = _make_group([s for g in groups for s in g.spans])
    head = groups[0].head
    n = len(merged.spans)
    messages = len({_message(s) for s in merged.spans})
    what = clip(head.service, _SERVICE_CHARS)
    counts = _plural(len(groups), "group")
    if by_name:  # one name template: `op-1..30`
        what += " " + clip(_name_with_ranges([s.name for s in merged.spans]), _NAME_CHARS[1])
        example = " e.g." if messages > 1 else ""
    else:
        counts += ", " + _plural(len({s.name for s in merged.spans}), "name")
        example = f" e.g. {clip(head.name, _NAME_CHARS[1])}"
    if messages > 1:
        counts += ", " + _plural(messages, "message")
    when = times.at(merged.head.start)
    message = _message(head)
    forms = (
        f"{n}× {when} {what} ERROR ({counts}){example}{_quoted(message, _MESSAGE_CHARS[1])} {merged.durations}",
        f"{n}× {what} ERROR ({counts}){example}{_quoted(message, _MESSAGE_CHARS[2])} {merged.durations}",
    )
    return Item(
        id=item_id,
        forms=forms,
        n=n,
        level="error",
        pinned=True,
        first=when,
        weight=0.5 if by_name else 0.25,  # one exemplar for several messages: shown at a coarser grain
        members=len(groups),
    )


def _info_item(item_id: str, group: _Group, times: _Times, trace_ns: int) -> Item:
    """One group of non-error spans (same service, same name but for its digits, shown as ranges)."""
    head = group.head
    name = _name_with_ranges([s.name for s in group.spans])
    return Item(
        id=item_id,
        forms=_resolutions(group, times, name, ("", "", ""), _attr_text(head, "")),
        n=len(group.spans),
        salience=_salience(group, trace_ns),
        first=times.at(head.start),
    )


def _salience(group: _Group, trace_ns: int) -> float:
    """The span count, up to doubled by the share of the trace the group kept busy: outside errors the
    largest groups and the slowest are the story (an N+1 loop, a slow dependency)."""
    share = min(1.0, max(0, group.busy) / trace_ns) if trace_ns > 0 else 0.0
    return round(len(group.spans) * (1.0 + share), 6)
