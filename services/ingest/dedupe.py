"""Slack retry dedupe: event ids acknowledged recently, in a bounded TTL cache.

An id enters the cache only after its events were acked by the broker, so a retry of a
request that failed (503) is processed again; a retry of one that succeeded produces nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable

MAX_KEY_CHARS = 64  # Slack's event ids are ~11 characters; a longer key is kept as its digest


def bounded_key(key: str) -> str:
    """The key itself when short, else a fixed-size digest of it: the cache's bytes stay bounded
    (max_entries x ~100 bytes) whatever the ids a signed sender makes up."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()


class TtlSet:
    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __contains__(self, key: str) -> bool:
        self._expire()
        return bounded_key(key) in self._seen

    def __len__(self) -> int:
        self._expire()
        return len(self._seen)

    def add(self, key: str) -> None:
        key = bounded_key(key)
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
