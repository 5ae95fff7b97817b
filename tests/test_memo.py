"""schemas.memo.Memo: remembers, returns what it keeps, and never holds more than its limit."""

from __future__ import annotations

from schemas.memo import Memo


def test_keep_remembers_and_a_full_memo_starts_over() -> None:
    memo: Memo[str, int] = Memo(3)
    assert memo.keep("a", 1) == 1 and memo.get("a") == 1
    for i, key in enumerate("bcdefg"):
        memo.keep(key, i)
        assert len(memo) <= 3
    assert memo.get("g") == 5  # the newest answer is always kept
    assert memo.get("a") is None  # emptied on the way
