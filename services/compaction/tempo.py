"""query_tempo: a trace in OTLP JSON (`batches` or `resourceSpans`) -> totals, critical path, span groups.

Every span lands in exactly one group, so that kept + omitted = the trace's totals (invariant 7):
error spans (status code 2 / STATUS_CODE_ERROR) are grouped by service, span name and status
message and pinned; the other spans are grouped by service and name, digits masked (`reserve
sku-1000`..`sku-1407` is one group). A retry storm of 40 identical failures is therefore ONE
line: `40× checkout-api payment.charge ERROR "upstream timeout" 101..140ms`, with its count, its
duration range and its first start; one verbatim message per group, attributes only at the
richest form.

The critical path runs from the root, each step to the child that ends last (the one its parent
waited for). It is one pinned item counting no spans (its spans are counted in their groups),
at three resolutions: every step with its ms; the root, the steps that hold the path longest
and the deepest; the root and the deepest.

Durations are derived from the raw nanoseconds and shown in ms with the digits that matter
(0.1 ms from 1 ms, 1 µs below, whole ms from 10 s); times are terse (`Clock`): the date once
in `window`, HH:MM:SS.mmm per group. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemas.tokens import count_value_tokens
from services.compaction.model import Draft, Item, RawFormatError
from services.compaction.render import clip
from services.compaction.timefmt import Clock, ns_from_integer

TOOL = "query_tempo"
_ERROR_CODES = frozenset({2, "2", "STATUS_CODE_ERROR", "ERROR"})
# Infrastructure attributes that repeat on every span of a service: left in the raw (get_evidence).
_SKIP_ATTRS = frozenset(
    {
        "code.filepath",
        "code.function",
        "code.lineno",
        "net.host.name",
        "net.host.port",
        "net.peer.port",
        "thread.id",
        "thread.name",
        "deployment.environment",
        "http.flavor",
        "http.user_agent",
        "otel.library.name",
    }
)
_SPAN_KEYS = ("spanId", "startTimeUnixNano", "endTimeUnixNano")
_DIGITS = re.compile(r"[0-9]+")
_ARROW = " → "
_NAME_CHARS = (120, 60)  # a span name at the richer forms, at the tersest
_SERVICE_CHARS = 40
_MESSAGE_CHARS = (400, 160, 60)  # an error message at each form
_ATTR_CHARS = 80
_MAX_ATTRS = 12
_FULL_PATH_STEPS = 100  # the full path shows this many steps, the middle ones counted
_HEAVY_SHARE = 10  # a path step holding >= 1/10 of the root's time is shown at the middle resolution
_HEADER_NAME_TOKENS = 16  # the root's name in the last (bounded) header
_SERVICES_SHOWN = 8


@dataclass(frozen=True)
class Span:
    span_id: str
    parent: str
    service: str
    name: str
    start: int
    end: int
    error: bool
    status: str
    attrs: tuple[tuple[str, str], ...]
    order: int

    @property
    def duration(self) -> int:
        return self.end - self.start


def _attr_value(value: Any) -> str:
    if not isinstance(value, dict):
        return str(value)
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key in value:
            return str(value[key])
    return str(value)


def _attrs(raw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(raw, list):
        for attr in raw:
            if isinstance(attr, dict) and "key" in attr:
                out[str(attr["key"])] = _attr_value(attr.get("value"))
    return out


def _is_error(code: Any) -> bool:
    return isinstance(code, int | str) and code in _ERROR_CODES


def _list(value: Any) -> list[Any]:
    """An optional list field: absent or null is empty; any other non-list is not OTLP."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError
    return value


def parse(raw: Any) -> list[Span]:
    if isinstance(raw, dict) and isinstance(raw.get("trace"), dict):
        raw = raw["trace"]
    if not isinstance(raw, dict):
        raise RawFormatError(
            "query_tempo: expected an OTLP JSON trace object with 'batches' or 'resourceSpans'"
        )
    batches = raw.get("batches", raw.get("resourceSpans"))
    if not isinstance(batches, list):
        raise RawFormatError(
            "query_tempo: expected an OTLP JSON trace with a 'batches' or 'resourceSpans' list"
        )
    spans: list[Span] = []
    for b_index, batch in enumerate(batches):
        if not isinstance(batch, dict):
            raise RawFormatError(f"query_tempo: batch {b_index} is not an object")
        resource = batch.get("resource")
        service = _attrs(resource.get("attributes") if isinstance(resource, dict) else None).get(
            "service.name", "?"
        )
        try:
            scopes = _list(batch.get("scopeSpans", batch.get("instrumentationLibrarySpans")))
            raw_spans = [s for scope in scopes if isinstance(scope, dict) for s in _list(scope.get("spans"))]
        except TypeError:
            raise RawFormatError(
                f"query_tempo: batch {b_index} scopeSpans is not a list of span lists"
            ) from None
        for span in raw_spans:
            if not isinstance(span, dict) or not all(k in span for k in _SPAN_KEYS):
                raise RawFormatError(
                    f"query_tempo: batch {b_index} has a span without spanId/startTimeUnixNano/endTimeUnixNano"
                )
            span_id = str(span["spanId"])
            try:
                start = ns_from_integer(span["startTimeUnixNano"])
                end = ns_from_integer(span["endTimeUnixNano"])
            except ValueError as exc:
                raise RawFormatError(
                    f"query_tempo: batch {b_index} span {span_id[:40]!r} time {exc}"
                ) from None
            status = span.get("status") or {}
            if not isinstance(status, dict):
                raise RawFormatError(f"query_tempo: batch {b_index} has a span whose status is not an object")
            attrs = _attrs(span.get("attributes"))
            events = span.get("events")
            for event in events if isinstance(events, list) else []:
                if isinstance(event, dict) and event.get("name") == "exception":
                    for key, value in _attrs(event.get("attributes")).items():
                        attrs.setdefault(key, value)
            kept = tuple((k, v) for k, v in attrs.items() if k not in _SKIP_ATTRS)
            spans.append(
                Span(
                    span_id=span_id,
                    parent=str(span.get("parentSpanId") or ""),
                    service=str(service),
                    name=str(span.get("name", "")),
                    start=start,
                    end=end,
                    error=_is_error(status.get("code", 0)),
                    status=str(status.get("message") or ""),
                    attrs=kept,
                    order=len(spans),
                )
            )
    if not spans:
        raise RawFormatError("query_tempo: the trace has no spans")
    return spans


def _children(spans: Sequence[Span]) -> dict[str, list[Span]]:
    children: dict[str, list[Span]] = {}
    for s in spans:
        children.setdefault(s.parent, []).append(s)
    return children


def _orphans(spans: Sequence[Span]) -> list[Span]:
    """Spans without a parent in the trace: the root, and any span whose parent was not returned."""
    ids = {s.span_id for s in spans}
    return [s for s in spans if not s.parent or s.parent not in ids]


def _roots(spans: Sequence[Span]) -> list[Span]:
    """Where a walk down the tree may start: the orphans, else (a raw made only of parent cycles)
    every span, so that the path still starts somewhere."""
    return _orphans(spans) or list(spans)


def critical_path(spans: list[Span], children: Mapping[str, list[Span]] | None = None) -> list[Span]:
    """Root first; each next span is the child that ended last (ties: the earliest in the raw).
    A span is visited once, so parent cycles and duplicate ids in a broken raw end the path."""
    children = _children(spans) if children is None else children
    node = min(_roots(spans), key=lambda s: (s.start, -s.end, s.order))
    path = [node]
    seen = {node.order}
    while True:
        nexts = [c for c in children.get(node.span_id, ()) if c.order not in seen]
        if not nexts:
            return path
        node = max(nexts, key=lambda s: (s.end, -s.order))
        path.append(node)
        seen.add(node.order)


def _depths(spans: Sequence[Span], children: Mapping[str, list[Span]]) -> dict[int, int]:
    """Depth of every span reachable from a root (by raw order); breadth first, each span once."""
    depth = {s.order: 0 for s in _roots(spans)}
    frontier = [s for s in spans if s.order in depth]
    while frontier:
        nxt = []
        for s in frontier:
            for c in children.get(s.span_id, ()):
                if c.order not in depth:
                    depth[c.order] = depth[s.order] + 1
                    nxt.append(c)
        frontier = nxt
    return depth


# --- rendering ----------------------------------------------------------------------


def ms(ns: int) -> str:
    """Nanoseconds as ms with the digits that matter: `411.8`, `0.012`, `183457` (rounded half up)."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns >= 10_000_000_000:
        unit, decimals = 1_000_000, 0
    elif ns >= 1_000_000:
        unit, decimals = 100_000, 1
    else:
        unit, decimals = 1_000, 3
    whole, frac = divmod((ns + unit // 2) // unit, 10**decimals)
    text = f"{whole}.{frac:0{decimals}d}".rstrip("0").rstrip(".") if decimals else str(whole)
    return sign + text


def ms_range(durations: Iterable[int]) -> str:
    """`101..140ms`, or `411.8ms` when they are all one value at this resolution."""
    values = list(durations)
    lo, hi = ms(min(values)), ms(max(values))
    return f"{lo}ms" if lo == hi else f"{lo}..{hi}ms"


def _json_tokens(text: str) -> int:
    """Tokens of a string as it appears inside the digest's JSON (quotes and escapes included)."""
    return count_value_tokens([text])


def _clip_tokens(text: str, tokens: int) -> str:
    """The longest clip of `text` that costs at most `tokens` inside the digest (bounded headers)."""
    if _json_tokens(text) <= tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _json_tokens(clip(text, mid)) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return clip(text, lo)


def _template(name: str) -> tuple[str, ...]:
    """A span name with its digit runs masked: the key of a group of non-error spans."""
    return tuple(_DIGITS.split(name))


def _name_with_ranges(names: Sequence[str]) -> str:
    """`serialize line_item[0..15]`: one name, each digit run that varies across the group as min..max."""
    first = names[0]
    if len(names) == 1:
        return first
    parts = _DIGITS.split(first)
    slots = [_DIGITS.findall(n) for n in names]
    out = [parts[0]]
    for i, part in enumerate(parts[1:]):
        values = {s[i] for s in slots if i < len(s)}
        lo, hi = min(values, key=_numeric), max(values, key=_numeric)
        out.append(lo if lo == hi else f"{lo}..{hi}")
        out.append(part)
    return "".join(out)


def _numeric(digits: str) -> tuple[int, str]:
    """Numeric order of a digit run without int() (a run may be longer than int() accepts)."""
    return len(digits.lstrip("0")), digits


def _attr_text(span: Span, message: str) -> str:
    """` {k=v, ...}`: the exemplar span's attributes (the richest form only), each clipped."""
    attrs = [(k, v) for k, v in span.attrs if not (k == "exception.message" and v == message)]
    if not attrs:
        return ""
    shown = ", ".join(f"{clip(k, _SERVICE_CHARS)}={clip(v, _ATTR_CHARS)}" for k, v in attrs[:_MAX_ATTRS])
    more = f", +{len(attrs) - _MAX_ATTRS} more" if len(attrs) > _MAX_ATTRS else ""
    return f" {{{shown}{more}}}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _message(span: Span) -> str:
    """The status message, else the exception event's message: what the span said went wrong."""
    return span.status or dict(span.attrs).get("exception.message", "")


class _Times:
    """`Clock.at(ns, millis=True)`, each second formatted once: a trace's thousands of spans fall in
    a few seconds. Equal to the Clock's own rendering (tests check it)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._seconds: dict[int, str] = {}

    def at(self, ns: int) -> str:
        second, frac = divmod(ns, 1_000_000_000)
        head = self._seconds.get(second)
        if head is None:
            head = self._seconds[second] = self.clock.at(second * 1_000_000_000)
        return f"{head}.{frac // 1_000_000:03d}"


# --- groups -------------------------------------------------------------------------


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


def _error_item(item_id: str, group: _Group, times: _Times) -> Item:
    """One group of error spans (same service, name and message): count, ERROR, the message verbatim,
    duration range; its first start and the exemplar's attributes at the richer forms."""
    head = group.head
    n = len(group.spans)
    svc = clip(head.service, _SERVICE_CHARS)
    name = clip(head.name, _NAME_CHARS[0])
    message = _message(head)
    when = times.at(head.start)
    durs = group.durations
    forms = (
        f"{n}× {when} {svc} {name} ERROR{_quoted(message, _MESSAGE_CHARS[0])} {durs}{_attr_text(head, message)}",
        f"{n}× {when} {svc} {name} ERROR{_quoted(message, _MESSAGE_CHARS[1])} {durs}",
        f"{n}× {svc} {clip(head.name, _NAME_CHARS[1])} ERROR{_quoted(message, _MESSAGE_CHARS[2])} {durs}",
    )
    return Item(id=item_id, forms=tuple(dict.fromkeys(forms)), n=n, level="error", pinned=True, first=when)


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
    n = len(group.spans)
    svc = clip(head.service, _SERVICE_CHARS)
    name = _name_with_ranges([s.name for s in group.spans])
    when = times.at(head.start)
    durs = group.durations
    forms = (
        f"{n}× {when} {svc} {clip(name, _NAME_CHARS[0])} {durs}{_attr_text(head, '')}",
        f"{n}× {when} {svc} {clip(name, _NAME_CHARS[0])} {durs}",
        f"{n}× {svc} {clip(name, _NAME_CHARS[1])} {durs}",
    )
    return Item(
        id=item_id,
        forms=tuple(dict.fromkeys(forms)),
        n=n,
        salience=_salience(group, trace_ns),
        first=when,
    )


def _salience(group: _Group, trace_ns: int) -> float:
    """The span count, up to doubled by the share of the trace the group kept busy: outside errors the
    largest groups and the slowest are the story (an N+1 loop, a slow dependency)."""
    share = min(1.0, max(0, group.busy) / trace_ns) if trace_ns > 0 else 0.0
    return round(len(group.spans) * (1.0 + share), 6)


# --- the critical path ----------------------------------------------------------------


def _steps(path: Sequence[Span], shown: Sequence[int], name_chars: int, mark_errors: bool) -> str:
    """The shown steps of the path, `…k` where k steps are skipped; a step's service where it changes."""
    out: list[str] = []
    last_service: str | None = None
    previous = -1
    for i in shown:
        if i != previous + 1:
            out.append(f"…{i - previous - 1}")
        s = path[i]
        svc = f"{clip(s.service, _SERVICE_CHARS)} " if s.service != last_service else ""
        flag = " ERROR" if mark_errors and s.error else ""
        out.append(f"{svc}{clip(s.name, name_chars)} {ms(s.duration)}ms{flag}")
        last_service = s.service
        previous = i
    return _ARROW.join(out)


def _bounded(indexes: Sequence[int]) -> list[int]:
    """At most `_FULL_PATH_STEPS` of the steps: the first ones and the last ones, the middle counted."""
    if len(indexes) <= _FULL_PATH_STEPS:
        return list(indexes)
    half = _FULL_PATH_STEPS // 2
    return [*indexes[:half], *indexes[-half:]]


def _path_item(path: Sequence[Span], level: str) -> Item:
    """The critical path at three resolutions: every step; the root, the steps that hold the path
    longest (their time minus the next step's, at least a tenth of the root's) and the deepest; the
    root and the deepest. It counts no spans (n=0): they are counted in their groups."""
    last = len(path) - 1
    root_ns = path[0].duration
    held = [s.duration - (path[i + 1].duration if i < last else 0) for i, s in enumerate(path)]
    heavy = [
        i for i in range(len(path)) if i in (0, last) or (root_ns > 0 and held[i] * _HEAVY_SHARE >= root_ns)
    ]
    head = f"critical path ({len(path)} spans): "
    forms = (
        head + _steps(path, _bounded(range(len(path))), _NAME_CHARS[0], True),
        head + _steps(path, _bounded(heavy), _NAME_CHARS[1], False),
        head + _steps(path, sorted({0, last}), _NAME_CHARS[1], False),
    )
    return Item(id="path", forms=tuple(dict.fromkeys(forms)), n=0, level=level, pinned=True, members=0)


# --- headers --------------------------------------------------------------------------


def _headers(
    spans: Sequence[Span], root: Span, roots: int, clock: Clock, evidence_id: str
) -> tuple[dict[str, Any], ...]:
    """Totals at three resolutions. The last is bounded whatever the raw: the root's name is clipped by
    tokens and every other part is a number (the evidence id is ours, at most 64 characters)."""
    per_service = Counter(s.service for s in spans)
    errors_per_service = Counter(s.service for s in spans if s.error)
    errors = sum(errors_per_service.values())
    counts = ", ".join(
        (_plural(len(spans), "span"), _plural(len(per_service), "service"), _plural(errors, "error span"))
    )
    extra = f"; {roots} roots" if roots != 1 else ""
    duration = f"{ms(root.duration)}ms"
    root_name = clip(root.name, _NAME_CHARS[0])
    summary = f"{counts}; root {clip(root.service, _SERVICE_CHARS)} {root_name} {duration}{extra}"
    terse = f"{counts}; root {_clip_tokens(root.name, _HEADER_NAME_TOKENS)} {duration}{extra}"
    ranked = sorted(per_service, key=lambda s: (-per_service[s], s))
    services = ", ".join(
        f"{clip(s, _SERVICE_CHARS)} {per_service[s]}"
        + (f" ({errors_per_service[s]} error)" if errors_per_service[s] else "")
        for s in ranked[:_SERVICES_SHOWN]
    )
    if len(ranked) > _SERVICES_SHOWN:
        services += f", +{len(ranked) - _SERVICES_SHOWN} more"
    window = clock.window()
    return (
        {"evidence": evidence_id, "summary": summary, "window": window, "services": services},
        {"evidence": evidence_id, "summary": summary, "window": window},
        {"evidence": evidence_id, "summary": terse},
    )


# --- the draft ------------------------------------------------------------------------


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
