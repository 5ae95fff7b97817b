"""query_loki: a Loki `query_range` streams response -> patterns with exact counts (invariant 6).

Every line is cut into its header and its message (`log_anatomy`, learned per stream), and
the messages are grouped into patterns (`log_patterns`) BEFORE anything is dropped. A pattern
is one template at one level: its exact count, its first and last time, one verbatim exemplar
(the message of its first line, header cut off) and the ranges of its variable fields
(numbers min..max, otherwise how many distinct values). The level comes from the stream's
labels (`level`, `detected_level`), else from the line's structure, else from its words.

Order, which is also the order of what is kept: error-or-worse patterns, largest first
(pinned); then the rest, largest first ("x198 in 76 seconds is itself diagnostic"), warnings
counting double. Each pattern renders at five resolutions (exemplar and ranges; exemplar;
a terse form with first/last; the same without times; a shorter one); a terse form is the
exemplar line cut around its opening and rarest words, or the skeleton of those words where no
run of the line holds them at a bounded cost (`log_exemplar.terse_line`).
Pure and deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from services.compaction.log_anatomy import (
    ERROR_RANK,
    LEVEL_RANK,
    HeaderShape,
    keyword_level,
    learn_header,
    level_name,
    split_line,
)
from services.compaction.log_exemplar import LINE_COST, SHORT_CHARS, pattern_spread, shape, terse_line
from services.compaction.log_patterns import WILD, digit_family, mine_words, word_spans
from services.compaction.log_streams import StreamSet, families
from services.compaction.model import Draft, Item, RawFormatError
from services.compaction.render import clip, value_range
from services.compaction.timefmt import Clock, ns_from_integer, ns_from_rfc3339, shown

TOOL = "query_loki"
_LABEL_KEYS = ("detected_level", "level", "severity", "lvl", "log_level")
_LEVEL_TAG = {"warn": "WARN", "error": "ERROR", "critical": "CRIT", "fatal": "FATAL"}
_EXEMPLAR_CHARS = 400  # the richest form: a long line is cut here, with the count of what follows
# The terser forms still show the exemplar line itself (`_excerpt`), cut to about these lengths;
# below the floor the fitter leaves a lesser pattern out (counted in `omitted`) instead.
_TERSE_CHARS = 72
_FLOOR_CHARS = 48
# An error's terse form is its line, cut (`log_exemplar.excerpt`) but never traded for a skeleton on
# tokens: the fitter leaves out a lesser pattern to pay for it (issue 36: an error is what responders
# quote; benchmarks/bench_loki_streams.py counts the skeletons of many-stream answers).
ERROR_LINE_COST = math.inf
_MAX_VARS = 4


def _label_level(labels: Mapping[str, Any]) -> str | None:
    for key in _LABEL_KEYS:
        value = labels.get(key)
        if isinstance(value, str):
            level = level_name(value)
            if level is not None:
                return level
    return None


def _entry_ns(index: int, value: Any) -> int:
    """An entry's time: integer nanoseconds (a JSON integer or a digit string), else RFC 3339."""
    try:
        if type(value) is int or (isinstance(value, str) and value.isdigit()):  # `"²"`: refused there
            return ns_from_integer(value)
        if isinstance(value, str):
            return ns_from_rfc3339(value)
    except ValueError as exc:
        raise RawFormatError(f"query_loki: entry {index} timestamp {exc}") from None
    raise RawFormatError(
        f"query_loki: entry {index} timestamp {shown(value)} is neither integer nanoseconds nor RFC 3339"
    )


Entry = tuple[int, int, str]  # (ns, stream index, line)


def parse(raw: Any) -> tuple[list[Entry], list[dict[str, str]]]:
    """(entries sorted by time, the labels of each stream); RawFormatError if not a streams response."""
    entries, labels, _ = _parse(raw)
    return entries, labels


def _parse(raw: Any) -> tuple[list[Entry], list[dict[str, str]], frozenset[str]]:
    """`parse`, and the label keys that came from lines' structured metadata.

    Also accepts a list of `{timestamp, line, labels}` entries (Grafana's MCP `query_loki_logs`),
    each entry its own stream of labels.
    """
    if isinstance(raw, list) and raw and all(isinstance(e, dict) and "line" in e for e in raw):
        return (*_parse_entries(raw), frozenset())
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        raise RawFormatError("query_loki: expected a Loki query_range response with a 'data' object")
    data = raw["data"]
    if data.get("resultType", "streams") != "streams":
        raise RawFormatError(f"query_loki: expected resultType 'streams', got {data.get('resultType')!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise RawFormatError("query_loki: expected data.result to be a list of streams")
    entries: list[Entry] = []
    streams = _Streams()
    for s_index, stream in enumerate(result):
        if not isinstance(stream, dict) or not isinstance(stream.get("values"), list):
            raise RawFormatError(f"query_loki: stream {s_index} has no 'values' list")
        labels = stream.get("stream") or {}
        if not isinstance(labels, dict):
            raise RawFormatError(f"query_loki: stream {s_index} labels are not an object")
        base = {str(k): str(v) for k, v in labels.items()}
        plain = streams.index(base, {})
        for v_index, value in enumerate(stream["values"]):
            if not isinstance(value, list) or len(value) < 2 or not isinstance(value[1], str):
                raise RawFormatError(f"query_loki: stream {s_index} has an entry that is not [ns, line]")
            try:
                ns = ns_from_integer(value[0])
            except ValueError as exc:
                raise RawFormatError(
                    f"query_loki: stream {s_index} entry {v_index} timestamp {exc}"
                ) from None
            metadata = _metadata(s_index, v_index, value[2]) if len(value) > 2 else {}
            entries.append((ns, streams.index(base, metadata) if metadata else plain, value[1]))
    entries.sort(key=lambda e: (e[0], e[1]))
    return entries, streams.labels, frozenset(streams.hidden)


class _Streams:
    """The answer's streams, one per distinct (stream labels, line metadata): a line's structured
    metadata (Loki >= 3: `detected_level`, a trace id) is read like a label of its line, as Loki
    itself does when it does not categorize labels. `hidden` holds the metadata keys: they
    describe lines, not the sources a pattern is attributed to (`log_streams`)."""

    def __init__(self) -> None:
        self.labels: list[dict[str, str]] = []
        self.hidden: set[str] = set()
        self._of: dict[tuple[tuple[str, str], ...], int] = {}

    def index(self, base: dict[str, str], metadata: dict[str, str]) -> int:
        labels = {**base, **{k: v for k, v in metadata.items() if k not in base}}
        self.hidden.update(k for k in metadata if k not in base)
        key = tuple(sorted(labels.items()))
        if key not in self._of:
            self._of[key] = len(self.labels)
            self.labels.append(labels)
        return self._of[key]


def _metadata(s_index: int, v_index: int, value: Any) -> dict[str, str]:
    """A values entry's third element: a flat object of structured metadata, or Loki's categorized
    form (`{"structuredMetadata": {...}, "parsed": {...}}`, objects or `[{name, value}]` lists)."""
    if not isinstance(value, dict):
        raise RawFormatError(f"query_loki: stream {s_index} entry {v_index} metadata is not an object")
    if not {"structuredMetadata", "parsed"} & value.keys():
        return {str(k): str(v) for k, v in value.items() if not isinstance(v, (dict, list))}
    out: dict[str, str] = {}
    for part in (value.get("structuredMetadata"), value.get("parsed")):
        pairs = part.items() if isinstance(part, dict) else []
        if isinstance(part, list):
            pairs = [(p.get("name"), p.get("value")) for p in part if isinstance(p, dict)]
        out.update({str(k): str(v) for k, v in pairs if k is not None and v is not None})
    return out


def _parse_entries(raw: list[Any]) -> tuple[list[Entry], list[dict[str, str]]]:
    entries: list[Entry] = []
    streams: list[dict[str, str]] = []
    index_of: dict[tuple[tuple[str, str], ...], int] = {}
    for index, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("line"), str):
            raise RawFormatError(f"query_loki: entry {index} is not a {{timestamp, line, labels}} log entry")
        labels = entry.get("labels") or {}
        key = tuple(sorted((str(k), str(v)) for k, v in labels.items())) if isinstance(labels, dict) else ()
        if key not in index_of:
            index_of[key] = len(streams)
            streams.append(dict(key))
        entries.append((_entry_ns(index, entry.get("timestamp")), index_of[key], entry["line"]))
    entries.sort(key=lambda e: (e[0], e[1]))
    return entries, streams


class _Pattern:
    __slots__ = ("first", "last", "level", "members", "template")

    def __init__(self, template: tuple[str, ...], level: str) -> None:
        self.template = template
        self.level = level
        self.members: list[int] = []
        self.first = 0
        self.last = 0


# Lines that differ only in their digits are read alike (header cut, level, words: see
# `log_patterns.word_spans`), so each such family is read once per raw. Not so where a digit is a
# level (`{"level":50`, `level=40`, a syslog `<PRI>`, an access log's status): those lines are always read.
_DIGIT_SAFE = re.compile(
    r"(?!\s*[{<])(?!.*(?i:lo?g?_?le?ve?l|severity)[\"']?\s*[=:]\s*[\"']?\d)"
    r"(?!\S+ \S+ \S+ \[[^\]]{10,40}\] \")"  # an access log's status is its level (log_anatomy)
)
_Reading = tuple[str, int, str, tuple[str, ...], list[tuple[int, int]]]


def _read(line: str, shape: HeaderShape, label_level: str | None) -> _Reading:
    """(the message, where it starts in the line or -1 when it is rewritten (a JSON line), the
    level, the masked words, the word spans) of one line."""
    anatomy = split_line(line, shape)
    message = anatomy.message if anatomy.message.strip() else line
    start = len(line) - len(message) if line.endswith(message) else -1
    level = label_level or anatomy.level or keyword_level(message)
    masked, spans = word_spans(message)
    return message, start, level, tuple(masked), spans


def _patterns(
    entries: Sequence[Entry], streams: Sequence[Mapping[str, str]], hidden: frozenset[str] = frozenset()
) -> tuple[list[_Pattern], list[str], list[list[str]]]:
    """Patterns (one template at one level), the messages and the raw words of every entry."""
    # One header shape per family of streams (the same labels but the source's name: one app's
    # pods write one layout), so a template reads alike on every pod of its app.
    family_of = families(streams, {s for _, s, _ in entries}, hidden)
    by_family: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for _, s_index, line in entries:
        by_family.setdefault(family_of[s_index], []).append(line)
    learnt = {key: learn_header(lines) for key, lines in by_family.items()}
    shapes = {s_index: learnt[key] for s_index, key in family_of.items()}
    label_levels = [_label_level(labels) for labels in streams]
    messages: list[str] = []
    levels: list[str] = []
    masked: list[tuple[str, ...]] = []
    raws: list[list[str]] = []
    seen: dict[tuple[int, bytes], _Reading] = {}
    for _, s_index, line in entries:
        family = (s_index, digit_family(line))
        reading = seen.get(family) if _DIGIT_SAFE.match(line) else None
        if reading is None or reading[1] < 0:
            reading = _read(line, shapes[s_index], label_levels[s_index])
            seen[family] = reading
        message, start, level, words_masked, spans = reading
        message = line[start:] if start >= 0 else message
        messages.append(message)
        levels.append(level)
        masked.append(words_masked)
        raws.append([message[a:b] for a, b in spans])
    out: dict[tuple[tuple[str, ...], str], _Pattern] = {}
    for group in mine_words(masked):
        for index in group.members:
            key = (group.template, levels[index])
            pattern = out.get(key)
            if pattern is None:
                pattern = out[key] = _Pattern(group.template, levels[index])
            pattern.members.append(index)
    patterns = list(out.values())
    for pattern in patterns:
        pattern.members.sort()
        pattern.first = entries[pattern.members[0]][0]
        pattern.last = entries[pattern.members[-1]][0]
    return patterns, messages, raws


def _fields(pattern: _Pattern, raws: Sequence[Sequence[str]]) -> tuple[list[str], frozenset[str]]:
    """The ranges of the variable fields that vary (`port 1024..65535`, `user 5 distinct`: named by
    the constant word before them; numbers as their raw min and max, anything else as how many
    distinct values), and every word the pattern's lines all share (its template's constants and
    the values that happen to be the same on every line)."""
    out: list[str] = []
    fixed = {w.removeprefix("=") for w in pattern.template if not w.endswith(WILD)}  # `=false`: a value
    for pos, word in enumerate(pattern.template):
        if not word.endswith(WILD):
            continue
        # a pattern may hold lines of several shapes (`log_patterns._merge_runs`): read the fields
        # on the lines of its template's shape, where position `pos` is this field
        values = [raws[i][pos] for i in pattern.members if len(raws[i]) == len(pattern.template)]
        distinct = set(values)
        if len(distinct) < 2:
            fixed.update(distinct)
            continue
        if len(out) >= _MAX_VARS:
            continue
        name = next(
            (w.strip(".") for w in reversed(pattern.template[:pos]) if not w.endswith(WILD) and w.strip(".")),
            f"#{pos}",
        )
        out.append(f"{name[:24]} {value_range(distinct)}")
    return out, frozenset(fixed)


def _said(attribution: str) -> str:
    """` [app=kafka; pod kafka-0 only]`: where a pattern came from, right after its level."""
    return f" [{attribution}]" if attribution else ""


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    entries, streams, hidden = _parse(raw)
    if not entries:
        header = {"evidence": evidence_id, "summary": "0 lines"}
        return Draft(headers=(header,), section="patterns", kind="patterns", unit="lines", items=())
    patterns, messages, raws = _patterns(entries, streams, hidden)
    sources = StreamSet(streams, {s for _, s, _ in entries}, hidden)
    clock = Clock(entries[0][0], entries[-1][0])
    spread = pattern_spread([messages[pattern.members[0]] for pattern in patterns])
    pinned = sorted(
        (p for p in patterns if LEVEL_RANK[p.level] >= ERROR_RANK),
        key=lambda p: (-len(p.members), -LEVEL_RANK[p.level], p.first),
    )
    rest = sorted(
        (p for p in patterns if LEVEL_RANK[p.level] < ERROR_RANK),
        key=lambda p: (-_salience(p), p.first),
    )
    items: list[Item] = []
    for index, pattern in enumerate([*pinned, *rest], start=1):
        n = len(pattern.members)
        exemplar = messages[pattern.members[0]].strip()
        tag = f" {_LEVEL_TAG[pattern.level]}" if pattern.level in _LEVEL_TAG else ""
        if tag and exemplar and level_name(exemplar.split(maxsplit=1)[0]) == pattern.level:
            tag = ""  # `error: ...`, `FATAL ERROR: ...`: the line says its level itself
        times = clock.span(pattern.first, pattern.last)
        pinned_here = LEVEL_RANK[pattern.level] >= ERROR_RANK
        said = tag + _said(sources.attribution({entries[i][1] for i in pattern.members}))
        # Where it came from: every form of an error says it; a lesser pattern lets it go before
        # its first and last times.
        terse = said if pinned_here else tag
        head = f"{n}× {times}{said} "
        ranges, fixed = _fields(pattern, raws)
        cost = ERROR_LINE_COST if pinned_here else LINE_COST
        timed = [
            head + clip(exemplar, _EXEMPLAR_CHARS) + (f" [{'; '.join(ranges)}]" if ranges else ""),
            head + clip(exemplar, SHORT_CHARS),
            head + terse_line(exemplar, _TERSE_CHARS, (4, 3), spread, fixed, cost),
            f"{n}× {times}{terse} " + terse_line(exemplar, _TERSE_CHARS, (4, 3), spread, fixed, cost),
        ]
        # Without first/last: the last resort, once the minor patterns are left out (`fit`).
        bare = [
            f"{n}×{terse} " + terse_line(exemplar, _TERSE_CHARS, (4, 3), spread, fixed, cost),
            f"{n}×{terse} " + terse_line(exemplar, _FLOOR_CHARS, (2, 2), spread, fixed, cost),
        ]
        forms, essential = _ladder(timed, bare)
        items.append(
            Item(
                id=f"p{index}",
                forms=forms,
                essential=essential,
                n=n,
                level=pattern.level,
                pinned=pinned_here,
                minor=_minor(pattern, len(entries)),
                salience=float(_salience(pattern)),
                first=clock.at(pattern.first),
            )
        )
    coarser = _coarser(items[: len(pinned)], pinned, messages, clock, sources, entries)
    by_level = Counter(p.level for p in patterns for _ in p.members)
    levels = ", ".join(f"{lv} {by_level[lv]}" for lv in sorted(by_level, key=lambda lv: -LEVEL_RANK[lv]))
    summary = f"{len(entries)} lines, {len(patterns)} patterns ({levels})"
    labels = sources.header()
    rich: dict[str, Any] = {"evidence": evidence_id, "summary": summary, "window": clock.window()}
    if labels:
        rich["streams"] = labels
    headers = (
        rich,
        {"evidence": evidence_id, "summary": summary, "window": clock.window()},
        {"evidence": evidence_id, "summary": f"{len(entries)} lines, {len(patterns)} patterns"},
    )
    return Draft(
        headers=headers,
        section="patterns",
        kind="patterns",
        unit="lines",
        items=tuple(items),
        coarser=coarser,
    )


# How many of the largest error patterns stay whole in each coarser variant: never fewer than one,
# so the largest error is never folded to make room for anything less severe; close steps at the
# small end, so a fold takes few more error patterns than the budget demands (the call path takes
# the finest variant that keeps all of its errors).
_FINE_KEPT = (16, 12, 8, 6, 4, 3, 2, 1)


def _coarser(
    fine: list[Item],
    pinned: list[_Pattern],
    messages: Sequence[str],
    clock: Clock,
    sources: StreamSet,
    entries: Sequence[Entry],
) -> tuple[tuple[Item, ...], ...]:
    """The error patterns at coarser grains: the largest `k` stay whole, the rest fold into groups by
    level and first word (`34× FATAL ciod: … (12 patterns)`), or at the coarsest into one group per
    level. Every error line stays counted in a shown item, so none is dropped (invariant 6)."""
    variants: list[tuple[Item, ...]] = []
    for k in _FINE_KEPT:
        if k >= len(pinned):
            continue
        for by_word in (True, False):
            groups: dict[tuple[str, str], list[int]] = {}
            for index in range(k, len(pinned)):
                pattern = pinned[index]
                word = pattern.template[0] if by_word and pattern.template else ""
                groups.setdefault((pattern.level, word), []).append(index)
            folded = [
                fine[members[0]]
                if len(members) == 1
                else _folded(
                    level,
                    word,
                    [pinned[i] for i in members],
                    messages,
                    clock,
                    f"c{k}{'w' if by_word else 'l'}{j}",
                    sources.attribution({entries[m][1] for i in members for m in pinned[i].members}),
                )
                for j, ((level, word), members) in enumerate(groups.items())
            ]
            folded.sort(key=lambda it: -it.n)
            variants.append((*fine[:k], *folded))
    return tuple(variants)


def _folded(
    level: str,
    word: str,
    members: list[_Pattern],
    messages: Sequence[str],
    clock: Clock,
    id_: str,
    attribution: str,
) -> Item:
    n = sum(len(p.members) for p in members)
    first = min(p.first for p in members)
    last = max(p.last for p in members)
    tag = _LEVEL_TAG.get(level, level.upper()) + _said(attribution)
    opening = shape(messages[members[0].members[0]].split(maxsplit=1)[0]) if word else "other"
    what = f"{opening} … ({len(members)} patterns)"
    forms, essential = _ladder([f"{n}× {clock.span(first, last)} {tag} {what}"], [f"{n}× {tag} {what}"])
    return Item(
        id=id_,
        forms=forms,
        essential=essential,
        n=n,
        level=level,
        pinned=True,
        first=clock.at(first),
        weight=0.5 if word else 0.2,  # a group named by its first word says more than "other"
        members=len(members),
    )


def _ladder(timed: Sequence[str], bare: Sequence[str]) -> tuple[tuple[str, ...], int]:
    """(the forms, richest first and equal ones collapsed; the index of the tersest one with times)."""
    kept = tuple(dict.fromkeys(timed))
    return (*kept, *(f for f in dict.fromkeys(bare) if f not in kept)), len(kept) - 1


def _minor(pattern: _Pattern, lines: int) -> bool:
    """A one-off below error level, or a pattern under 1% of the lines (by salience): what is left
    out, and counted, before any kept pattern loses its first and last times."""
    if LEVEL_RANK[pattern.level] >= ERROR_RANK:
        return False
    return len(pattern.members) == 1 or _salience(pattern) * 100 < lines


def _salience(pattern: _Pattern) -> int:
    """Line count; a warning counts double (more telling than info of the same size)."""
    return len(pattern.members) * (2 if pattern.level == "warn" else 1)


def line_patterns(raw: Any) -> list[tuple[str, int]]:
    """(line, the index of its pattern) for every entry of a raw: the grouping the digest is made of,
    for measuring it against labels (benchmarks/bench_compactor_quality.py)."""
    entries, streams, hidden = _parse(raw)
    patterns, _, _ = _patterns(entries, streams, hidden)
    of = {}
    for index, pattern in enumerate(patterns):
        for member in pattern.members:
            of[member] = index
    return [(entries[i][2], of[i]) for i in range(len(entries))]
