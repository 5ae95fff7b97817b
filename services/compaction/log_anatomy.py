"""The anatomy of a log line: its header (time, host, pid, level, tag) and its message, and its level.

Why: the header varies on every line (time, pid) or not at all (host), so it must neither split
patterns nor be paid for on every exemplar; and the level must come from where the line says it
(`ERROR` in the header, `level=error`, `"level":50`, Android's `E`, Apache's `[error]`), never
from a word in the message (`INFO ... parity error corrected` is an info line).

Nothing here knows a particular system. A stream's header is found from the stream itself:
the longest run of leading token positions that, on most lines, hold a time-like or numeric
token, a level, a separator or the same word on every line (a host name); and, where most
lines carry a level token at one position, everything up to it (and any bracketed
thread/context tokens right after it). The header also runs through a source named right after
it on most lines (a `prog[pid]:` tag, maybe after a host name; a name then ` - `; a logger then its
`[context]`), when the stream names more than one source, and through word fields between its
numbers (a component and a state). Pure and deterministic.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from schemas.memo import Memo

LEVEL_RANK = {"debug": 0, "info": 1, "warn": 2, "error": 3, "critical": 4, "fatal": 5}
ERROR_RANK = LEVEL_RANK["error"]

# Level names as systems write them (case-insensitive), to our six levels.
_LEVEL_NAMES = {
    "trace": "debug",
    "debug": "debug",
    "dbg": "debug",
    "verbose": "debug",
    "fine": "debug",
    "finer": "debug",
    "finest": "debug",
    "info": "info",
    "inf": "info",
    "information": "info",
    "informational": "info",
    "notice": "info",
    "config": "info",
    "warn": "warn",
    "warning": "warn",
    "wrn": "warn",
    "error": "error",
    "err": "error",
    "eror": "error",
    "severe": "error",
    "failure": "error",
    "crit": "critical",
    "critical": "critical",
    "alert": "critical",
    "fatal": "fatal",
    "panic": "fatal",
    "emerg": "fatal",
    "emergency": "fatal",
}
# One-letter levels (Android logcat, klog, log4j short layouts): only trusted inside a header.
_LETTER_LEVELS = {
    "V": "debug",
    "D": "debug",
    "I": "info",
    "W": "warn",
    "E": "error",
    "F": "fatal",
    "A": "fatal",
}
# Numeric levels of JSON loggers (pino, bunyan): 10 trace ... 60 fatal.
_NUMERIC_LEVELS = {10: "debug", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal"}
# Syslog severities (RFC 5424), from a `<PRI>` prefix.
_SYSLOG = ("fatal", "critical", "critical", "error", "warn", "info", "info", "debug")

_DECORATED_LEVEL = re.compile(r"^[\[<(]?([A-Za-z]{3,13})\d?[\])>]?:?$")  # `DEBUG2:` (PostgreSQL)
# PostgreSQL's own severity for server messages; only as it writes it, so the word "log" stays a word.
_POSTGRES_LOG = "LOG:"
# Python logging's default format (`basicConfig()`): `LEVEL:logger:message`, one token.
_PYTHON_DEFAULT = re.compile(r"^(CRITICAL|ERROR|WARNING|INFO|DEBUG):[\w.\-]*:")
_KEYED_LEVEL = re.compile(
    r"""^["']?(?:level|lvl|severity|loglevel|log_level|levelname)["']?[=:]["']?([A-Za-z]+|\d{2})["']?,?$""",
    re.IGNORECASE,
)
_KLOG = re.compile(r"^([IWEF])\d{4}$")  # klog/glog: E0314 03:12:44.187 ...
_SYSLOG_PRI = re.compile(r"^<(\d{1,3})>")
MONTHS_DAYS = frozenset(
    [
        "jan",
        "feb",
        "mar",
        "apr",
        "may",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "mon",
        "tue",
        "wed",
        "thu",
        "fri",
        "sat",
        "sun",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
)
_SEPARATORS = frozenset({"-", "|", ":", "--", "::", "-|", "||", "*", "#"})
_DIGIT = re.compile(r"\d")
# A header token: a bracketed group (may hold spaces: `[Sun Dec 04 04:47:44 2005]`), else a run of
# non-space, non-pipe characters, else a pipe.
_HEADER_TOKEN = re.compile(r"\[[^\]\n]{0,240}\]:?|[^\s|]+|\|")
MAX_HEADER_TOKENS = 14
_HEADER_SHARE = 0.8  # a position is header when it looks like one on this share of the lines
_LEVEL_SHARE = 0.5  # a level position must hold a level on this share of the lines
_MIN_LINES = 8  # fewer lines than this learn no header beyond the level
_JSON_TIME_KEYS = ("time", "ts", "timestamp", "@timestamp", "t", "date", "datetime")
_JSON_LEVEL_KEYS = ("level", "lvl", "severity", "loglevel", "log_level", "levelname", "severity_text")


def level_name(word: str) -> str | None:
    """`ERROR`, `[error]`, `Warning:`, `level=warn`, `<crit>` -> our level name; None if not a level."""
    if word == _POSTGRES_LOG:
        return "info"
    keyed = _KEYED_LEVEL.match(word)
    if keyed:
        value = keyed.group(1)
        if value.isdigit():
            return _NUMERIC_LEVELS.get(int(value))
        return _LEVEL_NAMES.get(value.lower())
    decorated = _DECORATED_LEVEL.match(word)
    if decorated:
        return _LEVEL_NAMES.get(decorated.group(1).lower())
    return None


def _token_level(token: str, in_header: bool) -> str | None:
    level = level_name(token)
    if level is None and in_header:
        bare = token.strip("[]<>():")
        if len(bare) == 1:
            level = _LETTER_LEVELS.get(bare)
        else:
            klog = _KLOG.match(token)
            level = _LETTER_LEVELS[klog.group(1)] if klog else None
    return level


def header_tokens(line: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of the first MAX_HEADER_TOKENS tokens of a line.

    Remembered for the last lines seen (shorter than _SPANS_LINE_MAX): a stream's header is learnt
    from its lines (`learn_header`), then each of those lines is cut (`split_line`)."""
    cached = _header_spans.get(line)
    if cached is not None:
        return cached
    spans = []
    for match in _HEADER_TOKEN.finditer(line):
        spans.append(match.span())
        if len(spans) >= MAX_HEADER_TOKENS:
            break
    found = tuple(spans)
    if len(line) <= _SPANS_LINE_MAX:
        _header_spans.keep(line, found)
    return found


_SPANS_LINE_MAX = 2048  # characters: the memo holds at most its limit of lines this long
_header_spans: Memo[str, tuple[tuple[int, int], ...]] = Memo(4096)


def _kind(token: str) -> str:
    """T: time or number-like, L: a level, S: a separator, B: bracketed, BT: bracketed time, W: a word."""
    bracketed = token[:1] in "[(<" and token.rstrip(":")[-1:] in "])>"
    if _DIGIT.search(token):  # the hot path: most header tokens are times and numbers
        if (token[:1] in "IWEF" and _KLOG.match(token)) or (
            ("=" in token or ":" in token) and _KEYED_LEVEL.match(token)
        ):
            return "L"
        return "BT" if bracketed else "T"
    kind = _WORD_KINDS.get(token)
    if kind is None:
        if _token_level(token, True) is not None:
            kind = "L"
        elif token.lower().strip(",.") in MONTHS_DAYS:
            kind = "BT" if bracketed else "T"
        elif token in _SEPARATORS:
            kind = "S"
        else:
            kind = "B" if bracketed else "W"
        _WORD_KINDS.keep(token, kind)  # digit-free tokens repeat (hosts, tags): remember them
    return kind


_WORD_KINDS: Memo[str, str] = Memo(50_000)


@dataclass(frozen=True)
class HeaderShape:
    """What a stream's lines share: how many leading tokens may be header, and the level block.

    `level_at`..`level_end` (exclusive) is the level token and the bracketed thread/context tokens
    right after it; on a line whose level sits at `level_at`, everything up to `level_end` is header.
    """

    length: int
    level_at: int | None
    level_end: int
    constants: tuple[str | None, ...]
    # where a source's tag (`sshd[42]:`, `kernel[0]:`, `Logger:`, `prog - `) may end the header
    tag_at: tuple[int, ...] = ()
    words_at: tuple[int, ...] = ()  # word fields between the header's numbers (a component, a state)


def learn_header(lines: Sequence[str]) -> HeaderShape:
    """The header shape of one stream's lines (see the module docstring)."""
    step = max(1, len(lines) // 256)  # a sample of a few hundred lines is enough to learn a layout
    sample = [line for line in lines[::step] if not line.lstrip().startswith("{")]
    if not sample:
        return HeaderShape(0, None, 0, ())
    toks = [[line[a:b] for a, b in header_tokens(line)] for line in sample]
    kinds = [[_kind(t) for t in row] for row in toks]
    total = len(sample)
    constants: list[str | None] = []
    length = 0
    words_seen = 0
    level_seen = False
    # A few lines cannot tell a header from a message that repeats: only the level block then.
    for i in range(MAX_HEADER_TOKENS if total >= _MIN_LINES else 0):
        column = [row[i] for row in toks if len(row) > i + 1]  # a header is followed by a message
        if len(column) < _HEADER_SHARE * total:
            break
        mode, mode_n = Counter(column).most_common(1)[0]
        constant = mode if mode_n >= _HEADER_SHARE * len(column) else None
        like = sum(
            1
            for row, kind in zip(toks, kinds, strict=True)
            if len(row) > i + 1 and _header_like(row[i], kind[i], constant)
        )
        if like < _HEADER_SHARE * total:
            break
        if level_seen and _mostly_levels(kinds, i):
            break  # a header names its level once: a level word after it opens the message
        level_seen = level_seen or _mostly_levels(kinds, i)
        if constant is not None and _kind(constant) == "W":
            words_seen += 1
            if words_seen > 1:  # a header names its host once; a run of fixed words is a message
                break
        constants.append(constant if constant is not None and _kind(constant) == "W" else None)
        length = i + 1
    # A header ends on a time, a number, a level or a separator: words the same on most lines
    # at its end are the stream's most common message, not its header.
    while length and constants[length - 1] is not None:
        length -= 1
    del constants[length:]
    level_at, level_end = None, 0
    positions = Counter(
        next((i for i, k in enumerate(kind[: MAX_HEADER_TOKENS - 1]) if k == "L"), -1) for kind in kinds
    )
    position, hits = max(positions.items(), key=lambda kv: (kv[0] >= 0, kv[1], -kv[0]))
    if position >= 0 and hits >= _LEVEL_SHARE * total:
        level_at, level_end = position, position + 1
        while level_end < MAX_HEADER_TOKENS:
            after = [k[level_end] for k in kinds if len(k) > level_end + 1 and k[position] == "L"]
            if not after or sum(k in ("B", "BT", "S") for k in after) < _HEADER_SHARE * len(after):
                break
            level_end += 1
        if level_end > length:
            constants.extend([None] * (level_end - length))
            length = level_end
    words_at: tuple[int, ...] = ()
    if level_at is None and length and total >= _MIN_LINES:
        words_at, length = _word_fields(toks, kinds, length)
        constants.extend([None] * (length - len(constants)))
    # After a level the logger's name comes next (log4j, logcat); a host name comes before a tag
    # only in a header without a level (syslog). A name then a separator (`prog - `, log4j's `%c - `)
    # is a source too, maybe with one qualifier between (`chrome.exe *64 - `) where no level is.
    tags = (length,) if level_at is not None else (length, length + 1)
    seps = (length + 1,) if level_at is not None else (length + 1, length + 2)
    tag_at = _tag_positions(toks, length, (*tags, *seps)) if total >= _MIN_LINES else ()
    return HeaderShape(length, level_at, level_end, tuple(constants[:length]), tag_at, words_at)


def _first(positions: tuple[int, ...]) -> int:
    return positions[0] if positions else 0


def _word_fields(
    toks: Sequence[Sequence[str]], kinds: Sequence[Sequence[str]], length: int
) -> tuple[tuple[int, ...], int]:
    """Word fields inside a header (HPC's `node-1 unix.hw state_change.up 1077804742 1 message`: a
    component and a state between numbers): one or two columns of words that are followed, on most
    lines, by times or numbers are fields, and the header runs through those numbers."""

    def most(pos: int, accept: tuple[str, ...]) -> bool:
        hits = sum(1 for kind in kinds if len(kind) > pos + 1 and kind[pos] in accept)
        return hits >= _HEADER_SHARE * len(kinds)

    def varies(pos: int) -> bool:  # a field takes several values; one word on most lines is a message's
        column = Counter(row[pos] for row in toks if len(row) > pos + 1)
        return bool(column) and column.most_common(1)[0][1] < _HEADER_SHARE * sum(column.values())

    for width in (1, 2):
        if not (most(length + width - 1, ("W", "L")) and varies(length + width - 1)):
            break
        end = length + width
        while end < MAX_HEADER_TOKENS and most(end, ("T", "BT")):
            end += 1
        if end > length + width:
            return tuple(range(length, length + width)), end
    return (), length


# A source's tag: a program, component or logger name, maybe with a (facility) and a [pid], ending
# in a colon (`sshd(pam_unix)[19939]:`, `com.apple.cts[258]:`, `o.a.h.MRAppMaster:`).
_TAG = re.compile(r"^[A-Za-z_][\w.\-/$@]*(?:\([\w.\-/]+\))?(?:\[\d+\])?:$")


def _tag_positions(toks: Sequence[Sequence[str]], length: int, where: tuple[int, ...]) -> tuple[int, ...]:
    """Where lines name their source right after the header (a `tag:`, or a name and a separator):
    the header runs to there. A message's first word is no source: most lines must have a tag at one
    of these places, followed by a message, and name more than one source (one word on every line,
    `autovacuum:`, opens the stream's message)."""
    found = [_first_tag(row, length, where) for row in toks]
    hits = [(row, at) for row, at in zip(toks, found, strict=True) if at >= 0]
    if len(hits) < _HEADER_SHARE * len(toks):
        return ()
    sources = {_PID.sub("", " ".join(row[length : at + 1])) for row, at in hits}
    return where if len(sources) > 1 else ()


def _first_tag(tokens: Sequence[str], length: int, where: Sequence[int]) -> int:
    return next((i for i in where if _is_tag(tokens, i, length)), -1)


def _is_tag(tokens: Sequence[str], i: int, length: int) -> bool:
    """Token i ends a source: a `tag:`, or a separator or a bracketed context after a name."""
    if len(tokens) <= i + 1:
        return False
    if _TAG.match(tokens[i]):
        return True
    # a name then a separator (`prog - `), or then its context in brackets (`nova.api [req-1 - -] `)
    named = tokens[i] == "-" or (tokens[i][:1] == "[" and tokens[i][-1:] == "]")
    return named and length < i and all(t not in _SEPARATORS and t[:1] != "[" for t in tokens[length:i])


_PID = re.compile(r"\[\d+\]")


def _mostly_levels(kinds: list[list[str]], i: int) -> bool:
    at = [kind[i] for kind in kinds if len(kind) > i]
    return sum(k == "L" for k in at) >= _LEVEL_SHARE * len(at)


def _header_like(token: str, kind: str, constant: str | None) -> bool:
    return kind in ("T", "BT", "L", "S") or (constant is not None and token == constant)


@dataclass(frozen=True)
class Anatomy:
    """A line cut in two: `header` (dropped from exemplars), `message` (kept verbatim), and its level."""

    header: str
    message: str
    level: str | None  # None: the line's structure names no level


def split_line(line: str, shape: HeaderShape) -> Anatomy:
    """Cut `line` by its stream's header shape; take the level from the line's structure."""
    if line.lstrip().startswith("{"):
        return _split_json(line)
    pairs = logfmt_pairs(line)
    if pairs is not None:
        return _split_fields(pairs, line)
    access = _ACCESS.match(line)
    if access is not None:
        return _split_access(line, access)
    python = _PYTHON_DEFAULT.match(line)
    if python is not None:
        return Anatomy(line[: python.end()], line[python.end() :], _LEVEL_NAMES[python.group(1).lower()])
    spans = header_tokens(line)
    tokens = [line[a:b] for a, b in spans]
    conforms = (
        shape.level_at is not None
        and len(tokens) > shape.level_end
        and _token_level(tokens[shape.level_at], True) is not None
    )
    cut = 0
    miss = -1
    # A stream whose lines carry their level at one place: a line without it there has another
    # layout (a continuation, a stack frame, a runtime's own message) and keeps its whole text.
    limit = shape.length if conforms or shape.level_at is None else 0
    for i in range(min(limit, len(tokens) - 1)):
        constant = shape.constants[i] if i < len(shape.constants) else None
        kind = _kind(tokens[i])
        # a header with word fields (`_word_fields`) takes a word for one of its numbers too (a
        # host named `full` where the others are `node-12`), if the rest of the header follows
        field = kind in ("W", "L") and (i in shape.words_at or (i < _first(shape.words_at) and miss < 0))
        if not ((conforms and i < shape.level_end) or field or _header_like(tokens[i], kind, constant)):
            break
        if field and i not in shape.words_at:
            miss = i
        cut = i + 1
    if miss >= 0 and cut < min(shape.length, len(tokens) - 1):
        cut = miss
    tag = _first_tag(tokens, shape.length, shape.tag_at) if shape.tag_at else -1
    if tag >= 0 and cut >= min(shape.length, tag - 1):
        cut = tag + 1  # the source's tag, and a host name before it, are header
    level = next((lv for t in tokens[:cut] if (lv := _token_level(t, True)) is not None), None)
    if cut and not any(_kind(t) in ("T", "BT") for t in tokens[:cut]):
        cut = 0  # no time, number or pid: `FATAL ERROR: JS heap ...` is all message
    if cut:
        while cut < len(tokens) - 1 and tokens[cut] in _SEPARATORS:  # `... INFO [thread] - message`
            cut += 1
    if level is None:
        # a level word or `level=` pair opening the message: `FATAL ERROR: ...`, `panic: ...`, logfmt
        for token in tokens[cut : cut + 6]:
            level = _token_level(token, False)
            if level is not None or "=" not in token:
                break
    if level is None:
        pri = _SYSLOG_PRI.match(line)
        if pri and int(pri.group(1)) < 192:
            level = _SYSLOG[int(pri.group(1)) % 8]
    start = spans[cut][0] if cut else 0
    return Anatomy(line[:start].rstrip(), line[start:], level)


_JSON_HEADER_KEYS = frozenset((*_JSON_TIME_KEYS, *_JSON_LEVEL_KEYS, "pid", "hostname", "v"))
_JSON_MESSAGE_KEYS = ("msg", "message", "event", "error", "err")
# Fields that say what went wrong: kept next to the message (structured lines, `loki`).
ERROR_KEYS = frozenset(
    ("error", "err", "error_message", "exception", "exc_info", "stack", "stacktrace", "reason", "cause")
)


# logfmt (and Go's slog text handler, which writes it): `key=value` pairs, a value bare or a
# double-quoted string with backslash escapes.
_LOGFMT_PAIR = re.compile(r'([A-Za-z_@][\w.\-/@]*)=("(?:[^"\\]|\\.)*"|[^\s"=]*)(?:\s+|$)')
_LOGFMT_MIN_PAIRS = 2


def logfmt_pairs(line: str) -> list[tuple[str, str]] | None:
    """A logfmt line's (key, value as written) pairs; None unless the whole line is pairs (at least
    two, one of them a message or level key), so prose with an `a=b` in it is never read as one."""
    text = line.strip()
    pairs: list[tuple[str, str]] = []
    at = 0
    while at < len(text):
        found = _LOGFMT_PAIR.match(text, at)
        if found is None or found.end() == at:
            return None
        pairs.append((found.group(1), found.group(2)))
        at = found.end()
    keys = {k.lower() for k, _ in pairs}
    if len(pairs) < _LOGFMT_MIN_PAIRS or not keys & {*_JSON_MESSAGE_KEYS, *_JSON_LEVEL_KEYS}:
        return None
    return pairs


# The NCSA common/combined access log (nginx's and Apache's default): client, identity, user,
# [time], then the request in quotes and the status.
_ACCESS = re.compile(r'^\S+ \S+ \S+ \[[^\]]{10,40}\] (?="[^"]*" [1-5]\d\d )')


def _split_access(line: str, access: re.Match[str]) -> Anatomy:
    """An access-log line: the client and time are header; the request, status and the rest are the
    message; a 5xx status is an error line (the server failed), anything else info (a 4xx is the
    client's mistake, and scanners make many)."""
    message = line[access.end() :]
    status = message.split('" ', 1)[1][:3] if '" ' in message else ""
    return Anatomy(line[: access.end()].rstrip(), message, "error" if status.startswith("5") else "info")


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return str(json.loads(value))
        except ValueError:
            return value[1:-1]
    return value


def _split_fields(pairs: list[tuple[str, str]], line: str) -> Anatomy:
    """A logfmt line read like a JSON one: the level from its level key, the message as `msg` then
    the error fields then the rest (`key=value` as written), without time, level, pid and host."""
    level = None
    for key, value in pairs:
        if key.lower() in _JSON_LEVEL_KEYS:
            word = _unquoted(value).lower()
            level = _LEVEL_NAMES.get(word) or (_NUMERIC_LEVELS.get(int(word)) if word.isdigit() else None)
            if level is not None:
                break
    said = next((k for k, v in pairs if k.lower() in _JSON_MESSAGE_KEYS[:3]), None)
    rest = [(k, v) for k, v in pairs if k.lower() not in _JSON_HEADER_KEYS and k != said]
    rest.sort(key=lambda kv: kv[0].rsplit(".", 1)[-1].lower() not in ERROR_KEYS)
    parts = [_unquoted(v) for k, v in pairs if k == said][:1] + [f"{k}={v}" for k, v in rest]
    header = " ".join(f"{k}={v}" for k, v in pairs if k.lower() in _JSON_HEADER_KEYS)
    return Anatomy(header, " ".join(parts) or line, level)


def _split_json(line: str) -> Anatomy:
    """A JSON log line: the level from its level key (names, or pino/bunyan numbers); its message
    written as `msg key=value ...` (nested keys dotted), every value as it appears, without the
    time, level, pid and hostname that every line of it carries (shown once, elsewhere)."""
    try:
        value = json.loads(line)
    except ValueError:
        return Anatomy("", line, None)
    if not isinstance(value, dict):
        return Anatomy("", line, None)
    level = None
    for key in _JSON_LEVEL_KEYS:
        raw = value.get(key)
        if isinstance(raw, bool):
            continue
        if isinstance(raw, int):
            level = _NUMERIC_LEVELS.get(raw)
        elif isinstance(raw, str):
            level = _LEVEL_NAMES.get(raw.lower()) or (
                _NUMERIC_LEVELS.get(int(raw)) if raw.isdigit() else None
            )
        if level is not None:
            break
    parts: list[str] = []
    for key in _JSON_MESSAGE_KEYS:
        if isinstance(value.get(key), str):
            parts.append(value[key])
            break
    said = parts and key
    leaves = [
        (path, leaf) for path, leaf in _leaves(value, "") if path not in _JSON_HEADER_KEYS and path != said
    ]
    # The error (or reason) right after the message: it tells one failure from another, and a
    # clipped exemplar keeps its start; then the other fields in the line's own order.
    leaves.sort(key=lambda pl: pl[0].rsplit(".", 1)[-1].lower() not in ERROR_KEYS)
    parts.extend(f"{path}={leaf}" for path, leaf in leaves)
    return Anatomy("", " ".join(parts) or line, level)


def _leaves(value: Any, prefix: str) -> list[tuple[str, str]]:
    """(dotted key, value as JSON writes it) of every scalar in a JSON object."""
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_leaves(child, f"{prefix}{key}." if isinstance(child, dict) else f"{prefix}{key}"))
    elif isinstance(value, list):
        out.append((prefix.rstrip("."), json.dumps(value, ensure_ascii=False, separators=(",", ":"))))
    else:
        out.append((prefix.rstrip("."), value if isinstance(value, str) else json.dumps(value)))
    return out


_KEYWORD = re.compile(r"\b(fatal|panic|emerg|crit|critical|error|err|warn|warning|exception|failed)\b", re.I)
_KEYWORD_LEVEL = {
    "fatal": "fatal",
    "panic": "fatal",
    "emerg": "fatal",
    "crit": "critical",
    "critical": "critical",
    "error": "error",
    "err": "error",
    "exception": "error",
    "warn": "warn",
    "warning": "warn",
    "failed": "warn",
}


def keyword_level(message: str) -> str:
    """The fallback when a line's structure names no level: its most severe level word."""
    best = "info"
    for word in _KEYWORD.findall(message):
        level = _KEYWORD_LEVEL[word.lower()]
        if LEVEL_RANK[level] > LEVEL_RANK[best]:
            best = level
    return best
