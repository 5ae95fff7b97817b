"""`mine_words` against the plain statement of its method (module docstring of log_patterns): each
message rooted one at a time, every word's frequency counted as a (position, word) pair. The miner
roots each set of alike messages once and counts by column (issue 20); the groups must not change."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from services.compaction.log_patterns import WILD, Group, _split, mine_words


def reference(masked: Sequence[tuple[str, ...]]) -> list[Group]:
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, toks in enumerate(masked):
        by_length[len(toks)].append(index)
    groups: list[Group] = []
    for indexes in by_length.values():
        frequency: Counter[tuple[int, str]] = Counter()
        for index in indexes:
            frequency.update(enumerate(masked[index]))
        roots: dict[tuple[tuple[int, str], ...], list[int]] = defaultdict(list)
        for index in indexes:
            toks = masked[index]
            counts = [frequency[(pos, tok)] for pos, tok in enumerate(toks)]
            if not counts:
                roots[()].append(index)
                continue
            shared = Counter(counts)
            root = max(shared, key=lambda f: (shared[f], f))
            roots[tuple((p, t) for p, t in enumerate(toks) if counts[p] == root)].append(index)
        for members in roots.values():
            groups.extend(_split(members, masked))
    # templates that say the same constant words (two or more) in the same order are one group,
    # under the template of its largest part
    merged: dict[tuple[str, ...], list[Group]] = defaultdict(list)
    for group in groups:
        constants = tuple(w for w in group.template if not w.endswith(WILD))
        merged[constants if len(constants) >= 2 else group.template].append(group)
    out = []
    for parts in merged.values():
        largest = max(parts, key=lambda g: (len(g.members), -g.members[0]))
        out.append(Group(largest.template, tuple(sorted(i for g in parts for i in g.members))))
    out.sort(key=lambda g: g.members[0])
    return out


WORDS = st.sampled_from(
    ["GET", "POST", "user", "login", "failed", "ok", "=x", "=y", WILD, WILD, "db", "a", "b"]
)
MESSAGES = st.lists(st.lists(WORDS, max_size=6).map(tuple), max_size=60)


@settings(max_examples=300)
@given(MESSAGES)
def test_the_miner_groups_as_the_plain_method(masked: list[tuple[str, ...]]) -> None:
    assert mine_words(masked) == reference(masked)


def test_templates_that_differ_only_in_their_variables_are_one() -> None:
    masked = (
        [("user", WILD, "login", "failed")] * 3
        + [("user", "login", "failed")] * 2
        + [("user", "login", "ok")]
    )
    groups = mine_words(masked)
    assert groups == reference(masked)
    assert [g.members for g in groups] == [(0, 1, 2, 3, 4), (5,)]
    assert groups[0].template == ("user", WILD, "login", "failed")


def test_repeated_templates_with_interleaved_variants() -> None:
    masked = [("user", WILD, "login", "failed"), ("user", WILD, "login", "ok")] * 5 + [
        ("db", WILD),
        ("db", "a"),
    ]
    assert mine_words(masked) == reference(masked)
    assert len(mine_words(masked)) >= 2
