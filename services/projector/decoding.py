"""Kafka records -> projection operations, a batch at a time, with no I/O.

Pure, so the runner can decode the next batch in a helper thread while the writer commits this
one, and a replay, a retry and a live run derive the same operations from the same records.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from confluent_kafka import Message
from pydantic import TypeAdapter

from schemas.events import EventBase, EventDecodeError, HumanMessage, ThreadEvent, parse_event
from services.projector.mapping import MappingError, Op, map_event, reported_tokens_mismatch
from services.projector.row_format import render_copy_texts

_EVENTS: TypeAdapter[Any] = TypeAdapter(ThreadEvent)


class Incoming(NamedTuple):
    """One consumed Kafka record, detached from the client library (a tuple: one is made per
    record on the consuming thread, and a frozen dataclass costs several times more to make)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    received: float  # time.time() when consumed

    @classmethod
    def from_message(cls, message: Message, received: float) -> Incoming:
        return cls(message.partition(), message.offset(), message.key(), message.value(), received)  # type: ignore[arg-type]


@dataclass
class Decoded:
    """One record as the writer needs it: its operations, or why it has none.

    It keeps what the writer reports about the event (thread, id, event time) rather than the
    event object: two batches of pydantic events held until commit made every GC pass longer.
    """

    incoming: Incoming
    ops: list[Op] = field(default_factory=list)
    error: str | None = None
    thread_ts: str | None = None
    message_id: str | None = None
    event_time: float | None = None  # epoch seconds
    tokens_mismatch: tuple[int, int] | None = None  # (carried by the event, counted by the projection)


def decode(incoming: Incoming) -> Decoded:
    """Parse and map one record; any reason it cannot be projected becomes `error`."""
    decoded = Decoded(incoming)
    if incoming.value is None:
        decoded.error = "empty record (no value)"
        return decoded
    try:
        try:  # the fast path: pydantic parses the bytes itself; parse_event gives the reason otherwise
            event: EventBase = _EVENTS.validate_json(incoming.value)
        except ValueError:
            event = parse_event(incoming.value)
        decoded.thread_ts, decoded.message_id = event.thread_ts, event.message_id
        decoded.event_time = event.event_time.timestamp()
        decoded.ops = map_event(event)
        render_copy_texts(decoded.ops)
        decoded.tokens_mismatch = reported_tokens_mismatch(event, decoded.ops)
    except (EventDecodeError, MappingError) as exc:
        decoded.error = str(exc)
        decoded.ops = []
    return decoded


def warm_up() -> float:
    """Decode and map one made-up event of each row kind, so the first real record pays neither
    tiktoken's encoding load nor pydantic's first validation. Seconds spent."""
    started = time.perf_counter()
    human = HumanMessage(
        thread_ts="1.000001", message_id="1.000001:-:human:1.000002", event_time=datetime(2026, 1, 1, tzinfo=UTC),
        user="U0", ts="1.000002", text="warm-up 123",
    )  # fmt: skip
    decoded = decode(Incoming(0, 0, None, human.model_dump_json().encode(), 0.0))
    if decoded.error is not None:  # the made-up event must stay valid as the schema changes
        raise RuntimeError(f"projector warm-up event no longer decodes: {decoded.error}")
    return time.perf_counter() - started


@dataclass(frozen=True)
class Prepared:
    decoded: list[Decoded]
    next_offsets: dict[int, int]


def prepare(batch: Sequence[Incoming]) -> Prepared:
    """Decode and map a batch (pure, no I/O) and compute the offsets it will commit."""
    decoded = [decode(i) for i in batch]
    next_offsets: dict[int, int] = {}
    for i in batch:
        next_offsets[i.partition] = max(next_offsets.get(i.partition, -1), i.offset + 1)
    return Prepared(decoded, next_offsets)
