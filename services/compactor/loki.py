"""query_loki: a Loki `query_range` streams response -> patterns with counts (invariant 6).

Lines are fingerprinted (numbers, ids, hex, uuids, timestamps and quoted values
masked) and deduplicated into patterns BEFORE anything is dropped. Each pattern
keeps its count, first and last timestamps (exact ISO from the raw nanoseconds)
and its first line verbatim; error+ patterns are pinned and keep every distinct
line verbatim. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from services.compactor.model import Draft, Item, RawFormatError
from services.compactor.timefmt import iso_from_ns

TOOL = "query_loki"

# One pass, one literal replacement (no per-match Python call): a quoted value after `=`/`:`
# (with its `=`/`:`), or a "word" (letters, digits, . - + /) holding a digit, matched only
# from a word start so the engine never retries inside it, or a digit-free hex run of 12+.
_MASK = re.compile(
    r'[=:]\s?"[^"\\]*(?:\\.[^"\\]*)*"'
    r"|(?<![\w.+/\-])(?=[\w.+/\-]*\d)[\w.+/\-]+"
    r"|\b[0-9a-fA-F]{12,}\b"
)
_LEVEL_HINT = re.compile("fatal|panic|emerg|crit|err|warn")  # cheap prefilter on the lowercased line
_LEVEL_WORDS = re.compile(
    r"\b(fatal|panic|emerg|emergency|crit|critical|error|err|warn|warning)\b", re.IGNORECASE
)
_WORD_LEVEL = {
    "fatal": "fatal",
    "panic": "fatal",
    "emerg": "fatal",
    "emergency": "fatal",
    "crit": "critical",
    "critical": "critical",
    "error": "error",
    "err": "error",
    "warn": "warn",
    "warning": "warn",
}
LEVEL_RANK = {"info": 1, "warn": 2, "error": 3, "critical": 4, "fatal": 5}
ERROR_RANK = LEVEL_RANK["error"]
_LABEL_KEYS = ("level", "detected_level", "severity", "lvl", "log_level")


def fingerprint(line: str) -> str:
    """The pattern of a line: every variable part masked to `<*>`."""
    return _MASK.sub("<*>", line)


# Swapping one digit for another changes neither a line's fingerprint (a digit stays a word
# character, a hex digit and a digit) nor its level (level words are letters). So lines that differ
# only in their numbers, the bulk of any log, share one entry, keyed by the line with its digits
# zeroed; bytes.translate does that in C. Pure, so the cache is safe across calls; bounded.
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_SHAPE_CACHE_MAX = 50_000
_shapes: dict[bytes, tuple[str, str]] = {}


def line_shape(line: str) -> tuple[str, str]:
    """(fingerprint, level) of a line, cached by its digit-zeroed bytes."""
    key = line.encode("utf-8", "surrogatepass").translate(_ZERO_DIGITS)
    shape = _shapes.get(key)
    if shape is None:
        if len(_shapes) >= _SHAPE_CACHE_MAX:
            _shapes.clear()
        shape = _shapes[key] = (fingerprint(line), line_level(line))
    return shape


def line_level(line: str) -> str:
    """The most severe level word in a line (`info` when none)."""
    if _LEVEL_HINT.search(line.lower()) is None:
        return "info"  # fast path: no level word can match
    best = "info"
    for word in _LEVEL_WORDS.findall(line):
        level = _WORD_LEVEL[word.lower()]
        if LEVEL_RANK[level] > LEVEL_RANK[best]:
            best = level
    return best


def _label_level(stream: Mapping[str, Any]) -> str:
    for key in _LABEL_KEYS:
        value = stream.get(key)
        if isinstance(value, str):
            level = _WORD_LEVEL.get(value.lower())
            if level:
                return level
    return "info"


def _entry_ns(value: Any) -> int:
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is not None:
                delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
                return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    raise RawFormatError(f"query_loki: timestamp {value!r} is neither integer nanoseconds nor RFC 3339")


def _parse_entries(raw: list[Any]) -> list[tuple[int, int, str, str]]:
    """Grafana MCP's `query_loki_logs` shape: a list of {timestamp, line, labels}."""
    entries = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("line"), str):
            raise RawFormatError(f"query_loki: entry {index} is not a {{timestamp, line, labels}} log entry")
        labels = entry.get("labels") or {}
        entries.append(
            (
                _entry_ns(entry.get("timestamp")),
                0,
                entry["line"],
                _label_level(labels if isinstance(labels, dict) else {}),
            )
        )
    entries.sort(key=lambda e: (e[0], e[1]))
    return entries


def parse(raw: Any) -> list[tuple[int, int, str, str]]:
    """(ns, stream index, line, label level) for every entry; RawFormatError if not a streams response.

    Also accepts a list of `{timestamp, line, labels}` entries (Grafana's MCP `query_loki_logs`).
    """
    if isinstance(raw, list) and raw and all(isinstance(e, dict) and "line" in e for e in raw):
        return _parse_entries(raw)
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        raise RawFormatError("query_loki: expected a Loki query_range response with a 'data' object")
    data = raw["data"]
    if data.get("resultType", "streams") != "streams":
        raise RawFormatError(f"query_loki: expected resultType 'streams', got {data.get('resultType')!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise RawFormatError("query_loki: expected data.result to be a list of streams")
    entries: list[tuple[int, int, str, str]] = []
    for s_index, stream in enumerate(result):
        if not isinstance(stream, dict) or not isinstance(stream.get("values"), list):
            raise RawFormatError(f"query_loki: stream {s_index} has no 'values' list")
        labels = stream.get("stream") or {}
        if not isinstance(labels, dict):
            raise RawFormatError(f"query_loki: stream {s_index} labels are not an object")
        label_level = _label_level(labels)
        for value in stream["values"]:
            if not isinstance(value, list) or len(value) < 2 or not isinstance(value[1], str):
                raise RawFormatError(f"query_loki: stream {s_index} has an entry that is not [ns, line]")
            try:
                ns = int(value[0])
            except (TypeError, ValueError):
                raise RawFormatError(
                    f"query_loki: timestamp {value[0]!r} is not integer nanoseconds"
                ) from None
            entries.append((ns, s_index, value[1], label_level))
    entries.sort(key=lambda e: (e[0], e[1]))
    return entries


class _Pattern:
    __slots__ = ("first", "last", "level", "lines", "n")

    def __init__(self, ns: int, line: str, level: str) -> None:
        self.n = 0
        self.first = ns
        self.last = ns
        self.level = level
        self.lines: dict[str, None] = {line: None}


def draft(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    entries = parse(raw)
    patterns: dict[str, _Pattern] = {}
    for ns, _, line, label_level in entries:
        fp, level = line_shape(line)
        if LEVEL_RANK[label_level] > LEVEL_RANK[level]:
            level = label_level
        pat = patterns.get(fp)
        if pat is None:
            pat = patterns[fp] = _Pattern(ns, line, level)
        pat.n += 1
        pat.last = ns
        if LEVEL_RANK[level] > LEVEL_RANK[pat.level]:
            pat.level = level
        if LEVEL_RANK[level] >= ERROR_RANK:
            pat.lines[line] = None
    items: list[Item] = []
    for index, pat in enumerate(patterns.values(), start=1):
        error = LEVEL_RANK[pat.level] >= ERROR_RANK
        lines = list(pat.lines) if error else [next(iter(pat.lines))]
        first, last = iso_from_ns(pat.first), iso_from_ns(pat.last)
        body: dict[str, Any] = {"n": pat.n, "first": first, "last": last}
        if pat.level != "info":
            body["level"] = pat.level
        if len(lines) == 1:
            body["line"] = lines[0]
        else:
            body["lines"] = lines
        items.append(Item(id=f"p{index}", body=body, n=pat.n, pinned=error, level=pat.level, first=first))
    header: dict[str, Any] = {
        "evidence_id": evidence_id,
        "summary": f"{len(entries)} lines, {len(patterns)} distinct patterns",
        "window": [iso_from_ns(entries[0][0]), iso_from_ns(entries[-1][0])] if entries else [],
        "more": f"get_evidence({evidence_id})",
    }
    return Draft(header=header, section="patterns", unit="lines", levels=(tuple(items),))
