"""Group log messages into patterns (templates) in one batch: what an engineer calls the same message.

A Loki answer is a whole batch, so the miner can look at every line before it decides, unlike
a streaming parser such as Drain. The method follows Brain (Yu et al., "Brain: Log Parsing with
Bidirectional Parallel Tree", IEEE TSC 2023), written here from the paper's idea:

1. Tokens. A message is cut into words (at white space and at `= , ; : ( ) [ ] { } " ' | < >`).
   A word holding a digit, a long hex run, a month/day name or `true`/`false`/`null`/`nil` is a
   variable (`<*>`); so is the value of a `key=value` pair, and an empty `()`/`[]`/`""` stands in
   for a value that is absent. Some chunks are one value whole: a `host:port`, a quantity in
   brackets (`(1.16 KB)`), a word and its number (`LOCAL(0)`, `sshd[42]:`); a unit right after
   a variable (`93.0 B` beside `5.2 KB`) is part of it.
2. Roots. Among messages of the same length, each word gets its frequency at its position.
   The words of one template occur together, so they share a frequency: the largest set of a
   message's words with one frequency is its root, and messages with the same root are one
   group. Words that vary inside a group are its variable fields.
3. Children. A group is split on a column that holds only a few distinct words (at most
   `SPLIT_MAX`, e.g. `instruction address` / `data address`): such a column is a constant of
   several templates, not a variable. More distinct words than that make it a variable
   (user names, host names); so does a variable on most of the column's lines (its plain
   words are values without a digit: `lifetime <1 sec` beside `lifetime 00:01`).
4. Entities. Where two templates were each split on a column after the same constant word and
   at least three of its words recur in both (`session opened/closed for user news|cyrus|test`),
   the words are names of one variable (a user, a host): each template is one group again.
5. Merge. Templates that say the same constant words in the same order are one statement whose
   variables took a different number of words (a list of hosts, a size with its unit or without).

Measured against the corrected loghub-2.0 labels of sixteen systems by `python -m benchmarks.loghub2`
(grouping accuracy, beside Drain3 and Brain in the same run; no rule is per system).
Pure and deterministic: the same messages give the same groups.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from schemas.memo import Memo
from services.compaction.log_anatomy import MONTHS_DAYS

WILD = "<*>"
SPLIT_MAX = 5  # a column with at most this many distinct words splits its group

WORD = re.compile(r"[^\s=,;:()\[\]{}\"'|<>]+")
# cut at white space, and at the commas of `a=1,b=2`; a quantity in brackets, `(1.16 KB)`, is one chunk
_CHUNK = re.compile(r"\(\d[\d.,]*\s[A-Za-z%]{1,5}\)|(?:[^\s,]|,(?!\S))+")
_QUANTITY = re.compile(r"\(\d[\d.,]*\s[A-Za-z%]{1,5}\)")
_HOST_PORT = re.compile(r"[\w\-]+(?:\.[\w\-]+)+:\d{1,5}")  # `db.example.com:5432`, `10.0.0.7:80`
_EMPTY_PAIR = re.compile(r"\(\)|\[\]|\{\}|\"\"|''")
_DIGIT = re.compile(r"\d")
_HEX = re.compile(r"^(?:0x)?[0-9a-fA-F]{8,}$")
# Units a number is written with: after a variable, part of its value (a size in B or in KB).
_UNITS = frozenset(
    [
        "B",
        "KB",
        "MB",
        "GB",
        "TB",
        "PB",
        "KiB",
        "MiB",
        "GiB",
        "TiB",
        "kB",
        "ms",
        "us",
        "µs",
        "ns",
        "s",
        "sec",
        "secs",
        "min",
        "mins",
        "h",
        "hr",
        "hrs",
        "%",
    ]
)
# Words that are only ever a value (`overlap:false`, `result=null`), never what a statement says.
_VALUE_WORDS = frozenset(("true", "false", "null", "nil"))


def words(message: str) -> tuple[list[str], list[str]]:
    """(masked words, raw words) of a message; a masked word is `<*>` where the raw one varies.

    Leading variables are dropped: a header the stream learner left on (an uptime, a pid) must
    not split a pattern, and a template rarely starts with a variable."""
    masked, spans = word_spans(message)
    return masked, [message[a:b] for a, b in spans]


def word_spans(message: str) -> tuple[list[str], list[tuple[int, int]]]:
    """`words`, with each raw word as its (start, end) in the message instead of its text.

    Swapping a digit for another changes neither the masked words nor any span, so a caller may
    reuse one line's result for every line that differs from it only in its digits."""
    masked: list[str] = []
    spans: list[tuple[int, int]] = []
    for chunk in _CHUNK.finditer(message):
        base = chunk.start()
        text = chunk.group()
        key = text.encode("utf-8", "surrogatepass").translate(_ZERO)  # digit_family, inlined: per chunk
        words_of = _chunks.get(key)
        if words_of is None:
            words_of = _chunks.keep(key, _chunk_words(text))
        masked.extend(words_of[0])
        spans.extend([(base + a, base + b) for a, b in words_of[1]])
    for i in range(1, len(masked)):
        if masked[i - 1] == WILD and message[spans[i][0] : spans[i][1]] in _UNITS:
            masked[i] = WILD  # `93.0 B` beside `5.2 KB`: the unit is part of the value
    lead = 0
    while lead < len(masked) - 1 and masked[lead] == WILD:
        lead += 1
    return masked[lead:], spans[lead:]


def digit_family(text: str) -> bytes:
    """`text` with every ASCII digit made 0, as bytes: texts that differ only in their digits share it.
    Bytes because `bytes.translate` is 14x faster than `str.translate` here; in UTF-8 the bytes
    `1`-`9` are only ASCII digits, so no other character changes."""
    return text.encode("utf-8", "surrogatepass").translate(_ZERO)


_ZERO = bytes.maketrans(b"123456789", b"000000000")

# A chunk's words depend on its digits only through where they are: chunks that differ only in
# their digits share one entry (most chunks of a log repeat, or differ only in a number). Pure,
# so the cache is safe across calls; bounded.
_chunks: Memo[bytes, tuple[tuple[str, ...], tuple[tuple[int, int], ...]]] = Memo(100_000)


def _chunk_words(text: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """The masked words of one chunk and their spans in it: an empty `()`/`[]`/`""` stands for an
    absent value; a `key=value` pair is its key's words and its value."""
    if _QUANTITY.fullmatch(text) or _HOST_PORT.fullmatch(text):
        # one value: a size said beside its count in bytes, `(1.16 KB)`; an address, host and port
        return (WILD,), ((0, len(text)),)
    masked: list[str] = []
    spans: list[tuple[int, int]] = []
    if "=" not in text and _DIGIT.search(text):
        found = [m.span() for m in WORD.finditer(text)]
        if len(found) == 2 and sorted(_mask(text[a:b]) == WILD for a, b in found) == [False, True]:
            # `LOCAL(0)`, `sshd[42]:`: a word and its number in one chunk are one value
            return (WILD,), ((found[0][0], found[-1][1]),)
    pos = 0
    for empty in _EMPTY_PAIR.finditer(text):
        _part_words(text, pos, empty.start(), masked, spans)
        masked.append(WILD)
        spans.append((empty.start(), empty.start()))
        pos = empty.end()
    _part_words(text, pos, len(text), masked, spans)
    return tuple(masked), tuple(spans)


def _part_words(text: str, start: int, end: int, masked: list[str], spans: list[tuple[int, int]]) -> None:
    eq = text.find("=", start, end)
    if start < eq < end - 1 and text[eq - 1].isalnum():
        for word in WORD.finditer(text, start, eq):
            masked.append(_mask(word.group()))
            spans.append(word.span())
        value = text[eq + 1 : end]
        masked.append("=" + (WILD if _variable(value) else value))
        spans.append((eq + 1, end))
        return
    for word in WORD.finditer(text, start, end):
        masked.append(_mask(word.group()))
        spans.append(word.span())


def _variable(value: str) -> bool:
    """A `key=value` value is a variable unless it is one plain word (`user=root`, `mode=false`):
    then the column's own spread decides, like any word's."""
    return not value.isalpha() or _mask(value) == WILD


def _mask(word: str) -> str:
    if (
        word == "*"
        or _DIGIT.search(word)
        or _HEX.match(word)
        or word.lower() in MONTHS_DAYS
        or word.lower() in _VALUE_WORDS
        or "/" in word[1:]
    ):
        return WILD
    return word


@dataclass(frozen=True)
class Group:
    """One pattern: its template (masked words, `<*>` where the group varies) and its members."""

    template: tuple[str, ...]
    members: tuple[int, ...]  # indexes into the messages, ascending


def mine(messages: Sequence[str]) -> list[Group]:
    """Patterns of `messages`, in order of each pattern's first message."""
    return mine_words([tuple(words(m)[0]) for m in messages])


def mine_words(masked: Sequence[tuple[str, ...]]) -> list[Group]:
    """Patterns of messages given as their masked words (`words(message)[0]`)."""
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, toks in enumerate(masked):
        by_length[len(toks)].append(index)
    groups: list[Group] = []
    for indexes in by_length.values():
        # each word's frequency at its position: one Counter per column (no (position, word) pairs)
        columns = [Counter(column) for column in zip(*(masked[i] for i in indexes), strict=True)]
        # messages with the same masked words have the same root: each such set is rooted once
        alike: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for index in indexes:
            alike[masked[index]].append(index)
        roots: dict[tuple[tuple[int, str], ...], list[int]] = defaultdict(list)
        for toks, same in alike.items():  # in order of first occurrence, as the roots were
            counts = [column[tok] for column, tok in zip(columns, toks, strict=True)]
            if not counts:
                roots[()].extend(same)
                continue
            shared = Counter(counts)
            root = max(shared, key=lambda f: (shared[f], f))
            roots[tuple((p, t) for p, t in enumerate(toks) if counts[p] == root)].extend(same)
        for members in roots.values():
            members.sort()  # ascending, as one message at a time gave them
            groups.extend(_split(members, masked))
    out = _merge_runs(_join_entities(groups))
    out.sort(key=lambda g: g.members[0])
    return out


def _values(column: Counter[str], lines: int) -> bool:
    """A column that holds a variable on most lines holds values: the words on its other lines
    (`lifetime <1 sec` beside `lifetime 00:01`) are values without a digit, not another template."""
    return 2 * column[WILD] >= lines and not any(w.endswith(WILD) for w in column if w != WILD)


def _merge_runs(groups: list[Group]) -> list[Group]:
    """One group for the templates that say the same constant words in the same order and differ
    only in their variables (`name <*> <*> <*>` and `name <*>`: a list of hosts; a value said with
    its unit or without, an address that led the line or not). The merged group keeps the template
    of its largest part; its fields are read on the lines of that shape (`loki._fields`)."""
    merged: dict[tuple[str, ...], list[Group]] = defaultdict(list)
    for group in groups:
        merged[_constants(group.template)].append(group)
    out = []
    for parts in merged.values():
        largest = max(parts, key=lambda g: (len(g.members), -g.members[0]))
        members = sorted(i for g in parts for i in g.members)
        out.append(Group(largest.template, tuple(members)))
    return out


def _join_entities(groups: list[Group]) -> list[Group]:
    """Undo a split whose column names an entity: where two templates were each split on a column
    that follows the same constant word (`session opened for user {news, cyrus, test}`, `session
    closed for user {news, cyrus, test, root}`) and at least `_ENTITY_SHARED` of the words recur in
    both, those words are the values of one variable (a user, a host, a job), which few distinct
    values made look constant; each template is then one group. A constant that tells templates
    apart (`instruction`/`data address`) does not recur as the same set after the same word in a
    second template that was split alike."""
    siblings: dict[tuple[tuple[str, ...], int], list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        template = group.template
        for pos in range(1, len(template)):
            if not template[pos].endswith(WILD) and not template[pos - 1].endswith(WILD):
                siblings[((*template[:pos], WILD, *template[pos + 1 :]), pos)].append(index)
    families = {key: idx for key, idx in siblings.items() if len(idx) > 1}
    by_key_word: dict[str, list[tuple[tuple[str, ...], int]]] = defaultdict(list)
    for template, pos in families:
        by_key_word[template[pos - 1]].append((template, pos))
    joined: dict[tuple[tuple[str, ...], int], list[int]] = {}
    for keys in by_key_word.values():
        values = {key: {groups[i].template[key[1]] for i in families[key]} for key in keys}
        for key in keys:
            if any(
                other[0] != key[0] and len(values[key] & values[other]) >= _ENTITY_SHARED for other in keys
            ):
                joined[key] = families[key]
    taken: set[int] = set()
    out: list[Group] = []
    for (template, _), members in sorted(joined.items(), key=lambda kv: min(kv[1])):
        fresh = [i for i in members if i not in taken]
        if len(fresh) > 1:
            taken.update(fresh)
            out.append(Group(template, tuple(sorted(m for i in fresh for m in groups[i].members))))
    return out + [g for i, g in enumerate(groups) if i not in taken]


# Two words that recur in two split statements are as often an opposition (`Starting`/`Ending`,
# `onSleep`/`onWake`) as two names; three that recur are names.
_ENTITY_SHARED = 3


def _constants(template: tuple[str, ...]) -> tuple[str, ...]:
    """A template's constant words, the key it is merged by; a template with fewer than two is only
    ever merged with itself (nothing else would say it is the same statement)."""
    words = tuple(w for w in template if not w.endswith(WILD))
    return words if len(words) >= _MERGE_MIN_WORDS else template


_MERGE_MIN_WORDS = 2


def _split(members: list[int], masked: Sequence[tuple[str, ...]]) -> list[Group]:
    """Split a root group on its fewest-valued low-cardinality column, recursively (no recursion limit
    issues: each split strictly shrinks the group and removes a varying column)."""
    out: list[Group] = []
    stack = [members]
    while stack:
        part = stack.pop()
        columns = [Counter(column) for column in zip(*(masked[i] for i in part), strict=True)]
        candidates = [
            (len(c), pos)
            for pos, c in enumerate(columns)
            if 1 < len(c) <= SPLIT_MAX and not _values(c, len(part))
        ]
        if not candidates:
            template = tuple(next(iter(c)) if len(c) == 1 else WILD for c in columns)
            out.append(Group(template, tuple(part)))
            continue
        _, pos = min(candidates)
        parts: dict[str, list[int]] = defaultdict(list)
        for i in part:
            parts[masked[i][pos]].append(i)
        stack.extend(reversed(list(parts.values())))
    return out
