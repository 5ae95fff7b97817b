"""Garbage collection paced by the projection runner (see `GcPacer`)."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


class GcPacer:
    """Collect garbage every `every_events` events instead of whenever objects pile up.

    A batch keeps thousands of freshly decoded events alive until it commits, so CPython's
    automatic collector runs again and again over objects that are all still in use; on the
    projector benchmark that was about half of the time. Inside `paced()` automatic collection
    is off (process-wide, so nested or concurrent pacers count their users) and what existed
    before is frozen; `tick(n)` after each batch runs a full collection once `every_events`
    events or `every_batches` batches have gone by, so cyclic garbage still has a bound.
    """

    _lock = threading.Lock()
    _users = 0
    _was_enabled = True

    # The projector makes no cyclic garbage on its normal path (a collection after 110,000 events
    # found none), and a collection walks every live object (two batches in hand): so, rarely.
    def __init__(self, every_events: int = 400_000, every_batches: int = 200) -> None:
        self.every_events = every_events
        self.every_batches = every_batches
        self._events = 0
        self._batches = 0

    @contextlib.contextmanager
    def paced(self) -> Iterator[GcPacer]:
        with GcPacer._lock:
            if GcPacer._users == 0:
                GcPacer._was_enabled = gc.isenabled()
                gc.freeze()
                gc.disable()
            GcPacer._users += 1
        try:
            yield self
        finally:
            with GcPacer._lock:
                GcPacer._users -= 1
                if GcPacer._users == 0:
                    gc.unfreeze()
                    if GcPacer._was_enabled:
                        gc.enable()

    def tick(self, events: int) -> None:
        self._events += events
        self._batches += 1
        if self._events >= self.every_events or self._batches >= self.every_batches:
            self._events = self._batches = 0
            gc.collect()
