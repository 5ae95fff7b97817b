"""How many rows of recall's inverted index each of a query's keys may read (pure).

The by-signature stage of recall's candidate query reads, per key, the newest incidents holding it
(`incident_recall_keys`, migration 009) and ranks them by the summed weight of the keys they share. Its
work grows with the keys and their holders; at 100,000 incidents every key has hundreds of holders and a
common one tens of thousands. So the stage reads within one budget of rows, handed out in the order the
keys pick (most telling first): a rare key reads its holders up to `PER_KEY`; the common keys, whose
weight (IDF) is small, share what is left, each at least `KEY_FLOOR` rows, so an incident with only
common pod reasons still finds candidates. The rows a key can read are bounded by its document frequency
(`incident_signature_counts`), so a rare key with few holders leaves its unused rows to the next one.

The bound: the stage reads at most `SIGNATURE_ROWS` index rows per visible channel, whatever the keys, as
long as the counts are right (the projector keeps them in the profiles' transaction; a test checks they equal
a recount); a stale count can cost at most `PER_KEY` rows for its key. Tests: `tests/recall/test_recall_budget.py`
(the allocation), `tests/recall/test_candidate_bound.py` (the statement, counted by Postgres).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

SIGNATURE_ROWS: Final = 800  # index rows the by-signature stage reads at most (per visible channel)
PER_KEY: Final = 200  # the newest holders one key reads at most
KEY_FLOOR: Final = 10  # what every picking key reads at least: a common key is weak, not meaningless


def key_limits(
    keys: Sequence[str],
    holders: Mapping[str, int],
    *,
    budget: int = SIGNATURE_ROWS,
    per_key: int = PER_KEY,
    floor: int = KEY_FLOOR,
) -> list[int]:
    """Each key's LIMIT, for `keys` in picking order (most telling first); `holders` is each key's count
    of incidents (a key without one has none). The rows read, sum(min(limit, holders)), stay within
    `budget` when the budget covers every key's floor; a smaller budget is a caller's mistake."""
    if budget < floor * len(keys):
        raise ValueError(f"budget {budget} is below {len(keys)} keys x floor {floor}")
    left = budget
    limits: list[int] = []
    for i, key in enumerate(keys):
        reserve = floor * (len(keys) - i - 1)  # the floors of the keys after this one
        limit = max(floor, min(per_key, left - reserve))
        limits.append(limit)
        left -= min(limit, max(0, holders.get(key, 0)))
    return limits


def rows_read(limits: Sequence[int], keys: Sequence[str], holders: Mapping[str, int]) -> int:
    """The index rows the stage reads at most with these limits (per visible channel)."""
    return sum(min(limit, max(0, holders.get(k, 0))) for limit, k in zip(limits, keys, strict=True))
