"""Which wake offsets may be committed: only up to the first one whose round is not yet acked.

Rounds of different threads finish out of order; a partition's committed offset only
moves past a wake once that wake and every earlier one on the partition are done.
"""

from __future__ import annotations

import threading


class OffsetTracker:
    def __init__(self) -> None:
        self._pending: dict[tuple[str, int], dict[int, bool]] = {}
        self._lock = threading.Lock()

    def started(self, topic: str, partition: int, offset: int) -> None:
        with self._lock:
            self._pending.setdefault((topic, partition), {})[offset] = False

    def finished(self, topic: str, partition: int, offset: int) -> None:
        with self._lock:
            offsets = self._pending.get((topic, partition))
            if offsets is not None and offset in offsets:
                offsets[offset] = True

    def in_flight(self) -> int:
        with self._lock:
            return sum(1 for offsets in self._pending.values() for done in offsets.values() if not done)

    def committable(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> next offset to commit, dropping the finished prefix."""
        out: dict[tuple[str, int], int] = {}
        with self._lock:
            for key, offsets in self._pending.items():
                nxt = None
                for offset in sorted(offsets):
                    if not offsets[offset]:
                        break
                    nxt = offset + 1
                    del offsets[offset]
                if nxt is not None:
                    out[key] = nxt
        return out

    def forget(self, topic: str, partition: int) -> None:
        """A revoked partition: its unfinished wakes will be redelivered to the new owner."""
        with self._lock:
            self._pending.pop((topic, partition), None)
