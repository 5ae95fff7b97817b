"""The one projection runner: live projection and replay are the same loop over different sources.

A source says where records come from and where to resume (a consumer group that follows the
topic for ever, or a fixed range of offsets that ends); the runner owns everything else: the
batch decoded in a helper thread while the previous one commits (psycopg waits for Postgres
without the GIL), the GC pacer, dropping a batch made stale by a rebalance, re-seeking after an
offset conflict, and a shutdown that never leaves half a batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from services.projector.decoding import Incoming, Prepared, prepare
from services.projector.gc_pacer import GcPacer
from services.projector.metrics import Metrics
from services.projector.plan import WriteOutcome
from services.projector.writer import BatchWriter, OffsetConflict, Stopped

log = logging.getLogger("projector")


class Source(Protocol):
    """Where a run reads records. The writer's `expected` offsets are the source's to keep current."""

    @property
    def generation(self) -> int:
        """Bumped by every assignment change: a batch taken under an older one is stale."""
        ...

    def open(self, writer: BatchWriter, stop: threading.Event) -> None:
        """Start reading from the offsets the writer's Postgres holds (or from wherever the mode says)."""
        ...

    def take(self, in_hand: bool) -> list[Incoming]:
        """The next batch of records for partitions the writer owns; `in_hand`: a batch waits to commit."""
        ...

    def exhausted(self) -> bool:
        """Nothing more will come (a catch-up reached its end); a live source never is."""
        ...

    def reseek(self, cause: OffsetConflict | None) -> None:
        """Read on from the offsets in Postgres, after a stale batch or an offset conflict."""
        ...

    def committed(self, outcome: WriteOutcome) -> None:
        """A batch is in Postgres with its offsets (report it: Kafka commit, progress)."""
        ...

    def after_batch(self) -> None:
        """Once per turn of the loop (e.g. lag metrics)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RunStats:
    events: int
    dead_letters: int
    rounds_committed: int
    seconds: float  # from the end of `Source.open` to the last commit


@dataclass(frozen=True)
class InFlight:
    """A batch being decoded, and the source's generation it was taken under."""

    prepared: Future[Prepared]
    generation: int


class ProjectionRunner:
    """Projects what `source` yields through `writer`, batch by batch, until stopped or exhausted."""

    def __init__(self, source: Source, writer: BatchWriter, metrics: Metrics) -> None:
        self.source = source
        self.writer = writer
        self.metrics = metrics

    def run(self, stop: threading.Event, on_commit: Callable[[WriteOutcome], None] | None = None) -> RunStats:
        """Two batches are in hand at once: the next is decoded while this one commits. A batch is
        only written if the source's generation did not change since it was taken; otherwise both
        are dropped and the source re-reads from the offsets in Postgres. `on_commit` is called in
        this thread right after each commit (a benchmark timestamps the work where it happens)."""
        source, writer = self.source, self.writer
        events = letters = rounds = 0
        decoder = ThreadPoolExecutor(1, thread_name_prefix="projector-decode")
        in_flight: InFlight | None = None
        pacer = GcPacer()
        try:
            source.open(writer, stop)
            began = time.monotonic()
            with pacer.paced():
                while not stop.is_set():
                    if source.exhausted() and in_flight is None:
                        break
                    batch = [] if source.exhausted() else source.take(in_flight is not None)
                    self.metrics.heartbeat.beat()
                    if in_flight is not None and in_flight.generation != source.generation:
                        log.info("rebalanced while a batch was in hand: dropped, re-reading from Postgres")
                        in_flight = None
                        source.reseek(None)
                        continue
                    upcoming = InFlight(decoder.submit(prepare, batch), source.generation) if batch else None
                    if in_flight is not None:
                        try:
                            outcome = writer.write_prepared(in_flight.prepared.result(), stop)
                        except OffsetConflict as exc:
                            log.warning("offset conflict, re-seeking from Postgres: %s", exc)
                            in_flight = None
                            source.reseek(exc)
                            continue
                        except Stopped:
                            break
                        source.committed(outcome)
                        events += outcome.events
                        letters += outcome.dead_letters
                        rounds += outcome.rounds_committed
                        if on_commit is not None:
                            on_commit(outcome)
                        pacer.tick(outcome.events + outcome.dead_letters)
                    in_flight = upcoming
                    source.after_batch()
            return RunStats(events, letters, rounds, time.monotonic() - began)
        finally:
            decoder.shutdown(wait=True, cancel_futures=True)
            source.close()
            writer.producer.flush(10)
            writer.close()
