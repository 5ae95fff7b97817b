"""Where the projector decodes its next batch while the current one commits: a thread or a process.

Decoding a record (pydantic validation, mapping, token counting, the COPY line) is about 20 us
of Python. In a helper thread (the default) it shares this interpreter's GIL with the writer and
the loop; a decoding process takes it off this interpreter, at the price of pickling the result
(a `Prepared` of plain dataclasses, no event objects: about 13 us per record for both sides).
Which wins depends on the cores the projector has to itself: on the 2-core benchmark machine,
where Postgres and the broker share those cores, the thread did (BENCHMARKS.md measures both in
one run); a projector pod with 2 cores and Postgres elsewhere is what the process is for.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Literal

from services.projector.writer import Incoming, Prepared, prepare

DecodeMode = Literal["thread", "process"]
DECODE_MODES: tuple[DecodeMode, ...] = ("thread", "process")
PARENT_CHECK_S = 0.5
COLLECT_EVERY_EVENTS = 50_000  # as GcPacer in the parent: garbage has a bound, collection is rare

__all__ = ["DECODE_MODES", "BatchDecoder", "BrokenProcessPool", "DecodeMode"]


class BatchDecoder:
    """One decoding worker (a thread or a process), one batch at a time: `submit` -> Future[Prepared]."""

    def __init__(self, mode: DecodeMode, name: str = "projector-decode") -> None:
        if mode not in DECODE_MODES:
            raise ValueError(f"decode mode must be one of {', '.join(DECODE_MODES)}, not {mode!r}")
        self.mode = mode
        self.name = name
        self._executor = self._start()

    def _start(self) -> Executor:
        if self.mode == "thread":
            return ThreadPoolExecutor(1, thread_name_prefix=self.name)
        # spawn, not fork: the parent runs librdkafka and psycopg threads, which fork would copy mid-call.
        executor = ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"), initializer=_start_decoding_process
        )
        executor.submit(_ready).result()  # started (imports, BPE ranks) before the first batch is timed
        return executor

    def submit(self, batch: Sequence[Incoming]) -> Future[Prepared]:
        if self.mode == "thread":
            return self._executor.submit(prepare, batch)
        return self._executor.submit(_prepare_in_process, list(batch))

    def restart(self) -> None:
        """After the decoding process died (BrokenProcessPool): a new one; the batch is decoded again."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = self._start()

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


# --- inside the decoding process ----------------------------------------------------------------

_events_since_collect = 0


def _start_decoding_process() -> None:
    """Load the BPE ranks once, collect garbage by count, not by allocation (see GcPacer), and
    exit with the projector: a pool worker whose parent was killed -9 would wait forever."""
    from schemas import tokens

    parent = os.getppid()
    threading.Thread(target=_exit_with_parent, args=(parent,), name="parent-watch", daemon=True).start()
    tokens.encoding()
    gc.freeze()
    gc.disable()


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _ready() -> bool:
    return True


def _prepare_in_process(batch: list[Incoming]) -> Prepared:
    global _events_since_collect
    prepared = prepare(batch)
    _events_since_collect += len(batch)
    if _events_since_collect >= COLLECT_EVERY_EVENTS:
        _events_since_collect = 0
        gc.collect()
    return prepared
