"""Event -> projection operations, as a pure function (no I/O, no clock).

Keeping the mapping pure means a replay, a retry and a live run all derive the
same operations from the same event (invariant 8), and it can be tested without
Kafka or Postgres. The write plans (`plan_copy.py`, `plan_in_order.py`) carry the operations out
through `sql.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic_core import to_json

from schemas.canonical import canonical_json
from schemas.events import (
    AiMessage,
    AlertReceived,
    CompactedToolResult,
    EventBase,
    HumanMessage,
    IncidentStateChanged,
    JudgeVerdict,
    MessageDeleted,
    RecallRecorded,
    ReRendered,
    RoundCommitted,
    SlackPostRecorded,
    ThreadPost,
    ToolResult,
    Wake,
)
from schemas.ids import NULL_ROUND, canonical_args_hash, message_id
from schemas.row_view import has_bookkeeping, model_view
from schemas.tokens import count_tokens
from services.projector.profile_facts import ProfileFact, profile_facts


class MappingError(ValueError):
    """The event is valid JSON and a valid model, but cannot be projected; the message is the reason."""


@dataclass(slots=True)
class Row:
    """One agent_messages (or round_staging) row, and the operation that writes it. JSON columns are
    already serialised.

    Its round alone says where it goes (`staged`): a row outside any round is visible at once; a
    round's row waits in round_staging until the round's marker (invariant 3). A separate wrapper type
    per destination would let a row of no round be staged, where no marker ever publishes it.

    Treated as a value (never changed after it is made, but for its `copy_text` slot) yet not `frozen`:
    one is made per event on the decoding path, where a frozen dataclass's __init__ costs more
    (benchmarks/bench_projector.py measures that path).
    """

    id: str
    thread_ts: str
    round: int | None
    role: str
    tool_call_id: str | None
    content: str
    compact: str | None
    tokens: int
    created_at: datetime
    # The ids of an ai row's tool calls (what the round check reads from content), so a round whose
    # marker arrives in the same batch can be verified without a round trip.
    call_ids: tuple[str, ...] = ()

    # The row's COPY text, rendered by `row_format.render_copy_texts` in the projector's decoding
    # thread (off the writer's path); None until then. A plain slot: functools.cached_property takes
    # a lock on every first read in Python 3.11.
    copy_text: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def staged(self) -> bool:
        """Whether the row waits in round_staging for its round's marker, rather than being visible at once."""
        return self.round is not None


@dataclass(frozen=True)
class CacheDigest:
    """A tool digest, readable by a retried round as soon as it is projected."""

    thread_ts: str
    tool: str
    args_hash: str
    message_id: str
    tool_call_id: str
    compact: str
    tokens: int
    created_at: datetime


@dataclass(frozen=True)
class UpsertState:
    """incident_state from an alert or a status change; the newest fact (by event time) wins."""

    thread_ts: str
    service: str
    status: str
    window_start: datetime
    window_end: datetime
    opened_at: datetime
    updated_at: datetime
    keep_opened_at: bool  # an alert re-firing does not move the incident's opening time


@dataclass(frozen=True)
class CommitRound:
    """Publish the listed staged rows, in the listed order, in one statement."""

    thread_ts: str
    round: int
    marker_id: str
    message_ids: tuple[str, ...]


@dataclass(frozen=True)
class ReRender:
    """A new compact for an existing row (invariant 10); content is never touched."""

    thread_ts: str
    target_id: str
    compact: str
    tokens: int
    # The event that made it, recorded in rendering_history (migration 011) in the order applied.
    event_id: str = ""
    made_round: int | None = None
    policy: str | None = None


@dataclass(frozen=True)
class RecordPost:
    """The bot's voice: a post's intent or outcome in Slack (never a context row)."""

    post_id: str
    phase: str
    thread_ts: str
    channel: str
    slack_ts: str | None
    root: bool
    recorded_at: datetime


Op = Row | CacheDigest | UpsertState | CommitRound | ReRender | RecordPost | ProfileFact

ALERT_STATUS = {"firing": "open", "resolved": "resolved"}


def _json(value: Any) -> str:
    """Canonical JSON of a row value that holds no NaN or infinity (orjson's fast path, ~4x `json`).

    Every caller passes a pydantic json-mode dump (which writes a non-finite float as null) or
    fields that are strings, bools or None, so `finite=True` is the truth and the text is
    `reference_json`'s, byte for byte (tests/projector/test_mapping.py checks it).
    """
    return canonical_json(value, finite=True)


def _row(
    event: EventBase,
    role: str,
    content: Any,
    *,
    compact: Any = None,
    tool_call_id: str | None = None,
    outside_round: bool = False,
    call_ids: tuple[str, ...] = (),
) -> Row:
    content_json = _json(content)
    compact_json = None if compact is None else _json(compact)
    return Row(
        id=event.message_id,
        thread_ts=event.thread_ts,
        round=None if outside_round else event.round,
        role=role,
        tool_call_id=tool_call_id,
        content=content_json,
        compact=compact_json,
        tokens=_tokens(
            content if compact is None else compact, content_json if compact_json is None else compact_json
        ),
        created_at=event.event_time,
        call_ids=call_ids,
    )


def _tool_row(event: CompactedToolResult) -> Row:
    """The tool row, without re-counting: the compactor counted this very compact the same way.

    `CompactedToolResult.tokens` is `count_value_tokens(compact)` (services/compaction/registry.py),
    which is what the tokens column holds for a row whose compact is not NULL. The JSON columns
    are rendered by pydantic's serializer: jsonb keeps no key order, so canonical (sorted) text,
    which only token counting needs, would be wasted work for the largest values of the stream.
    """
    return Row(
        id=event.message_id,
        thread_ts=event.thread_ts,
        round=event.round,
        role="tool",
        tool_call_id=event.tool_call_id,
        content=_fast_json(event.raw),
        compact=_fast_json(event.compact),
        tokens=event.tokens,
        created_at=event.event_time,
    )


def _tokens(value: Any, value_json: str) -> int:
    """count_value_tokens(value), reusing the JSON already rendered (render_for_model's exact text)."""
    return count_tokens(value) if isinstance(value, str) else count_tokens(value_json)


def _fast_json(value: Any) -> str:
    # NaN/Infinity are written as such (not as null, pydantic's default), so Postgres refuses them
    # as it refuses json.dumps' rendering: the event is dead-lettered, never silently changed.
    return to_json(value, inf_nan_mode="constants").decode()


def _check_id_round(event: EventBase) -> None:
    """A row's id carries its round (`thread_ts:round:node:i`); a mismatch would hide or leak the row."""
    parts = event.message_id.split(":", 3)
    if len(parts) != 4:
        raise MappingError(f"message_id {event.message_id!r} is not thread_ts:round:node:i")
    expected = NULL_ROUND if event.round is None else str(event.round)
    if parts[1] != expected:
        raise MappingError(
            f"message_id {event.message_id!r} names round {parts[1]!r} but the event has round {event.round!r}"
        )


def _require_in_thread(event: EventBase, field: str, value: str) -> None:
    """An event may only point at a message of its own thread (ids start with the thread key)."""
    if not value.startswith(f"{event.thread_ts}:"):
        raise MappingError(f"{field} {value!r} is not in thread {event.thread_ts!r}")


def map_event(event: EventBase) -> list[Op]:
    """The operations that project one event. Raises MappingError for an event that cannot be projected.

    One lookup by the event's exact type (events are decoded as the union's own classes), not a
    chain of isinstance checks that a tool result, the commonest row, walked to its fifth.
    """
    mapper = _MAPPERS.get(type(event))
    if mapper is None:
        raise MappingError(f"no projection for event type {type(event).__name__}")
    return [*mapper(event), *profile_facts(event)]


def _map_alert(event: AlertReceived) -> list[Op]:
    _check_id_round(event)
    return [
        _row(event, "alert", event.row_content(), compact=event.compact),
        _state(event, ALERT_STATUS[event.status], event.event_time, keep_opened_at=True),
    ]


def _map_state(event: IncidentStateChanged) -> list[Op]:
    return [_state(event, event.status, event.opened_at, keep_opened_at=False)]


def _state(
    event: AlertReceived | IncidentStateChanged, status: str, opened_at: datetime, *, keep_opened_at: bool
) -> UpsertState:
    """The incident's state as of this event: its service and pinned window, updated at the event's time."""
    return UpsertState(
        thread_ts=event.thread_ts,
        service=event.service,
        status=status,
        window_start=event.window_start,
        window_end=event.window_end,
        opened_at=opened_at,
        updated_at=event.event_time,
        keep_opened_at=keep_opened_at,
    )


def _map_human(event: HumanMessage) -> list[Op]:
    if event.edit_of is not None:
        return [_edit(event, event.edit_of)]
    # Every human turn is recorded with round NULL (invariant 11): it is a fact of the thread,
    # not part of a bot round, so no marker will ever publish it.
    # `compact`: the model's view, written by the compactor when it differs from the raw (a secret).
    return [_row(event, "human", event.row_content(), compact=event.compact, outside_round=True)]


def _edit(event: HumanMessage, original_ts: str) -> ReRender:
    """An edit becomes the original row's view: the model sees the edited text only (redacted by the
    compactor like every human turn), the original's raw stays in `content`. The last edit in the
    thread's order wins, and applying one twice writes the same compact (invariants 2 and 8)."""
    return _hide_behind(event, original_ts, event.compact or event.row_content(), "edited")


def _map_deleted(event: MessageDeleted) -> list[Op]:
    """A deleted message's row stays (its raw is kept), but the model sees only that it was deleted."""
    return [_hide_behind(event, event.ts, event.hidden_view(), "deleted")]


def _hide_behind(event: EventBase, original_ts: str, view: dict[str, Any], policy: str) -> ReRender:
    compact = _json(view)
    return ReRender(
        thread_ts=event.thread_ts,
        target_id=message_id(event.thread_ts, None, "human", original_ts),
        compact=compact,
        tokens=_tokens(view, compact),
        event_id=event.message_id,
        policy=policy,
    )


def _drop_unset(content: dict[str, Any], *keys: str) -> None:
    """Optional fields appear in a row only when set, so rows written before them keep their bytes."""
    for key in keys:
        if content.get(key) is None:
            content.pop(key, None)


def _map_ai(event: AiMessage) -> list[Op]:
    _check_id_round(event)
    if event.tool_calls and event.round is None:
        raise MappingError(
            "ai message with tool_calls outside a round would be visible without its tool rows"
        )
    content = event.model_dump(
        mode="json",
        include={"node", "text", "tool_calls", "model", "claims", "failure", "raw_answer", "sent"},
    )
    _drop_unset(content, "failure", "raw_answer", "sent")
    compact = model_view(content) if has_bookkeeping(content) else None  # schemas/row_view.py
    return [_row(event, "ai", content, compact=compact, call_ids=tuple(c.id for c in event.tool_calls))]


def _map_tool(event: CompactedToolResult) -> list[Op]:
    _check_id_round(event)
    row = _tool_row(event)
    return [
        row,
        CacheDigest(
            thread_ts=event.thread_ts,
            tool=event.tool,
            args_hash=canonical_args_hash(event.args),
            message_id=event.message_id,
            tool_call_id=event.tool_call_id,
            compact=row.compact or "null",
            tokens=row.tokens,
            created_at=event.event_time,
        ),
    ]


def _map_judge(event: JudgeVerdict) -> list[Op]:
    _check_id_round(event)
    content = event.model_dump(
        mode="json",
        include={
            "grounded", "questions", "graded_claims", "hypothesis_id", "model", "failure", "raw_answer", "sent"
        },
    )  # fmt: skip
    _drop_unset(content, "failure", "raw_answer", "sent")
    compact = model_view(content) if has_bookkeeping(content) else None  # schemas/row_view.py
    return [_row(event, "judge", content, compact=compact)]


def _map_post(event: ThreadPost) -> list[Op]:
    _check_id_round(event)
    content = event.model_dump(mode="json", include={"kind", "text", "model"})
    if event.answers is None:
        return [_row(event, "post", content)]
    # The mentions it answers are bookkeeping (services/agent/coalesce.py reads them beside the row),
    # not words for the model: the model's view is the post without them, as before.
    answers = [a.model_dump(mode="json") for a in event.answers]
    return [_row(event, "post", {**content, "answers": answers}, compact=content)]


def _map_recall(event: RecallRecorded) -> list[Op]:
    """Recall's result as one small row beside the alert (round NULL: visible at once, outside any round),
    so the load stays one query and never recomputes it (invariants 4 and 14). Its role is `alert`: what
    the system knew when the incident opened, framed as data; its node `recall` tells it apart."""
    _check_id_round(event)
    if event.round is not None or event.message_id.split(":", 3)[2] != "recall":
        raise MappingError(f"a recall is recorded as thread_ts:-:recall:i, not {event.message_id!r}")
    hits = [h.model_dump(mode="json", exclude_none=True) for h in event.hits]
    if event.made_for is None:
        return [_row(event, "alert", {"recall": hits}, outside_round=True)]
    content = {"recall": hits, "made_for": event.made_for.model_dump(mode="json")}
    return [_row(event, "alert", content, compact=model_view(content), outside_round=True)]


def _map_marker(event: RoundCommitted) -> list[Op]:
    return [_commit_round(event)]


def _map_voice(event: SlackPostRecorded) -> list[Op]:
    _require_in_thread(event, "post_id", event.post_id)
    return [
        RecordPost(
            post_id=event.post_id,
            phase=event.phase,
            thread_ts=event.thread_ts,
            channel=event.channel,
            slack_ts=event.slack_ts,
            root=event.root,
            recorded_at=event.event_time,
        )
    ]


def _map_re_render(event: ReRendered) -> list[Op]:
    if event.compact is None:
        raise MappingError(
            "re-rendering to a NULL compact is not supported (it would change the model's view)"
        )
    _require_in_thread(event, "target_id", event.target_id)
    compact = canonical_json(event.compact)  # may hold a NaN: written as such, and Postgres refuses it
    return [
        ReRender(
            thread_ts=event.thread_ts,
            target_id=event.target_id,
            compact=compact,
            tokens=_tokens(event.compact, compact),
            event_id=event.message_id,
            made_round=made_round(event.message_id),
            policy=event.policy,
        )
    ]


_MADE_IN = re.compile(r":rerender:r(\d+)-")


def made_round(rerender_id: str) -> int | None:
    """The round whose context a re-rendering was made for, from its id (`T:-:rerender:r2-...`,
    services/context_render/rerender.py and discussion.py)."""
    found = _MADE_IN.search(rerender_id)
    return int(found.group(1)) if found else None


def _map_nothing(event: EventBase) -> list[Op]:
    return []  # raw tool results are compacted upstream; wakes drive the agent, not the projection


_MAPPERS: dict[type[EventBase], Callable[[Any], list[Op]]] = {
    AlertReceived: _map_alert,
    IncidentStateChanged: _map_state,
    HumanMessage: _map_human,
    AiMessage: _map_ai,
    CompactedToolResult: _map_tool,
    JudgeVerdict: _map_judge,
    ThreadPost: _map_post,
    RecallRecorded: _map_recall,
    RoundCommitted: _map_marker,
    SlackPostRecorded: _map_voice,
    ReRendered: _map_re_render,
    ToolResult: _map_nothing,
    Wake: _map_nothing,
    MessageDeleted: _map_deleted,
}


def _commit_round(event: RoundCommitted) -> CommitRound:
    if event.round is None:
        raise MappingError("round_committed without a round")
    prefix = f"{event.thread_ts}:{event.round}:"
    strays = [mid for mid in event.message_ids if not mid.startswith(prefix)]
    if strays:
        raise MappingError(f"round_committed lists ids outside {prefix}*: {strays[:3]}")
    if len(set(event.message_ids)) != len(event.message_ids):
        raise MappingError("round_committed lists an id twice")
    return CommitRound(
        thread_ts=event.thread_ts,
        round=event.round,
        marker_id=event.message_id,
        message_ids=tuple(event.message_ids),
    )


def reported_tokens_mismatch(event: EventBase, ops: list[Op]) -> tuple[int, int] | None:
    """(carried, computed) when a re-rendering's own `tokens` disagrees with the projection's count.

    A tool row stores the count its event carries (`_tool_row`), so only a re-rendering can disagree.
    """
    if type(event) is ReRendered:
        for op in ops:
            if isinstance(op, ReRender) and op.tokens != event.tokens:
                return event.tokens, op.tokens
    return None
