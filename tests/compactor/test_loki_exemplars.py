"""Issue 36 item 3: a kept Loki pattern's terse forms show its verbatim exemplar line wherever that
says what the skeleton of its words says in no more tokens (`log_exemplar.terse`)."""

from __future__ import annotations

from collections import Counter

from schemas.tokens import count_tokens
from services.compaction import log_exemplar

_LINE = (
    "org.apache.hadoop.ipc.Client: Retrying connect to server: host-17/10.0.0.7:8030. Already tried 3 time(s)"
)


def _words(text: str) -> list[str]:
    return [w for w in text.replace("…", " ").split() if w]


def test_an_excerpt_is_the_line_as_written_with_its_logger_as_a_class_and_cuts_marked() -> None:
    constant = frozenset({"Retrying", "connect", "to", "server", "Already", "tried", "time", "s"})
    out = log_exemplar.excerpt(_LINE, 40, Counter(), constant)
    assert out.startswith("Client: Retrying")
    assert out.endswith(" …")  # a cut is never silent
    line = _LINE.replace("org.apache.hadoop.ipc.", "")
    for word in _words(out):  # every word as written, digits included: no `*` masks
        assert word in line.split()


def test_a_short_line_is_shown_whole() -> None:
    assert (
        log_exemplar.excerpt("data TLB error interrupt", 40, Counter(), frozenset())
        == "data TLB error interrupt"
    )


def test_the_terse_form_is_the_verbatim_line_when_it_costs_no_more_than_the_skeleton() -> None:
    message = "Received disconnect from 10.0.0.7: 11: Bye Bye [preauth]"
    constant = frozenset({"Received", "disconnect", "from", "Bye", "preauth"})
    skeleton = log_exemplar.keywords(message, 2, 2, Counter(), constant)
    out = log_exemplar.terse_line(message, 40, (2, 2), Counter(), constant)
    assert "..." not in out  # not the skeleton's `...`: runs of the line itself, cut with `…`
    assert all(run.strip() in message for run in out.split("…") if run.strip())
    assert count_tokens(out) <= count_tokens(skeleton)


def test_the_skeleton_stays_when_the_line_would_lose_its_telling_words() -> None:
    # three rare words far apart: the excerpt keeps runs around the rarest two, the skeleton all three
    pad = " ".join(f"v{i}x" for i in range(12))
    message = f"open the door {pad} rareone {pad} raretwo {pad} rarethree {pad}"
    constant = frozenset({"open", "the", "door", "rareone", "raretwo", "rarethree"})
    spread = Counter({"open": 9, "the": 9, "door": 9, "rareone": 1, "raretwo": 1, "rarethree": 1})
    skeleton = log_exemplar.keywords(message, 4, 3, spread, constant)
    assert {"rareone", "raretwo", "rarethree"} <= set(skeleton.split())
    assert log_exemplar.terse_line(message, 40, (4, 3), spread, constant) == skeleton
