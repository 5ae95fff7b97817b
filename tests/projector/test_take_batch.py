"""take_batch: how a projector batch is cut from what the Kafka client has buffered.

The consumer here is a stand-in for confluent-kafka's buffer (a list of records), because what is
tested is the cutting rule, not Kafka: block only for the first record, then drain what is
buffered, and stop at `size` records or once the values pass `max_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.projector.intake import DRAIN_STEP, take_batch


@dataclass
class Record:
    payload: bytes

    def value(self) -> bytes:
        return self.payload


@dataclass
class Buffered:
    records: list[Record]
    calls: list[tuple[int, float]] = field(default_factory=list)

    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        self.calls.append((num_messages, timeout))
        out, self.records = self.records[:num_messages], self.records[num_messages:]
        return out


def test_it_stops_at_size_and_never_blocks_once_it_has_records() -> None:
    buffer = Buffered([Record(b"x") for _ in range(5 * DRAIN_STEP)])
    batch = take_batch(buffer, 3 * DRAIN_STEP + 7, timeout=9.0)  # type: ignore[arg-type]
    assert len(batch) == 3 * DRAIN_STEP + 7
    assert all(timeout == 0 for _n, timeout in buffer.calls)
    assert len(buffer.records) == 2 * DRAIN_STEP - 7  # the rest stays buffered for the next batch


def test_it_stops_once_the_values_pass_max_bytes() -> None:
    buffer = Buffered([Record(b"v" * 10_000) for _ in range(10 * DRAIN_STEP)])
    batch = take_batch(buffer, 100_000, timeout=1.0, max_bytes=25 * 10_000 * DRAIN_STEP // 10)  # type: ignore[arg-type]
    held = sum(len(r.value() or b"") for r in batch)
    assert held >= 25 * 10_000 * DRAIN_STEP // 10  # it reached the cap ...
    assert held < 25 * 10_000 * DRAIN_STEP // 10 + DRAIN_STEP * 10_000  # ... and passed it by under one step
    assert len(batch) < 10 * DRAIN_STEP


def test_it_blocks_for_the_first_record_only_when_nothing_is_buffered() -> None:
    empty = Buffered([])
    assert take_batch(empty, 100, timeout=0.3) == []  # type: ignore[arg-type]
    assert empty.calls == [(100, 0), (1, 0.3)]
    one = Buffered([Record(b"a")])
    assert [r.value() for r in take_batch(one, 100, timeout=0.3)] == [b"a"]  # type: ignore[arg-type]
