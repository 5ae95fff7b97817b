"""get_pod_events: a Kubernetes EventList -> groups by reason and message template, across objects.

Kubernetes already folds repeats of one reason on one object into one Event with a `count`; what
it leaves are the same story told once per pod (34 pods backing off are 34 Events). So events are
grouped by type, reason and message *template* (`log_patterns`, with the involved object's name
masked), never by object, BEFORE anything is dropped. A group keeps, exactly:

- its occurrences: the sum of each event's `count`, else `series.count`, else `deprecatedCount`,
  else 1 (events.k8s.io/v1 events carry their count in `series`);
- its first and last seen (terse: the date once, in the header's `window`). A time is RFC 3339
  in `timefmt.WINDOW`; null, "" and Go's zero time mean unset; anything else is a RawFormatError
  naming the item and the field, never a time silently left out;
- its objects, named while the budget allows, then counted (`34 pods`);
- at the richer forms one verbatim message (the earliest event's) and the ranges of the
  template's variable fields (numbers min..max, anything else "N distinct").

Salience, which orders the groups and is what the local selector ranks by:
`4·[Warning] + 2·[about the alert's service or object] + n/(n+1)` with n the occurrences. So
every Warning group comes before every other one; within a type, groups about the alert's
service/pod/deployment/node (an object named like it, or a pod of it: `checkout-api-…`) come
first; then the most occurrences. Levels: Warning -> warn, anything else -> info. Nothing is
pinned: an Event is at most a Warning, and a Warning group must not crowd out the largest
story of the same severity; a left-out group is still counted, by level, in `omitted`.
Pure and deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from services.compaction.log_patterns import WILD, mine_words, words
from services.compaction.model import Draft, Item, RawFormatError
from services.compaction.render import value_range
from services.compaction.timefmt import Clock, ns_from_rfc3339, shown

TOOL = "get_pod_events"
SECTION = "events"

_TIME_KEYS = (
    "firstTimestamp",
    "deprecatedFirstTimestamp",
    "lastTimestamp",
    "deprecatedLastTimestamp",
    "eventTime",
)
# Unset times: Kubernetes writes null; tools built on Go's time.Time write its zero time instead.
_UNSET = frozenset({"", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000Z"})
_NAME_MIN = 5  # an object name this long or longer is masked as a variable wherever a message says it
_ALERT_KEYS = ("service", "pod", "deployment", "statefulset", "daemonset", "app", "object", "node")

# Bounds: every string the digest shows is clipped, so every form and header is bounded.
_REASON_CHARS = 60
_TYPE_CHARS = 20
_KIND_CHARS = 30
_NAME_CHARS = 64
_NAMESPACE_CHARS = 40
_EXEMPLAR_CHARS = 300
_SHORT_CHARS = 120
_GIST_CHARS = 40
_NAMED_RICH = 8  # objects named at the richest form, the rest counted
_NAMED_SHORT = 2
_MAX_VARS = 4
_MAX_TYPES = 3  # types listed in the summary; the rest are summed as "other"


@dataclass(frozen=True)
class Event:
    """The facts of one Event that the digest uses."""

    index: int
    type: str
    reason: str
    message: str
    kind: str
    namespace: str
    name: str
    count: int
    first: int | None  # unix ns
    last: int | None


@dataclass
class Group:
    """One type + reason + message template, across objects."""

    type: str
    reason: str
    template: tuple[str, ...]
    events: list[Event] = field(default_factory=list)
    raws: list[list[str]] = field(default_factory=list)  # the raw words of each event's message

    @cached_property
    def n(self) -> int:
        return sum(e.count for e in self.events)

    @cached_property
    def first(self) -> int | None:
        return min((t for e in self.events for t in (e.first, e.last) if t is not None), default=None)

    @cached_property
    def last(self) -> int | None:
        return max((t for e in self.events for t in (e.first, e.last) if t is not None), default=None)

    def objects(self) -> list[tuple[str, str]]:
        """Distinct (kind, name) of the involved objects, in order of first mention."""
        return list(dict.fromkeys((e.kind, e.name) for e in self.events if e.name or e.kind))


# --- parsing ---------------------------------------------------------------------------------


def parse(raw: Any) -> list[Event]:
    """The events of an EventList (core/v1 or events.k8s.io/v1 items); RawFormatError otherwise."""
    if not isinstance(raw, dict) or not isinstance(raw.get("items"), list):
        raise RawFormatError("get_pod_events: expected a Kubernetes EventList with an 'items' list")
    if raw.get("kind") not in (None, "EventList"):
        raise RawFormatError(f"get_pod_events: expected kind 'EventList', got {raw.get('kind')!r}")
    stamps: dict[str, int] = {}
    return [_event(index, item, stamps) for index, item in enumerate(raw["items"])]


def _event(index: int, item: Any, stamps: dict[str, int]) -> Event:
    if not isinstance(item, dict) or not isinstance(item.get("reason"), str):
        raise RawFormatError(f"get_pod_events: item {index} is not an Event with a 'reason'")
    obj = item.get("involvedObject") or item.get("regarding") or {}
    if not isinstance(obj, dict):
        raise RawFormatError(f"get_pod_events: item {index} involvedObject is not an object")
    message = item.get("message") or item.get("note")
    series = item.get("series")
    series = series if isinstance(series, dict) else {}
    times = {key: _stamp(index, key, item.get(key), stamps) for key in _TIME_KEYS}
    observed = _stamp(index, "series.lastObservedTime", series.get("lastObservedTime"), stamps)
    first = _first(times["firstTimestamp"], times["deprecatedFirstTimestamp"], times["eventTime"])
    last = _first(times["lastTimestamp"], times["deprecatedLastTimestamp"], observed, times["eventTime"])
    if first is None and last is None:
        meta = item.get("metadata")
        created = meta.get("creationTimestamp") if isinstance(meta, dict) else None
        first = last = _stamp(index, "metadata.creationTimestamp", created, stamps)
    return Event(
        index=index,
        type=_text(item.get("type")),
        reason=item["reason"],
        message=message if isinstance(message, str) else "",
        kind=_text(obj.get("kind")),
        namespace=_text(obj.get("namespace")),
        name=_text(obj.get("name")),
        count=_count(index, item, series),
        first=first,
        last=last,
    )


def _first(*times: int | None) -> int | None:
    return next((t for t in times if t is not None), None)


def _stamp(index: int, key: str, value: Any, stamps: dict[str, int]) -> int | None:
    """A time field in unix ns; None when unset (absent, null, "" or Go's zero time). Anything else
    must be an RFC 3339 time in `timefmt.WINDOW`, else RawFormatError: a time that cannot be read
    is not left out silently. `stamps` caches each text (events repeat them)."""
    if value is None or (isinstance(value, str) and value in _UNSET):
        return None
    if isinstance(value, str) and value in stamps:
        return stamps[value]
    try:
        ns = ns_from_rfc3339(value, zone_required=False)
    except ValueError as exc:
        raise RawFormatError(f"get_pod_events: item {index} {key} {exc}") from None
    stamps[value] = ns
    return ns


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _count(index: int, item: Mapping[str, Any], series: Mapping[str, Any]) -> int:
    """`count`, else `series.count`, else `deprecatedCount`, else 1 (an Event is one occurrence).
    0 and null mean unset (the other API version holds it); anything else not a count is an error."""
    fast = item.get("count")
    if type(fast) is int and fast > 0:  # the common case, first
        return fast
    candidates = (
        ("count", fast),
        ("series.count", series.get("count")),
        ("deprecatedCount", item.get("deprecatedCount")),
    )
    for key, value in candidates:
        if value is None or (value == 0 and not isinstance(value, bool)):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RawFormatError(
                f"get_pod_events: item {index} {key} {shown(value)} is not a non-negative integer"
            )
        return value
    return 1


# --- grouping --------------------------------------------------------------------------------


def group(events: Sequence[Event]) -> list[Group]:
    """Groups by type, reason and message template; the object's own name is always a variable."""
    buckets: dict[tuple[str, str], list[Event]] = {}
    for event in events:
        buckets.setdefault((event.type, event.reason), []).append(event)
    out: list[Group] = []
    said: dict[str, tuple[list[str], list[str]]] = {}  # message -> its words (messages repeat)
    for (ev_type, reason), members in buckets.items():
        masked: list[tuple[str, ...]] = []
        raws: list[list[str]] = []
        for event in members:
            if event.message not in said:
                said[event.message] = words(event.message)
            m, r = said[event.message]
            if len(event.name) >= _NAME_MIN:
                m = [WILD if event.name in w else t for t, w in zip(m, r, strict=True)]
            masked.append(tuple(m))
            raws.append(r)
        for template, indexes in _templates(masked):
            g = Group(ev_type, reason, template)
            for i in indexes:
                g.events.append(members[i])
                g.raws.append(raws[i])
            out.append(g)
    return out


def _templates(masked: Sequence[tuple[str, ...]]) -> list[tuple[tuple[str, ...], Sequence[int]]]:
    """(template, member indexes) of the messages of one reason; the miner only when they differ
    (most reasons say one thing, and a thousand identical messages need no mining)."""
    if len(set(masked)) == 1:
        return [(masked[0], range(len(masked)))]
    return [(mined.template, mined.members) for mined in mine_words(masked)]


def alert_terms(alert_context: Mapping[str, Any]) -> set[str]:
    """Names the alert is about (service, pod, deployment, node...), from the context or its labels."""
    sources = [alert_context]
    if isinstance(alert_context.get("labels"), Mapping):
        sources.append(alert_context["labels"])
    return {v.lower() for s in sources for k in _ALERT_KEYS if isinstance(v := s.get(k), str) and v}


def about_alert(objects: Iterable[tuple[str, str]], terms: set[str]) -> bool:
    """An object named like the alert's service/object, a pod of it (`name-…`), or `kind/name`."""
    for kind, name in objects:
        low = name.lower()
        if low in terms or f"{kind.lower()}/{low}" in terms or any(low.startswith(t + "-") for t in terms):
            return True
    return False


def salience(g: Group, terms: set[str]) -> float:
    """Warnings first, then groups about the alert's service/object, then occurrences."""
    n = g.n
    return 4.0 * (g.type == "Warning") + 2.0 * about_alert(g.objects(), terms) + n / (n + 1)


# --- rendering -------------------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    """The text up to `limit` characters (cut at a word when one is near), `…` where it was cut."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    cut = cut if cut > limit // 2 else limit
    return text[:cut] + "…"


def plural(kind: str, n: int) -> str:
    """`1 pod`, `34 pods`, `2 ingresses`: kinds as kubectl writes them (lower case)."""
    word = clip(kind.lower(), _KIND_CHARS) or "object"
    if n != 1:
        word = (
            word + "es" if word.endswith(("ss", "x", "ch")) else
            word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else
            word if word.endswith("s") else word + "s"
        )  # fmt: skip
    return f"{n} {word}"


def counted(objects: Sequence[tuple[str, str]]) -> str:
    """`34 pods`, `3 pods, 1 node`: the objects counted by kind (at most three kinds)."""
    by_kind = Counter(kind for kind, _ in objects)
    parts = [plural(kind, n) for kind, n in sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))]
    if len(parts) > 3:
        rest = sum(n for _, n in sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))[3:])
        parts = [*parts[:3], plural("object", rest)]
    return ", ".join(parts)


def named(objects: Sequence[tuple[str, str]], most: int) -> str:
    """`pod/a, pod/b +32 pods`: the first `most` objects named, the rest counted."""
    shown = [f"{clip(k.lower(), _KIND_CHARS)}/{clip(n, _NAME_CHARS)}" if k else clip(n, _NAME_CHARS)
             for k, n in objects[:most]]  # fmt: skip
    rest = objects[most:]
    return ", ".join(shown) + (f" +{counted(rest)}" if rest else "")


def ranges(g: Group) -> list[str]:
    """`process 4811..4813`, `user 5 distinct`: each variable field that varies, named by the constant
    word before it (`pod+1` for the second field after `pod`); numbers as their raw min and max,
    anything else as a distinct count. A field holding the event's own object name is left out:
    the objects are already named or counted."""
    out = []
    for pos, word in enumerate(g.template):
        if not word.endswith(WILD):
            continue
        values = [(r[pos], e.name) for r, e in zip(g.raws, g.events, strict=True) if pos < len(r)]
        distinct = {v for v, _ in values}
        if len(distinct) < 2 or all(len(name) >= _NAME_MIN and name in v for v, name in values):
            continue
        out.append(f"{_field_name(g.template, pos)} {value_range(distinct)}")
        if len(out) >= _MAX_VARS:
            break
    return out


def _field_name(template: Sequence[str], pos: int) -> str:
    for back, word in enumerate(reversed(template[:pos])):
        if not word.endswith(WILD) and word.strip("."):
            return clip(word.strip("."), 24) + (f"+{back}" if back else "")
    return f"#{pos}"


def forms(g: Group, clock: Clock | None) -> tuple[str, ...]:
    """The group's renderings, richest first; each starts `N× [first–last] [Type] Reason`, so
    every form keeps its count, severity and reason."""
    tag = "" if g.type in ("Normal", "") else f" {clip(g.type, _TYPE_CHARS)}"
    reason = clip(g.reason, _REASON_CHARS)
    first, last = g.first, g.last
    times = f" {clock.span(first, last)}" if clock and first is not None and last is not None else ""
    head = f"{g.n}×{times}{tag} {reason}"
    exemplar = min(g.events, key=lambda e: (e.first is None, e.first or 0, e.index)).message.strip()
    objects = g.objects()
    span = ranges(g)
    count = counted(objects)
    candidates = [
        line(head, named(objects, _NAMED_RICH), clip(exemplar, _EXEMPLAR_CHARS))
        + (f" [{'; '.join(span)}]" if span else ""),
        line(head, named(objects, _NAMED_SHORT), clip(exemplar, _SHORT_CHARS)),
        line(head, named(objects, 1), clip(exemplar, _GIST_CHARS)),
        line(head, count, clip(exemplar, _GIST_CHARS)),
        line(head, count, ""),
        line(f"{g.n}×{tag} {reason}", count, ""),
    ]
    return tuple(dict.fromkeys(candidates))


def line(head: str, objects: str, message: str) -> str:
    """`head objects: message`, leaving out what is empty."""
    text = f"{head} {objects}" if objects else head
    return f"{text}: {message}" if message else text


def by_type(groups: Sequence[Group]) -> str:
    """`Warning 4/46, Normal 6/15`: groups/occurrences per type, most severe first (at most three)."""
    tally: dict[str, list[int]] = {}
    for g in groups:
        t = tally.setdefault(clip(g.type, _TYPE_CHARS) or "untyped", [0, 0])
        t[0] += 1
        t[1] += g.n
    order = sorted(tally, key=lambda t: (t != "Warning", t != "Normal", t))
    if len(order) > _MAX_TYPES:
        other = [sum(tally[t][i] for t in order[_MAX_TYPES - 1 :]) for i in (0, 1)]
        order = order[: _MAX_TYPES - 1]
        return ", ".join(f"{t} {tally[t][0]}/{tally[t][1]}" for t in order) + f", other {other[0]}/{other[1]}"
    return ", ".join(f"{t} {tally[t][0]}/{tally[t][1]}" for t in order)


def objects_line(events: Sequence[Event]) -> str | None:
    """`4 pods in shop`: every involved object counted, and their namespace when they share one."""
    objects = list(dict.fromkeys((e.kind, e.namespace, e.name) for e in events if e.name or e.kind))
    if not objects:
        return None
    text = counted([(k, n) for k, _, n in objects])
    spaces = {ns for _, ns, _ in objects}
    if len(spaces) == 1 and (only := next(iter(spaces))):
        return f"{text} in {clip(only, _NAMESPACE_CHARS)}"
    return f"{text} in {len(spaces)} namespaces" if len(spaces) > 1 else text


def headers(
    events: Sequence[Event], groups: Sequence[Group], clock: Clock | None, evidence_id: str
) -> tuple[dict[str, Any], ...]:
    """The fixed fields, richest first: the evidence id once, the totals (by type), the window (the
    date said once for the items' terse times), the objects. The last is small and bounded."""
    short = f"{_many(len(events), 'event')}, {sum(g.n for g in groups)} occurrences in {_many(len(groups), 'group')}"
    summary = f"{short} ({by_type(groups)})" if groups else short
    window = {"window": clock.window()} if clock is not None else {}
    objects = objects_line(events)
    out = (
        {"evidence": evidence_id, "summary": summary, **window, **({"objects": objects} if objects else {})},
        {"evidence": evidence_id, "summary": summary, **window},
        {"evidence": evidence_id, "summary": short, **window},
        {"evidence": evidence_id, "summary": short},
    )
    unique = dict.fromkeys(tuple(h.items()) for h in out)  # equal headers collapse
    return tuple(dict(h) for h in unique)


def _many(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    events = parse(raw)
    groups = group(events)
    terms = alert_terms(alert_context)
    scored = sorted(
        ((salience(g, terms), g) for g in groups),
        key=lambda sg: (
            -sg[0],
            sg[1].first is None,
            sg[1].first or 0,
            sg[1].reason,
            sg[1].type,
            sg[1].template,
        ),
    )
    times = [t for e in events for t in (e.first, e.last) if t is not None]
    clock = Clock(min(times), max(times)) if times else None
    items = tuple(
        Item(
            id=f"g{index}",
            forms=forms(g, clock),
            n=g.n,
            level="warn" if g.type == "Warning" else "info",
            salience=score,
            first=clock.at(g.first) if clock and g.first is not None else None,
        )
        for index, (score, g) in enumerate(scored, start=1)
    )
    return Draft(
        headers=headers(events, groups, clock, evidence_id),
        section=SECTION,
        kind="groups",
        unit="occurrences",
        items=items,
    )
