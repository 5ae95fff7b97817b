"""Brain, the log parser of Yu, He, Chen and Wu ("Brain: Log Parsing with Bidirectional Parallel Tree",
IEEE Transactions on Services Computing, 2023), as a baseline for the grouping benchmarks (dev only).

Written here from the paper's description, not from its code:

1. Preprocessing. A message is cut into words at white space and common delimiters, and common
   variables (numbers, IP addresses with their ports, hexadecimal values, times and dates: a word of
   digits and punctuation only) are replaced by `<*>` by regular expressions.
2. Initial groups. Messages are taken by their number of words. Every word gets its frequency at
   its position among the messages of that length. A logging statement writes its constant words on
   every message it produces, so they share one frequency: a message's *longest common pattern* is
   its largest set of words with one frequency (ties: the larger frequency). Messages with the same
   longest common pattern form an initial group, the root of its tree.
3. Bidirectional tree. The columns of a group outside the root go to one of two directions.
   Parent direction: its words are more frequent than the root (a constant several statements
   share); a column holding one word in the group is a constant, else a variable. Child direction:
   its words are less frequent than the root; the column with the fewest distinct words splits the
   group when it holds at most `THRESHOLD` of them (each is a constant of its own template), and
   the split is applied again to each child; a column with more distinct words is a variable.
4. The template of a final group is its words, `<*>` where they vary; messages with the same template
   are one group, as Brain's output is read by its evaluation.

The paper tunes the child threshold per dataset; here one value serves every system, the same rule
we hold our own miner to (no per-system tuning).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

THRESHOLD = 4
WILD = "<*>"

_DELIMITERS = re.compile(r"[\s,;:=()\[\]{}\"'|]+")
_ADDRESS = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?(?![\w.])")  # IPv4, with a port
_COMMON_VARIABLES = (
    re.compile(
        r"^(?:0x[0-9a-fA-F]+|(?=[a-fA-F]*\d)[0-9a-fA-F]{6,})$"
    ),  # hexadecimal (ids, addresses, hashes)
    re.compile(r"^[-+]?\d+(?:[.,/\-]\d+)*[a-zA-Z%]{0,2}$"),  # numbers, sizes, dates (2005-06-03, 12ms)
)

Tokens = tuple[str, ...]


def tokenize(message: str) -> Tokens:
    """Step 1: the words of a message, common variables replaced by `<*>`."""
    return tuple(
        WILD if word == WILD or any(rx.match(word) for rx in _COMMON_VARIABLES) else word
        for word in _DELIMITERS.split(_ADDRESS.sub(WILD, message.strip()))
        if word
    )


def brain_groups(messages: Sequence[str], threshold: int = THRESHOLD) -> list[str]:
    """The template Brain gives each message (messages with one template are one group)."""
    tokens = [tokenize(m) for m in messages]
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, words in enumerate(tokens):
        by_length[len(words)].append(index)
    out = [""] * len(messages)
    for indexes in by_length.values():
        frequency = Counter((pos, word) for i in indexes for pos, word in enumerate(tokens[i]))
        for root_frequency, members in _initial_groups(indexes, tokens, frequency).values():
            for template, group in _tree(members, tokens, frequency, root_frequency, threshold):
                for i in group:
                    out[i] = " ".join(template)
    return out


def _initial_groups(
    indexes: list[int], tokens: Sequence[Tokens], frequency: Counter[tuple[int, str]]
) -> dict[tuple[tuple[int, str], ...], tuple[int, list[int]]]:
    """Step 2: messages keyed by their longest common pattern, with its frequency."""
    groups: dict[tuple[tuple[int, str], ...], tuple[int, list[int]]] = {}
    for i in indexes:
        counts = [frequency[(pos, word)] for pos, word in enumerate(tokens[i])]
        if not counts:
            groups.setdefault((), (0, []))[1].append(i)
            continue
        shared = Counter(counts)
        root = max(shared, key=lambda f: (shared[f], f))
        key = tuple((pos, word) for pos, word in enumerate(tokens[i]) if counts[pos] == root)
        groups.setdefault(key, (root, []))[1].append(i)
    return groups


def _tree(
    members: list[int],
    tokens: Sequence[Tokens],
    frequency: Counter[tuple[int, str]],
    root_frequency: int,
    threshold: int,
) -> list[tuple[Tokens, list[int]]]:
    """Step 3: the final groups under one root, each with its template."""
    width = len(tokens[members[0]])
    children = [
        pos for pos in range(width) if any(frequency[(pos, tokens[i][pos])] < root_frequency for i in members)
    ]
    done: list[tuple[Tokens, list[int]]] = []
    stack = [members]
    while stack:
        group = stack.pop()
        distinct = {pos: {tokens[i][pos] for i in group} for pos in children}
        splitting = sorted((len(words), pos) for pos, words in distinct.items() if len(words) > 1)
        if splitting and splitting[0][0] <= threshold:
            parts: dict[str, list[int]] = defaultdict(list)
            for i in group:
                parts[tokens[i][splitting[0][1]]].append(i)
            stack.extend(parts.values())
            continue
        columns = zip(*(tokens[i] for i in group), strict=True)
        template = tuple(next(iter(set(c))) if len(set(c)) == 1 else WILD for c in columns)
        done.append((template, group))
    return done
