"""Where one record's result goes: the pure decision of the faust agent (services/compactor/worker.py),
testable without faust. The worker only carries it out: the table write, then the sends in order, then
the metrics and the log line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from services.compactor.stream import Compacted, Dead, Forward, Result

Topic = Literal["compacted", "dlq"]


@dataclass(frozen=True)
class Send:
    """One record to produce; `partition` None lets the producer choose (the dead-letter topic)."""

    topic: Topic
    key: bytes | None
    value: bytes
    partition: int | None


@dataclass(frozen=True)
class Dispatch:
    """Everything one result causes, in the order the worker does it."""

    sends: tuple[Send, ...]
    outcome: Literal["passthrough", "compacted", "dead_letter"]
    table_write: tuple[str, dict[str, Any]] | None = None  # (selection key, the selection as JSON)
    compacted: tuple[str, int, int] | None = None  # (tool, raw tokens, compact tokens)
    budget_violation: str | None = None  # the tool whose digest was over its budget
    dead_letter_log: dict[str, Any] | None = None  # the log line's fields, thread_ts and message id first


def dispatch(result: Result, key: bytes | None, partition: int, offset: int) -> Dispatch:
    """A passthrough goes on unchanged, a digest to the compacted topic (its selection recorded first), a
    dead letter to the DLQ and, for a tool result, a truthful tool error to the compacted topic too, so
    the agent waiting for it gets an answer. Outputs keep the input's key and partition number."""
    if isinstance(result, Forward):
        return Dispatch((Send("compacted", key, result.value, partition),), "passthrough")
    if isinstance(result, Compacted):
        write = None
        if result.record is not None:
            write = (result.selection_key, result.record.model_dump(mode="json"))
        return Dispatch(
            (Send("compacted", key, result.value, partition),),
            "compacted",
            table_write=write,
            compacted=(result.event.tool, result.outcome.raw_tokens, result.outcome.tokens),
        )
    return _dead(result, key, partition, offset)


def _dead(result: Dead, key: bytes | None, partition: int, offset: int) -> Dispatch:
    sends = [Send("dlq", key, result.letter.to_bytes(), None)]
    if result.answer is not None:
        sends.append(Send("compacted", key, result.answer, partition))
    reason = result.letter.reason
    return Dispatch(
        tuple(sends),
        "dead_letter",
        budget_violation=_tool_of(reason) if reason.startswith("budget exceeded") else None,
        dead_letter_log={
            "thread_ts": result.thread_ts,
            "message_id": result.message_id,
            "reason": reason,
            "partition": partition,
            "offset": offset,
        },
    )


def _tool_of(reason: str) -> str:
    return reason.removeprefix("budget exceeded: ").split(":", 1)[0] or "?"
