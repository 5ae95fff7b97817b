"""A memo for a pure function's answers: a dict that empties itself when full.

The answers never go stale (the same text always has the same token count, the same second the same
ISO text), so a full memo is simply cleared: no LRU bookkeeping on the hot path, whose lookups stay
`dict.get` in C. The bound keeps a long-running worker's memory flat whatever it is fed.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Memo(dict[K, V]):
    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def keep(self, key: K, value: V) -> V:
        """Remember `value` for `key` (emptying the memo first when it is full); returns `value`."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


__all__ = ["Memo"]
