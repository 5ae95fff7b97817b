"""The interface every write plan offers, and what a batch returns.

A plan carries a batch of projection operations into Postgres inside the caller's transaction,
with the batch's offsets. Plans differ in round trips and statements, never in meaning: any
plan that `applies` to a batch must leave the same tables as the in-order plan, which applies
to every batch (tests/projector run the store's rules against each plan, and compare them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import psycopg

from services.projector.mapping import CommitRound, Op

Items = Sequence[tuple[int, Sequence[Op]]]  # (item index, its operations), in arrival order


@dataclass(frozen=True)
class Target:
    """Where a batch goes and what it records beside its rows."""

    group: str
    topic: str
    schema: str
    partitions: Sequence[int]  # whose offsets are locked (and returned) at the start
    next_offsets: dict[int, int]  # saved with the rows
    notify: bool = True
    threads: Sequence[str] = ()  # notified even if no operation touches them


@dataclass(frozen=True)
class Rejection:
    """An operation the database refused on logical grounds (not an error): the event goes to the DLQ."""

    item: int
    reason: str


@dataclass
class BatchResult:
    rejections: list[Rejection] = field(default_factory=list)
    rounds_committed: int = 0
    stored_offsets: dict[int, int] = field(default_factory=dict)  # as locked at the start of the batch


class Plan(Protocol):
    """One way of writing a batch."""

    name: str

    def applies(self, items: Items) -> bool:
        """Whether this plan gives the batch its in-order meaning."""
        ...

    def apply(self, conn: psycopg.Connection, items: Items, target: Target) -> BatchResult:
        """Write `items` and the offsets inside the caller's transaction; raises psycopg errors as they come."""
        ...


def listed_ids(items: Items) -> list[str]:
    """Every id the batch's round markers list, sorted (what the round check looks up)."""
    return sorted(
        {m for _index, ops in items for op in ops if isinstance(op, CommitRound) for m in op.message_ids}
    )


@dataclass
class WriteOutcome:
    """What one committed batch did: the writer's answer to its runner (and the metrics')."""

    events: int
    dead_letters: int
    rounds_committed: int
    next_offsets: dict[int, int]
