"""Which streams a log pattern came from, said compactly: `app=kafka`, `3 of 3 pods`, `pod x only`.

Why: a Loki answer for `{namespace="prod"}` holds one stream per pod and container, and the first
question about any error is whether it is one pod or all of them, the app or its database. So
every pattern says over which label values it spans, and the labels every stream of the answer
shares are said once, in the digest's header.

Two kinds of label that vary across an answer:
- the *identity* label, which names one source (`pod`, `instance`, `host`, ... ; else the label
  with the most values): a pattern says how many of the sources in its scope it came from, and
  names them when it is one or two (`pod checkout-api-7f9c-x2 only`, `2 of 3 pods: a, b`);
- the *grouping* labels (`app`, `container`, `job`, ...): a pattern names their values when it
  holds only some of the answer's (`app=kafka`), and nothing when it spans them all.
Labels that came from a line's structured metadata (Loki >= 3) and level labels describe lines,
not sources, and are left out (`LINE_KEYS`, and the `hidden` keys a caller names). Pure and deterministic.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence

# Labels that name one source, most specific first.
IDENTITY_KEYS = (
    "pod",
    "pod_name",
    "k8s_pod_name",
    "instance",
    "host",
    "hostname",
    "node",
    "container_id",
    "filename",
)
# Labels that describe a line, not where it came from.
LINE_KEYS = frozenset(
    ("detected_level", "level", "severity", "lvl", "log_level", "stream")
)  # stream: stdout/stderr
_NAMED = 2  # sources named outright when a pattern comes from at most this many
_VALUES_SHOWN = 2  # grouping-label values named outright
_VALUE_CHARS = 48


# Grouping labels, the most telling first; labels that split the streams alike (`app`, `container`,
# `service_name` of one deployment) are said once, by the first of them.
GROUPING_ORDER = ("app", "app_kubernetes_io_name", "service_name", "service", "job", "container", "component")


def _grouping_order(key: str) -> tuple[int, str]:
    return (GROUPING_ORDER.index(key) if key in GROUPING_ORDER else len(GROUPING_ORDER), key)


def _distinct_partitions(
    keys: Sequence[str], streams: Sequence[Mapping[str, str]], used: Sequence[int]
) -> list[str]:
    """`keys` without those that split the streams exactly as an earlier one does."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for key in keys:
        ids: dict[str, int] = {}
        split = tuple(ids.setdefault(streams[i].get(key, ""), len(ids)) for i in used)
        if split not in seen:
            seen.add(split)
            out.append(key)
    return out


def _plural(key: str) -> str:
    return "pods" if key in ("pod", "pod_name", "k8s_pod_name") else f"{key}s"


def _singular(key: str) -> str:
    return "pod" if key in ("pod", "pod_name", "k8s_pod_name") else key


class StreamSet:
    """The answer's streams as a whole: what they share, and how one pattern's streams stand in it."""

    def __init__(
        self, streams: Sequence[Mapping[str, str]], used: Collection[int], hidden: Collection[str] = ()
    ):
        self.streams = streams
        self.used = sorted(used)
        keys = sorted({k for i in self.used for k in streams[i] if k not in hidden and k not in LINE_KEYS})
        values = {k: {streams[i].get(k, "") for i in self.used} for k in keys}
        self.common = {k: next(iter(v)) for k, v in values.items() if len(v) == 1}
        varying = [k for k in keys if len(values[k]) > 1]
        # a source's name is on every stream; a label some streams lack only groups them
        named = [k for k in varying if "" not in values[k]]
        preferred = [k for k in IDENTITY_KEYS if k in named]
        self.identity = (
            preferred[0] if preferred else max(named, key=lambda k: (len(values[k]), k), default=None)
        )
        self.grouping = _distinct_partitions(
            sorted((k for k in varying if k != self.identity), key=_grouping_order), streams, self.used
        )
        self.values = values

    def header(self) -> str | None:
        """`4 streams {app=checkout-api, namespace=prod; pod: 4 values, container: 2 values}`, or None
        for one stream (its labels are the query's own selector)."""
        if len(self.used) < 2:
            return None
        said = [f"{k}={v[:_VALUE_CHARS]}" for k, v in self.common.items()]
        counted = [
            f"{k}: {len(self.values[k])} values" for k in [*self.grouping, *[self.identity or ""]] if k
        ]
        return (
            f"{len(self.used)} streams {{{'; '.join(p for p in (', '.join(said), ', '.join(counted)) if p)}}}"
        )

    def attribution(self, members: Collection[int]) -> str:
        """What a pattern whose lines came from the streams `members` spans: `` when the answer is
        one stream, else `app=kafka; 2 of 3 pods: kafka-0, kafka-2` (the parts that say something)."""
        if len(self.used) < 2:
            return ""
        mine = sorted(set(members))
        parts: list[str] = []
        named_values: list[str] = []  # the one value each part names ("\0": none)
        scope = list(self.used)
        for key in self.grouping:
            held = sorted({self.streams[i].get(key, "") for i in mine})
            if len(held) == len(self.values[key]):
                continue
            scope = [i for i in scope if self.streams[i].get(key, "") in held]
            if len(held) <= _VALUES_SHOWN:
                parts.append(f"{key}={','.join(v[:_VALUE_CHARS] or '∅' for v in held)}")
                named_values.append(held[0] if len(held) == 1 and held[0] else "\0")
            else:
                parts.append(f"{key}: {len(held)} of {len(self.values[key])}")
                named_values.append("\0")
        if self.identity is not None:
            sources = self._sources(self.identity, mine, scope)
            if sources and named_values:
                names = sources.split(": ", 1)[-1].removeprefix(f"{_singular(self.identity)} ")
                # `app=checkout-api; pod checkout-api-7f9c-x2 only`: the pod's name says the app
                parts = [p for p, v in zip(parts, named_values, strict=True) if not names.startswith(v)]
            parts.append(sources)
        return "; ".join(p for p in parts if p)

    def _sources(self, key: str, mine: Sequence[int], scope: Sequence[int]) -> str:
        """Nothing when the pattern spans every source in its scope (or the scope has one source:
        the grouping labels already name it); else which or how many: `pod x only`, `2 of 4 pods:
        checkout-api-7d9f8b6c5-{m8p3z,x2k4q}`, `3 of 8 pods`."""
        held = sorted({self.streams[i].get(key, "") for i in mine})
        among = {self.streams[i].get(key, "") for i in scope}
        if len(among) < 2 or len(held) == len(among):
            return ""
        if len(held) == 1:
            return f"{_singular(key)} {held[0][:_VALUE_CHARS]} only"
        counted = f"{len(held)} of {len(among)} {_plural(key)}"
        if len(held) <= _NAMED:
            return f"{counted}: {_names([v[:_VALUE_CHARS] for v in held])}"
        return counted


def _names(values: Sequence[str]) -> str:
    """`checkout-api-7d9f8b6c5-{m8p3z,x2k4q}` when the names share a prefix up to a `-`, `.` or `_`
    (each name is still there whole, read the shell's way), else `a, b`."""
    common = os.path.commonprefix(list(values))  # noqa: RUF071 (names, not paths)
    cut = max(common.rfind(c) for c in "-._") + 1
    if cut >= 4 and all(len(v) > cut for v in values):
        return f"{common[:cut]}{{{','.join(v[cut:] for v in values)}}}"
    return ", ".join(values)


def families(
    streams: Sequence[Mapping[str, str]], used: Collection[int], hidden: Collection[str] = ()
) -> dict[int, tuple[tuple[str, str], ...]]:
    """Each used stream's family: its labels without its source's name (the identity label) and
    without the labels of lines (`LINE_KEYS`, `hidden` metadata): the pods of one app, its stdout and stderr, are one
    family, and write one layout."""
    identity = StreamSet(streams, used, hidden).identity
    skip = {identity, *LINE_KEYS, *hidden}
    return {i: tuple(sorted((k, v) for k, v in streams[i].items() if k not in skip)) for i in used}
