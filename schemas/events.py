"""Every event of the pipeline, as immutable pydantic values.

Events are facts: frozen models, validated on the way in and serialised
canonically on the way out, so the same event always gives the same bytes.
Every event carries `schema_version`, `thread_ts` (the Kafka key, so a thread
stays on one partition, in order), a deterministic `message_id` and the time
the fact happened (`event_time`), never the time it was processed.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_validator,
    model_serializer,
)

from schemas.canonical import canonical_json, canonical_json_bytes
from schemas.ids import NULL_ROUND, message_id

SCHEMA_VERSION: Final = 1

Role = Literal["alert", "human", "ai", "tool", "judge", "post"]
# Slack's `channel_type`: `channel` is public, `group` private, `im` and `mpim` direct messages.
ChannelType = Literal["channel", "group", "im", "mpim"]


def model_bytes(model: BaseModel) -> bytes:
    """A model's canonical JSON. Its json-mode dump holds no NaN or infinity: pydantic writes one inside
    `Any` as null, and no model here has a float-typed field (which would keep it; tests/test_schemas.py
    checks every model's JSON Schema for a number). So the dump is `finite` (schemas/canonical.py) and
    takes orjson's path even where it holds a null, byte for byte `reference_json`'s text."""
    return canonical_json_bytes(model.model_dump(mode="json"), finite=True)


class EventBase(BaseModel):
    """Fields every event has. Frozen: an event is a value, never edited."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    thread_ts: str = Field(min_length=1, max_length=64)
    message_id: str = Field(min_length=1, max_length=512)
    event_time: AwareDatetime
    round: int | None = Field(default=None, ge=1)

    @field_validator("message_id")
    @classmethod
    def _id_belongs_to_thread(cls, value: str, info: Any) -> str:
        thread_ts = info.data.get("thread_ts")
        if thread_ts is not None and not value.startswith(f"{thread_ts}:"):
            raise ValueError(f"message_id {value!r} does not start with thread_ts {thread_ts!r}")
        return value

    def key(self) -> bytes:
        """The Kafka partition key."""
        return self.thread_ts.encode()

    def to_bytes(self) -> bytes:
        """Canonical JSON: sorted keys, no spaces, so equal events give equal bytes."""
        return model_bytes(self)


# --- what happens in a thread ------------------------------------------------------


class AlertReceived(EventBase):
    """An Alertmanager group fired (or resolved); it opens the incident thread."""

    type: Literal["alert_received"] = "alert_received"
    status: Literal["firing", "resolved"]
    service: str
    alertname: str
    fingerprint: str
    window_start: AwareDatetime
    window_end: AwareDatetime
    alert: dict[str, Any]
    # What the model sees of the alert row when it differs from the content (redacted at write time by
    # the compactor); None: the model sees the content. Left out of the bytes when None.
    compact: dict[str, Any] | None = None

    def row_content(self) -> dict[str, Any]:
        """The alert row's `content` (the raw, verbatim): the one shape the projector stores and the
        compactor renders the model's view of."""
        return self.model_dump(
            mode="json",
            include={"status", "service", "alertname", "fingerprint", "window_start", "window_end", "alert"},
        )

    @model_serializer(mode="wrap")
    def _without_null_compact(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_null_compact(handler(self))


def _drop_null_compact(dumped: Any) -> Any:
    """An event with no write-time compact serialises as it did before the field existed: the same
    bytes on the topics for the same fact, whichever code wrote it."""
    if isinstance(dumped, dict) and dumped.get("compact", 0) is None:
        dumped.pop("compact")
    return dumped


def _drop_nulls(dumped: Any, keys: tuple[str, ...]) -> Any:
    """Optional fields added later serialise as absent when None: old facts keep their bytes."""
    if isinstance(dumped, dict):
        for key in keys:
            if key in dumped and dumped[key] is None:
                dumped.pop(key)
    return dumped


class IncidentStateChanged(EventBase):
    """The incident's status or pinned window changed. Projected into incident_state only."""

    type: Literal["incident_state"] = "incident_state"
    status: Literal["open", "investigating", "resolved"]
    service: str
    window_start: AwareDatetime
    window_end: AwareDatetime
    opened_at: AwareDatetime


class HumanMessage(EventBase):
    """A person wrote in the thread. Recorded whether or not the bot is addressed (round NULL)."""

    type: Literal["human_message"] = "human_message"
    user: str
    ts: str
    text: str
    mention: bool = False
    edit_of: str | None = None  # ts of the message this one edits; edits are new facts, never rewrites
    # Where the incident may be seen (invariant 14): Slack's `channel_type` of a `message` event.
    # `app_mention` carries none, so a mention's event may lack it; its `message` twin has it, and
    # the projector keeps the observation as a fact of its own (never lost to the id's dedupe).
    channel_type: ChannelType | None = None
    # What the model sees of the human row when it differs from the content (redacted, and later pastes
    # compacted, at write time by the compactor); None: the model sees the content. Not in the bytes when None.
    compact: dict[str, Any] | None = None

    def row_content(self) -> dict[str, Any]:
        """The human row's `content` (the raw, verbatim): the one shape the projector stores and the
        compactor renders the model's view of."""
        return {
            "user": self.user,
            "ts": self.ts,
            "text": self.text,
            "mention": self.mention,
            "edit_of": self.edit_of,
        }

    @model_serializer(mode="wrap")
    def _without_null_compact(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_nulls(_drop_null_compact(handler(self)), ("channel_type",))


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    args: dict[str, Any]


class AiMessage(EventBase):
    """A model turn of the agent graph (investigate or hypothesis), possibly calling tools."""

    type: Literal["ai_message"] = "ai_message"
    node: str
    text: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model: str
    claims: list[Claim] = Field(default_factory=list)
    # Set when the node's answer did not validate even after one repair: the reason, and the
    # model's text verbatim. Such a row is a recorded failure, never a claim-less hypothesis.
    failure: str | None = None
    raw_answer: str | None = None
    # What each model call behind this turn was sent beside the rows it is rebuilt from (issue 38): the
    # review page rebuilds the call exactly. None: no model call (a playbook turn), or written before.
    sent: list[SentCall] | None = None

    @model_serializer(mode="wrap")
    def _without_null_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_nulls(handler(self), ("sent",))


class Claim(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    evidence_ids: list[str] = Field(default_factory=list)


class ToolResult(EventBase):
    """The raw answer of a tool, verbatim. The compactor adds the compact rendering downstream."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool: str
    args: dict[str, Any]
    raw: Any
    alert_context: dict[str, Any] = Field(default_factory=dict)


class Selection(BaseModel):
    """A selector model's choice, recorded so a replay reuses it instead of asking again."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ids: list[str]
    reason: str
    model: str


class CompactedToolResult(ToolResult):
    """A tool result with its compact rendering beside the raw (invariant 5). It inherits the tool
    result's fields in their order, so its bytes are those of the fields written out; `type` keeps its
    place and changes its value. Being a `ToolResult`, code that means the raw one alone checks
    `type(event) is ToolResult`."""

    type: Literal["tool_result_compacted"] = "tool_result_compacted"  # type: ignore[assignment]
    compact: dict[str, Any]
    tokens: int = Field(ge=0)
    raw_tokens: int = Field(ge=0)
    raw_sha256: str
    compactor_version: str
    budget: int = Field(ge=1)
    selection: Selection | None = None


class RecalledIncident(BaseModel):
    """One incident recall found for a thread (schemas/recall.py), as recorded: never recomputed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    thread: str = Field(min_length=1, max_length=64)
    kind: Literal["concurrent", "historical"]
    score_milli: int = Field(ge=0)  # the score x1000: events hold no floats (tests/test_schemas.py)
    reasons: list[str] = Field(default_factory=list)
    link: str | None = Field(default=None, max_length=200)  # its Slack thread, when known


class JudgeVerdict(EventBase):
    """The judge's grading of a hypothesis. A rejection is never compacted (invariant 10)."""

    type: Literal["judge_verdict"] = "judge_verdict"
    grounded: bool
    questions: list[str] = Field(default_factory=list)
    graded_claims: list[dict[str, Any]] = Field(default_factory=list)
    hypothesis_id: str
    model: str
    # Set when there was nothing to grade (the hypothesis failed) or the judge's own answer did not
    # validate: why, and the judge's text verbatim when it answered. `grounded` is then False.
    failure: str | None = None
    raw_answer: str | None = None
    sent: list[SentCall] | None = None  # as AiMessage.sent: the judge's calls, beside what rebuilds them

    @model_serializer(mode="wrap")
    def _without_null_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_nulls(handler(self), ("sent",))


class AnsweredMention(BaseModel):
    """A mention a post answers: its row and who wrote it (the post names them in Slack)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_id: str = Field(min_length=1, max_length=512)
    user: str = Field(min_length=1, max_length=64)


class ThreadPost(EventBase):
    """What the bot said in the Slack thread: a grounded summary or the judge's questions."""

    type: Literal["thread_post"] = "thread_post"
    kind: Literal["summary", "questions", "failure"]  # failure: says which node failed and why
    text: str
    model: str
    # Every mention the round answers (wakes coalesced: services/agent/coalesce.py), in thread order;
    # empty for a round that answered none (an alert's). None: recorded before posts named them.
    answers: list[AnsweredMention] | None = None
    # The first post of an alert's thread names the concurrent incidents its recall found (issue 37):
    # structured, so the poster renders their links itself and escapes their reasons. None: none.
    concurrent: list[RecalledIncident] | None = None

    @model_serializer(mode="wrap")
    def _without_null_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_nulls(handler(self), ("answers", "concurrent"))


class SlackPostRecorded(EventBase):
    """The bot's voice, on the record: a post's intent before the Slack call, its outcome after.

    `post_id` is the event that was posted (a ThreadPost, or an alert that opened its thread:
    `root`). `phase` is `intent` (about to call `chat.postMessage`), `posted` (Slack answered
    with `slack_ts`) or `found` (after a crash, the tagged message was found in Slack: it had
    been posted). A post with an outcome is never posted again, by any poster or replay."""

    type: Literal["slack_post"] = "slack_post"
    post_id: str = Field(min_length=1, max_length=512)
    phase: Literal["intent", "posted", "found"]
    channel: str = Field(min_length=1, max_length=64)
    slack_ts: str | None = Field(default=None, max_length=32)
    root: bool = False
    # For a thread's root: whether its channel is private (`conversations.info`'s `is_private`), so
    # recall knows where an alert-opened incident may be seen (invariant 14). None: not asked.
    channel_private: bool | None = None

    @model_serializer(mode="wrap")
    def _without_null_privacy(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_nulls(handler(self), ("channel_private",))


class RoundCommitted(EventBase):
    """Marks a round complete: its listed messages become visible together (invariant 3)."""

    type: Literal["round_committed"] = "round_committed"
    message_ids: list[str] = Field(min_length=1)


class ReRendered(EventBase):
    """A new compact for an old row when a long thread passes its budget (invariant 10)."""

    type: Literal["re_rendered"] = "re_rendered"
    target_id: str
    compact: Any
    tokens: int = Field(ge=0)
    # headline/one_line: an old round's row; clipped/folded: a turn of a long discussion (context_render/discussion.py)
    policy: Literal["headline", "one_line", "clipped", "folded"]


class Wake(EventBase):
    """On incident.wake: the bot was addressed (a mention) or an alert opened a thread."""

    type: Literal["wake"] = "wake"
    reason: Literal["alert", "mention"]
    trigger_message_id: str
    user: str | None = None


class DeadLetter(BaseModel):
    """On incident.dlq: input that could not be processed, with why and where it came from.

    Not an EventBase: a dead letter may have no valid thread_ts at all.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["dead_letter"] = "dead_letter"
    reason: str
    stage: str
    source_topic: str
    partition: int | None = None
    offset: int | None = None
    key: str | None = None
    payload: str
    payload_truncated: bool = False
    event_time: datetime

    def to_bytes(self) -> bytes:
        return model_bytes(self)


class MessageDeleted(EventBase):
    """A person deleted a message of the thread (Slack `message_deleted`). The projector hides that
    message's row from the model's context (its compact becomes `hidden_view()`); the raw is kept."""

    type: Literal["message_deleted"] = "message_deleted"
    ts: str  # the deleted message's ts
    user: str | None = None  # who wrote it, when Slack says (`previous_message.user`)

    def hidden_view(self) -> dict[str, Any]:
        """What the model sees in place of the deleted message: that it was deleted, never its text."""
        return {"deleted": True, "user": self.user, "ts": self.ts}


class RecallRecorded(EventBase):
    """What recall found when an alert opened the incident (invariant 14): computed once by the agent and
    recorded, so loading the context never recomputes it and a replay shows the same. `channel` is the
    thread's own channel, read from its events, that decided what it may see (None: unknown, so
    nothing was recalled)."""

    type: Literal["recall_recorded"] = "recall_recorded"
    channel: str | None
    hits: list[RecalledIncident] = Field(default_factory=list)
    # The model call it was recorded for (the agent appends it to that call's turn): the review page
    # places it there when it rebuilds the round. None: recorded before the field existed.
    made_for: MadeFor | None = None

    @model_serializer(mode="wrap")
    def _without_null_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _drop_nulls(handler(self), ("made_for",))


class MadeFor(BaseModel):
    """A round's model call, by round and node: what a recorded input was made for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int = Field(ge=1)
    node: str = Field(min_length=1, max_length=32)


class SentMessage(BaseModel):
    """A message a retry appended to its call's input (the first answer and the repair prompt)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["assistant", "user"]
    content: str


class JudgeBasis(BaseModel):
    """What the judge's input was built from that the rows do not hold: the raw checks (the numbers each
    claim states that the raws it cites lack, read by the agent from the raws) and the input budget the
    payload was shaped to (the deployment's, for the judge's model)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    raw_checks: list[dict[str, Any]]
    input_budget: int


class SentCall(BaseModel):
    """One model call, as sent beside the rows it is rebuilt from: the tool schemas bound to it (as the
    agent counted them), its response_format, the messages a retry appended to the node's first input,
    the endpoint's refusal when it refused the format (the structured-output chain then steps down), the
    `[checked: ...]` note each tool result it was sent carried (by tool row id), and the judge's basis."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tools: list[dict[str, Any]] = Field(default_factory=list)
    response_format: dict[str, Any] | None = None
    appended: list[SentMessage] = Field(default_factory=list)
    refused: str | None = None
    checked: dict[str, str] = Field(default_factory=dict)
    judge_basis: JudgeBasis | None = None


ThreadEvent = Annotated[
    AlertReceived
    | IncidentStateChanged
    | HumanMessage
    | AiMessage
    | ToolResult
    | CompactedToolResult
    | JudgeVerdict
    | ThreadPost
    | SlackPostRecorded
    | RoundCommitted
    | ReRendered
    | Wake
    | MessageDeleted
    | RecallRecorded,
    Field(discriminator="type"),
]

EVENT_TYPES: tuple[type[EventBase], ...] = (
    AlertReceived,
    IncidentStateChanged,
    HumanMessage,
    AiMessage,
    ToolResult,
    CompactedToolResult,
    JudgeVerdict,
    ThreadPost,
    SlackPostRecorded,
    RoundCommitted,
    ReRendered,
    Wake,
    MessageDeleted,
    RecallRecorded,
)

_ADAPTER: TypeAdapter[Any] = TypeAdapter(ThreadEvent)


class EventDecodeError(ValueError):
    """Raised for bytes that are not a valid event; the message is a one-line reason."""


def parse_event(data: bytes | str) -> EventBase:
    """Decode and validate one event. Raises EventDecodeError with a short, clear reason."""
    try:
        decoded = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EventDecodeError(f"not JSON: {exc}") from None
    return event_from_json(decoded)


def event_from_json(decoded: Any) -> EventBase:
    """Validate an already decoded event (a caller that decoded it strictly decodes it once)."""
    if not isinstance(decoded, dict):
        raise EventDecodeError(f"not a JSON object: {type(decoded).__name__}")
    version = decoded.get("schema_version")
    if version != SCHEMA_VERSION:
        raise EventDecodeError(f"unsupported schema_version {version!r} (expected {SCHEMA_VERSION})")
    try:
        event: EventBase = _ADAPTER.validate_python(decoded)
    except ValueError as exc:
        first = str(exc).splitlines()
        raise EventDecodeError(f"invalid event: {' '.join(s.strip() for s in first[:3])}") from None
    return event


AiMessage.model_rebuild()
JudgeVerdict.model_rebuild()
RecallRecorded.model_rebuild()

__all__ = [
    "EVENT_TYPES",
    "NULL_ROUND",
    "SCHEMA_VERSION",
    "AiMessage",
    "AlertReceived",
    "ChannelType",
    "Claim",
    "CompactedToolResult",
    "DeadLetter",
    "EventBase",
    "EventDecodeError",
    "HumanMessage",
    "IncidentStateChanged",
    "JudgeBasis",
    "JudgeVerdict",
    "MadeFor",
    "MessageDeleted",
    "ReRendered",
    "Role",
    "RoundCommitted",
    "Selection",
    "SentCall",
    "SentMessage",
    "SlackPostRecorded",
    "ThreadEvent",
    "ThreadPost",
    "ToolCall",
    "ToolResult",
    "Wake",
    "canonical_json",
    "canonical_json_bytes",
    "event_from_json",
    "message_id",
    "parse_event",
]
