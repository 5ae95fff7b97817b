"""A long turn clipped with a pointer: its head and tail verbatim, what is not shown counted
(characters and lines: counting the tokens of a 400 KB remainder would cost more than the clip).

Pure. A human's words are never paraphrased: the clipped text is the message's own first and
last characters, cut at a line or word boundary where one is near, and the marker between them
says how many characters and lines are not shown and which id `get_evidence` reads whole.
"""

from __future__ import annotations

from schemas.tokens import count_tokens

MARKER_TOKENS = 40  # the marker's own size, held back from the limit


def marker(hidden: str, evidence_id: str) -> str:
    return (
        f"\n[... {len(hidden):,} characters ({hidden.count(chr(10)) + 1:,} lines) not shown; "
        f"get_evidence({evidence_id}) reads it whole ...]\n"
    )


def clip_text(text: str, limit: int, evidence_id: str) -> str:
    """`text` itself when it is within `limit` tokens, else its head and tail with a counted marker.

    Two thirds of the limit go to the head (where a message states its point), the rest to the tail.
    """
    if within(text, limit):
        return text
    room = max(limit - MARKER_TOKENS, 2)
    head = prefix_within(text, room * 2 // 3)
    tail = suffix_within(text[len(head) :], room - count_tokens(head))
    hidden = text[len(head) : len(text) - len(tail)]
    return head + marker(hidden, evidence_id) + tail


def within(text: str, limit: int) -> bool:
    """Whether `text` is at most `limit` tokens; a long text's head is counted first (cheap for a paste)."""
    if len(text) <= limit:  # a token is at least one character
        return True
    return count_tokens(text[: limit * 8]) <= limit and count_tokens(text) <= limit


def prefix_within(text: str, tokens: int) -> str:
    """The longest prefix of at most `tokens` tokens, backed off to a line or word end when one is near."""
    lo, hi = 0, min(len(text), max(tokens, 0) * 16)
    while lo < hi:  # the largest n with count_tokens(text[:n]) <= tokens
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[: _boundary(text[:lo], from_end=True)]


def suffix_within(text: str, tokens: int) -> str:
    """The longest suffix of at most `tokens` tokens, started at a line or word start when one is near."""
    lo, hi = 0, min(len(text), max(tokens, 0) * 16)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[len(text) - mid :]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    piece = text[len(text) - lo :] if lo else ""
    return piece[_boundary(piece, from_end=False) :]


def _boundary(piece: str, *, from_end: bool) -> int:
    """Where to cut `piece` so a line or word stays whole, if that costs less than a fifth of it."""
    slack = len(piece) // 5
    for sep in ("\n", " "):
        at = piece.rfind(sep) + 1 if from_end else piece.find(sep) + 1
        if at > 0 and (len(piece) - at if from_end else at) <= slack:
            return at
    return len(piece) if from_end else 0
