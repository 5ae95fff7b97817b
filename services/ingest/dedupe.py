"""Slack retry dedupe: event ids acknowledged recently, in a bounded TTL cache.

An id enters the cache only after its events were acked by the broker, so a retry of a
request that failed (503) is processed again; a retry of one that succeeded produces nothing.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class TtlSet:
    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        self._expire()
        return key in self._seen

    def __len__(self) -> int:
        self._expire()
        return len(self._seen)

    def add(self, key: str) -> None:
        self._seen[key] = self._clock()
        self._seen.move_to_end(key)
        while len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)

    def _expire(self) -> None:
        cutoff = self._clock() - self.ttl_s
        while self._seen:
            key, added = next(iter(self._seen.items()))
            if added >= cutoff:
                break
            del self._seen[key]
