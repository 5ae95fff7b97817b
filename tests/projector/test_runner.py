"""The projection runner's loop with a scripted source and writer (no Kafka, no Postgres).

What is tested is the loop's own rule, which Kafka and Postgres tests reach only by luck of
timing: a batch taken before a rebalance is never written, an offset conflict re-seeks and drops
both batches in hand, and a source that ends ends the run once the last batch is committed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from services.projector.decoding import Incoming, Prepared
from services.projector.metrics import Metrics
from services.projector.plan import WriteOutcome
from services.projector.runner import ProjectionRunner
from services.projector.writer import OffsetConflict


def batch(*offsets: int) -> list[Incoming]:
    return [Incoming(0, o, None, None, 0.0) for o in offsets]


@dataclass
class ScriptedSource:
    """Yields `script` in order; a `"rebalance"` entry bumps the generation, as a rebalance in poll does."""

    script: list[list[Incoming] | str]
    after_reseek: list[list[Incoming]] = field(default_factory=list)
    generation: int = 0
    reseeks: list[OffsetConflict | None] = field(default_factory=list)
    committed_offsets: list[dict[int, int]] = field(default_factory=list)
    closed: bool = False

    def open(self, writer: object, stop: threading.Event) -> None:
        pass

    def take(self, in_hand: bool) -> list[Incoming]:
        entry = self.script.pop(0)
        if entry == "rebalance":
            self.generation += 1
            entry = self.script.pop(0)
        assert not isinstance(entry, str)
        return entry

    def exhausted(self) -> bool:
        return not self.script

    def reseek(self, cause: OffsetConflict | None) -> None:
        self.reseeks.append(cause)
        self.script = [*self.after_reseek, *self.script]
        self.after_reseek = []

    def committed(self, outcome: WriteOutcome) -> None:
        self.committed_offsets.append(outcome.next_offsets)

    def after_batch(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class _Producer:
    def flush(self, timeout: float) -> int:
        return 0


@dataclass
class ScriptedWriter:
    conflict_at: set[int] = field(default_factory=set)  # first offsets of batches that conflict once
    written: list[list[int]] = field(default_factory=list)
    producer: _Producer = field(default_factory=_Producer)
    closed: bool = False

    def write_prepared(self, prepared: Prepared, stop: threading.Event | None = None) -> WriteOutcome:
        offsets = [d.incoming.offset for d in prepared.decoded]
        if offsets[0] in self.conflict_at:
            self.conflict_at.discard(offsets[0])
            raise OffsetConflict(f"batch at {offsets[0]}")
        self.written.append(offsets)
        return WriteOutcome(len(offsets), 0, 0, dict(prepared.next_offsets))

    def close(self) -> None:
        self.closed = True


def run(source: ScriptedSource, writer: ScriptedWriter) -> None:
    ProjectionRunner(source, writer, Metrics()).run(threading.Event())  # type: ignore[arg-type]


def test_a_batch_taken_before_a_rebalance_is_never_written() -> None:
    source = ScriptedSource(
        [batch(0, 1), "rebalance", batch(2, 3), batch(9)], after_reseek=[batch(0, 1), batch(2, 3)]
    )
    writer = ScriptedWriter()
    run(source, writer)
    assert source.reseeks == [None]
    assert writer.written == [[0, 1], [2, 3], [9]]  # the stale [0, 1] was dropped, then read again
    assert source.committed_offsets == [{0: 2}, {0: 4}, {0: 10}]
    assert source.closed and writer.closed


def test_an_offset_conflict_drops_both_batches_in_hand_and_re_seeks() -> None:
    source = ScriptedSource([batch(0), batch(1), batch(2)], after_reseek=[batch(0), batch(1)])
    writer = ScriptedWriter(conflict_at={0})
    run(source, writer)
    assert len(source.reseeks) == 1 and isinstance(source.reseeks[0], OffsetConflict)
    assert writer.written == [[0], [1], [2]]  # [1], decoded while [0] failed, was not written out of turn
