"""The words a Loki pattern is shown by in its terse forms: its exemplar line itself, cut around its
opening and its rarest words (`excerpt`), or, where no run of the line holds those words at a
bounded cost, the skeleton of those words (`keywords`); `terse_line` chooses. A leading log4j-style logger is shown as its
class: it is the line's source, like its header. Pure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from schemas.tokens import count_tokens
from services.compaction.log_patterns import WORD
from services.compaction.render import clip

SHORT_CHARS = 160

CHUNK = re.compile(r"(\s+|,(?=\S))")
_DIGITS = re.compile(r"\d+")
_WORDLIKE = re.compile(r"[A-Za-z]{3}")  # a chunk that holds a word, not only an id or a number
_DOTTED = re.compile(r"^([A-Za-z_][\w$]*\.){2,}[A-Za-z_][\w$]*:?$")
# A line's leading logger: a dotted path, or a `package.Class:` (`dfs.FSNamesystem:`) before the message.
_LOGGER = re.compile(r"^(([A-Za-z_][\w$]*\.){2,}[A-Za-z_][\w$]*:?|[A-Za-z_][\w$]*\.[A-Za-z_][\w$]*:)$")


def _package(match: re.Match[str]) -> str:
    """`org.apache.hadoop.ipc.Client:` -> `Client:` (a logger's class; its package is in the raw)."""
    return match.group(0).rsplit(".", 1)[-1]


def shape(chunk: str) -> str:
    """How a chunk reads in a terse form: digit runs as `*` (`[DFSClient_NONMAPREDUCE_*_*]`), a
    dotted Java/Go package path as its class (`Client:`), the rest as written."""
    if _DOTTED.match(chunk):
        return _DOTTED.sub(_package, chunk)
    return _DIGITS.sub("*", chunk)


def pattern_spread(messages: Sequence[str]) -> Counter[str]:
    """How many patterns (one exemplar message each) hold each chunk shape, and each chunk shape
    after the same opening chunk (`after_opening`): what `keywords` and `excerpt` call rare."""
    spread: Counter[str] = Counter()
    for message in messages:
        chunks = CHUNK.split(message.strip())[0::2]
        shapes = {shape(c) for c in chunks}
        spread.update(shapes)
        spread.update({after_opening(opening_of(chunks), s) for s in shapes})
    return spread


def opening_of(chunks: Sequence[str]) -> str:
    """A message's opening, as `excerpt` always shows it: its first `OPENING` chunks' shapes."""
    return " ".join(shape(c) for c in chunks[:OPENING])


OPENING = 3


def after_opening(opening: str, chunk: str) -> str:
    """The key `pattern_spread` counts a chunk under among the patterns opening with `opening`."""
    return f"{opening}\x1f{chunk}"


def keywords(
    message: str, opening: int, rare: int, spread: Counter[str], constant: frozenset[str] = frozenset()
) -> str:
    """The opening words of a message and its most distinctive words (fewest other patterns hold
    them, among the words every line of the pattern has: `constant`), in their order, `…` where
    words were skipped; digits shown as `*`, so a terse form says which message it is, never
    which values (the counts and ranges say that)."""
    pieces = CHUNK.split(message.strip())
    chunks = pieces[0::2]
    seps = pieces[1::2]
    if len(chunks) <= opening + rare + 1:
        return clip(" ".join(_DOTTED.sub(_package, c) for c in message.strip().split(" ")), SHORT_CHARS)
    wordy = [i for i, c in enumerate(chunks) if _WORDLIKE.search(c)]
    keep = set(wordy[:opening])
    fixed = [
        i
        for i in wordy
        if len(chunks[i]) <= 60 and {w for w in WORD.findall(chunks[i]) if not _DIGITS.search(w)} <= constant
    ]
    # rarest first (among the patterns that open alike, then among all); a path or URL names an
    # object, not the message, so it comes last
    opening_shape = opening_of(chunks)
    rank = sorted(
        fixed,
        key=lambda i: (
            "/" in chunks[i] or "\\" in chunks[i],
            spread[after_opening(opening_shape, shape(chunks[i]))],
            spread[shape(chunks[i])],
            -sum(ch.isalpha() for ch in chunks[i]),
            i,
        ),
    )
    for i in rank:
        if len(keep) >= opening + rare:
            break
        keep.add(i)
    return _runs(
        keep,
        len(chunks),
        lambda i: shape(chunks[i])[:60],
        lambda i: " " if seps[i].isspace() else seps[i],
        "...",
    )


def _runs(
    keep: set[int], count: int, piece: Callable[[int], str], sep: Callable[[int], str], gap: str
) -> str:
    """The kept pieces of `count`, in runs joined by their separators (`sep(i)` follows piece i), `gap`
    wherever pieces were left out: between runs, before the first and after the last if not the line's."""
    out = ""
    last = -1
    for i in sorted(keep):
        if i != last + 1:
            out += f" {gap} " if out else f"{gap} "
        elif out:
            out += sep(i - 1)
        out += piece(i)
        last = i
    return out + (f" {gap}" if last != count - 1 else "")


def _class_only(message: str) -> str:
    """A message led by its logger as a package path is shown with the logger's class (log4j's
    `%c{1}`): `org.apache.hadoop.ipc.Client: Retrying` -> `Client: Retrying`. The logger is the
    line's source, like its header; the words after it are the line as written."""
    first, sep, rest = message.partition(" ")
    return f"{_LOGGER.sub(_package, first)}{sep}{rest}" if rest and _LOGGER.match(first) else message


def _telling(chunks: Sequence[str], spread: Counter[str], constant: frozenset[str]) -> list[int]:
    """The pattern's chunks, most telling first: among the chunks all its lines share, the one fewest
    other patterns that open with the same word hold, then fewest patterns at all (a path or URL
    names an object, not the message, so it ranks last). The opening is always shown, so the
    telling word must tell the pattern apart from those that open alike (`ciod: Error loading …
    No such file or directory` beside `… Permission denied`)."""
    shared = [
        i
        for i, c in enumerate(chunks)
        if _WORDLIKE.search(c)
        and len(c) <= 60
        and {w for w in WORD.findall(c) if not _DIGITS.search(w)} <= constant
    ]

    opening_shape = opening_of(chunks)

    def rank(i: int) -> tuple[bool, int, int, int, int]:
        key = shape(chunks[i])
        pair = spread[after_opening(opening_shape, key)]
        return ("/" in chunks[i] or "\\" in chunks[i], pair, spread[key], -len(chunks[i]), i)

    return sorted(shared, key=rank)


def excerpt(message: str, limit: int, spread: Counter[str], constant: frozenset[str]) -> str:
    """The exemplar line itself in about `limit` characters: whole when it fits, else cut around
    its opening and its most telling word (`_telling`). Its words are kept whole and as written
    (values included), in runs of the line, `…` where the line was cut: it can be read and quoted,
    and it still says which message it is. The order of what is kept: the opening word and the
    telling one, the next words of the opening, the words after the telling one, the rest."""
    line = _class_only(message.strip())
    if len(line) <= limit:
        return line
    pieces = CHUNK.split(line)
    chunks, seps = pieces[0::2], pieces[1::2]
    telling = _telling(chunks, spread, constant)
    keep = {0, *telling[:1]}
    after = [i for t in telling[:1] for i in range(t + 1, min(t + 3, len(chunks)))]
    for order in (telling[1:2], range(1, min(4, len(chunks))), after, range(4, len(chunks))):
        for i in order:
            if i not in keep and len(_joined(chunks, seps, keep | {i})) > limit:
                break
            keep.add(i)
    return _joined(chunks, seps, keep)


# A terse form shows the line itself whenever it holds the skeleton's words in at most this many
# times the skeleton's tokens: the fitter then leaves out a lesser pattern (counted in `omitted`) to
# pay for it. The excerpt may run this much longer than the skeleton to reach those words.
LINE_COST = 1.5
_WIDER = (1.0, 1.25, 1.5)


def terse_line(
    message: str,
    limit: int,
    words: tuple[int, int],
    spread: Counter[str],
    constant: frozenset[str],
    cost: float = LINE_COST,
) -> str:
    """A terse form of the exemplar: the line itself, cut to the skeleton's length or `limit`
    (`excerpt`), or up to half as long again, as soon as it holds the words that say which message
    it is (the skeleton's opening words and its most telling one: `keywords` with `words[0]` opening
    words and one rare word) in at most `cost` (`LINE_COST`) times the skeleton's tokens; else the skeleton
    (`keywords`: `words` opening and rarest words), which says which message it is where no run of
    the line can (the telling word far from the opening, or a line of long values). The skeleton's
    further rare words do not outweigh a line that can be read and quoted (issue 36 item 3;
    benchmarks/bench_loki_exemplars.py counts the skeletons)."""
    skeleton = keywords(message, *words, spread, constant)
    needed = _said(keywords(message, words[0], 1, spread, constant).replace("...", " "))
    base = max(limit, len(skeleton))
    for wider in _WIDER:
        line = excerpt(message, int(base * wider), spread, constant)
        if line == skeleton:
            return skeleton
        if needed <= _said(_DIGITS.sub("*", line).replace("…", " ")):
            return line if count_tokens(line) <= cost * count_tokens(skeleton) else skeleton
    return skeleton


def _said(text: str) -> set[str]:
    """The words a terse form says, a logger (`dfs.FSNamesystem:`) as its class (`FSNamesystem:`):
    the skeleton keeps a short logger's package and the line shows its class, and both say the same."""
    return {_LOGGER.sub(_package, w) if _LOGGER.match(w) else w for w in text.split()}


def _joined(chunks: Sequence[str], seps: Sequence[str], keep: set[int]) -> str:
    """The kept chunks in runs of the line as written, `…` where chunks were left out; a chunk
    longer than a line's opening (a URL, a dump) is clipped on its own."""
    return _runs(
        keep,
        len(chunks),
        lambda i: chunks[i] if len(chunks[i]) <= 48 else chunks[i][:48] + "…",
        seps.__getitem__,
        "…",
    )
