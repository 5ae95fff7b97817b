"""tempo: the draft (docs/compaction.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from services.compaction.model import Draft, Item
from services.compaction.tempo.groups import _error_item, _folded_item, _Group, _group, _info_item
from services.compaction.tempo.headers import _headers
from services.compaction.tempo.parse import Span, _children, _depths, _orphans, critical_path, parse
from services.compaction.tempo.path import _path_item
from services.compaction.tempo.render import _message, _template, _Times
from services.compaction.timefmt import Clock


def _error_groups(spans: Sequence[Span], children: Mapping[str, list[Span]]) -> list[_Group]:
    """Error spans by (service, name, message): the largest first, then those holding an error with no
    error below it (where a failure started, not where it was passed up), deepest first, earliest."""
    depth = _depths(spans, children)
    origin = {s.order for s in spans if s.error and not any(c.error for c in children.get(s.span_id, ()))}
    groups = _group((s for s in spans if s.error), lambda s: (s.service, s.name, _message(s)))

    def key(g: _Group) -> tuple[Any, ...]:
        return (
            -len(g.spans),
            not any(s.order in origin for s in g.spans),
            -max(depth.get(s.order, 0) for s in g.spans),
            g.head.start,
            g.head.order,
        )

    return sorted(groups, key=key)


def _coarser(
    fine: Sequence[_Group], pinned: Callable[[Sequence[Item]], tuple[Item, ...]], times: _Times
) -> tuple[tuple[Item, ...], ...]:
    """The error groups folded by service and name template, then by service, largest first (each
    variant covers every error span); a variant is offered only where it folds something."""
    variants: list[tuple[Item, ...]] = []
    size = len(fine)
    position = {id(g): i for i, g in enumerate(fine)}
    for prefix, by_name in (("n", True), ("s", False)):
        folded: dict[Any, list[_Group]] = {}
        for g in fine:
            folded.setdefault(
                (g.head.service, _template(g.head.name)) if by_name else g.head.service, []
            ).append(g)
        if len(folded) >= size:
            continue
        size = len(folded)
        ordered = sorted(
            folded.values(), key=lambda gs: (-sum(len(g.spans) for g in gs), position[id(gs[0])])
        )
        items = [
            _folded_item(f"{prefix}{i}", groups, times, by_name)
            if len(groups) > 1
            else _error_item(f"{prefix}{i}", groups[0], times)
            for i, groups in enumerate(ordered, start=1)
        ]
        variants.append(pinned(items))
    return tuple(variants)


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    spans = parse(raw)
    children = _children(spans)
    path = critical_path(spans, children)
    clock = Clock(min(s.start for s in spans), max(max(s.end, s.start) for s in spans))
    times = _Times(clock)
    errors = _error_groups(spans, children)
    trace_ns = clock.last_ns - clock.first_ns
    info = _group((s for s in spans if not s.error), lambda s: (s.service, _template(s.name)))
    info_items = sorted(
        (_info_item(f"g{i}", g, times, trace_ns) for i, g in enumerate(info, start=1)),
        key=lambda it: (-it.salience, it.first or "", int(it.id[1:])),
    )
    error_items = [_error_item(f"e{i}", g, times) for i, g in enumerate(errors, start=1)]
    pinned = _with_path(_path_item(path, "info" if info_items else "error"), bool(info_items))
    return Draft(
        headers=_headers(spans, path[0], len(_orphans(spans)), clock, evidence_id),
        section="groups",
        kind="groups",
        unit="spans",
        items=(*pinned(error_items), *info_items),
        coarser=_coarser(errors, pinned, times),
    )


def _with_path(path_item: Item, after_errors: bool) -> Callable[[Sequence[Item]], tuple[Item, ...]]:
    """Where the path goes among the pinned items. After the errors (they are the facts; the root's
    name and duration are in the summary anyway), at the info level: left out, it goes with every
    info group, so the omitted tally never shows an empty level for it (it counts no spans). A trace
    of errors only has no info level: there it goes first, and is left out only with everything."""
    if after_errors:
        return lambda errors: (*errors, path_item)
    return lambda errors: (path_item, *errors)
