"""One record of `incident.events` -> what goes onto `incident.compacted` or `incident.dlq`.

Pure apart from the selector: the faust worker (services/compactor/worker.py) owns the
I/O and only moves the bytes this module decides. Non-tool events are forwarded as the
exact bytes that arrived, except a human message or an alert whose model view differs from its
raw (a secret in it): it goes on with its write-time `compact` (turns.py); a `ToolResult` becomes a `CompactedToolResult` in canonical
JSON; anything that cannot be processed becomes a `DeadLetter` with its reason and its
partition/offset (invariant 12), so the worker never stops on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from schemas.events import (
    CompactedToolResult,
    DeadLetter,
    EventDecodeError,
    Selection,
    ToolResult,
    canonical_json_bytes,
    event_from_json,
    parse_event,
)
from schemas.strict_json import MAX_DEPTH, StrictJsonError, loads_strict
from schemas.tokens import count_tokens, count_value_tokens
from services.boundary.redact import redact_text
from services.compaction.registry import (
    BUILTIN,
    COMPACTOR_VERSION,
    BudgetExceeded,
    CompactorConfig,
    CompactOutcome,
    RawFormatError,
    compact_tool_result,
)
from services.compaction.selector import Selector
from services.compactor.turns import with_turn_compact
from services.runtime.kafka import dead_letter

STAGE = "compactor"
# A raw may nest MAX_DEPTH deep, as on `incident-memory compact`'s stdin; the event around it adds one.
EVENT_MAX_DEPTH = MAX_DEPTH + 1


@dataclass(frozen=True)
class Forward:
    """A non-tool event: its bytes go on unchanged."""

    value: bytes
    thread_ts: str
    message_id: str


@dataclass(frozen=True)
class Compacted:
    """A tool result with its compact beside the raw; `record` is a selection to remember."""

    value: bytes
    event: CompactedToolResult
    outcome: CompactOutcome
    selection_key: str
    record: Selection | None


@dataclass(frozen=True)
class Dead:
    """Could not be processed: goes to the dead-letter topic.

    `answer`, for a tool result that parsed but could not be compacted, is a `CompactedToolResult`
    whose compact is a truthful tool error: it goes to the compacted topic like any digest, so
    the agent waiting for it gets an answer and its round goes on (issue 14, item 8)."""

    letter: DeadLetter
    thread_ts: str | None = None
    message_id: str | None = None
    answer: bytes | None = None


Result = Forward | Compacted | Dead


def selection_key(sha256: str, version: str = COMPACTOR_VERSION) -> str:
    """The key under which a selector's choice is recorded (invariant 8)."""
    return f"{sha256}:{version}"


def compact_event(
    event: ToolResult,
    *,
    recorded: Callable[[str], Selection | None],
    selector: Selector | None,
    budget: int | None,
    config: CompactorConfig = BUILTIN,
    raw_is_finite: bool = False,
) -> Compacted:
    """Compact one tool result, reusing a recorded selection for the same raw hash and version.

    `raw_is_finite`: the raw was decoded by `loads_strict` (no NaN or infinity in it), so its
    canonical JSON may keep orjson's rendering even where it holds a null (schemas/canonical.py).

    Raises RawFormatError / BudgetExceeded / anything the compactor raises; the caller
    turns those into dead letters.
    """
    raw_bytes = canonical_json_bytes(event.raw, finite=raw_is_finite)  # once: hash, tokens, output
    key = selection_key(hashlib.sha256(raw_bytes).hexdigest(), config.version_for(event.tool))
    previous = recorded(key)
    outcome = compact_tool_result(
        event.tool,
        event.raw,
        event.alert_context,
        budget=budget,
        selector=selector,
        recorded_selection=previous,
        canonical_raw=raw_bytes.decode(),
        config=config,
    )
    compacted = _with_compact(event, outcome)
    record = outcome.selection if previous is None and outcome.selection is not None else None
    value = compacted_bytes(compacted, raw_bytes)
    return Compacted(value, compacted, outcome, key, record)


# What a compacted event adds to its tool result: each is the compaction outcome's field of that name.
_ADDED_FIELDS = tuple(
    name for name in CompactedToolResult.model_fields if name not in ToolResult.model_fields
)


def _with_compact(event: ToolResult, outcome: CompactOutcome) -> CompactedToolResult:
    """The tool result as a compacted event: every field it has, and the compaction's fields."""
    own = {name: getattr(event, name) for name in ToolResult.model_fields if name != "type"}
    return CompactedToolResult(**own, **{name: getattr(outcome, name) for name in _ADDED_FIELDS})


def compacted_bytes(event: CompactedToolResult, canonical_raw: bytes) -> bytes:
    """The event's canonical JSON, with the raw spliced in as the bytes already serialised (the raw is
    most of the bytes), so each output is dumped once.

    Everything else is pydantic's json-mode dump with a placeholder in the raw's place; the
    placeholder's JSON text must occur exactly once, else the plain path is taken. That dump holds no
    NaN (the model has no float-typed field, and pydantic writes a NaN inside `Any` as null), so its
    nulls are Nones (`finite`, schemas/canonical.py); tests/compactor/test_stream_bytes.py checks it.
    """
    fields = event.model_dump(mode="json", exclude={"raw"})
    fields["raw"] = _RAW_PLACEHOLDER
    text = canonical_json_bytes(fields, finite=True)
    if text.count(_RAW_PLACEHOLDER_JSON) != 1:
        return event.to_bytes()
    return text.replace(_RAW_PLACEHOLDER_JSON, canonical_raw)


_RAW_PLACEHOLDER = "\x00raw-placeholder\x00"
_RAW_PLACEHOLDER_JSON = canonical_json_bytes(_RAW_PLACEHOLDER)


def process(
    value: bytes | None,
    *,
    key: bytes | None,
    topic: str,
    partition: int | None,
    offset: int | None,
    recorded: Callable[[str], Selection | None],
    selector: Selector | None = None,
    budget: int | None = None,
    max_output_bytes: int | None = None,
    config: CompactorConfig = BUILTIN,
) -> Result:
    """Decide the fate of one record. Never raises for bad input: that is a `Dead`.

    `config` is the worker's compactors, tool map and budgets, built once at start-up.

    `max_output_bytes` is the output topic's record limit: an output that would not fit is
    dead-lettered with its size, instead of failing the producer (the raw stays on its topic).
    """

    def dead(reason: str, ts: str | None = None, mid: str | None = None) -> Dead:
        letter = dead_letter(reason, STAGE, value, topic, partition=partition, offset=offset, key=key)
        return Dead(letter, ts, mid)

    if value is None:
        return dead("empty value (tombstone)")
    try:
        decoded = loads_strict(value, max_depth=EVENT_MAX_DEPTH)
    except StrictJsonError as exc:  # the same rule, and reason, as `incident-memory compact`
        return _refused(
            dead, value, str(exc), f"{topic} partition {partition} offset {offset}", budget, config
        )
    try:
        event = event_from_json(decoded)  # decoded once, strictly
    except EventDecodeError as exc:
        return dead(str(exc))
    ts, mid = event.thread_ts, event.message_id
    result: Forward | Compacted
    if type(event) is not ToolResult:  # a compacted one passes through as it is
        turn = with_turn_compact(event)  # a human message or an alert, redacted for the model
        result = Forward(value if turn is None else turn.to_bytes(), ts, mid)
    else:
        try:
            result = compact_event(
                event, recorded=recorded, selector=selector, budget=budget, config=config, raw_is_finite=True
            )
        except RawFormatError as exc:
            return _unanswerable(dead(f"raw format: {exc}", ts, mid), event, budget, config)
        except BudgetExceeded as exc:
            return _unanswerable(dead(f"budget exceeded: {exc}", ts, mid), event, budget, config)
        except Exception as exc:  # a compactor bug must not stop the partition behind it
            return _unanswerable(
                dead(f"compactor error: {type(exc).__name__}: {exc}", ts, mid), event, budget, config
            )
    size = len(result.value) + len(key or b"") + RECORD_OVERHEAD_BYTES
    if max_output_bytes is not None and size > max_output_bytes:
        letter = dead(
            f"output too large: {size} bytes with its key and batch overhead, over the output topic's "
            f"record limit of {max_output_bytes} bytes (max.message.bytes); the event stays on {topic}",
            ts,
            mid,
        )
        if type(event) is ToolResult:  # answer without the raw, which stays on the source topic
            where = {"not_kept": f"the raw stays on {topic} partition {partition} offset {offset}"}
            return _unanswerable(letter, event.model_copy(update={"raw": where}), budget, config)
        return letter
    return result


def _refused(
    dead: Callable[[str, str | None, str | None], Dead],
    value: bytes,
    reason: str,
    where: str,
    budget: int | None,
    config: CompactorConfig,
) -> Dead:
    """A record that `loads_strict` refuses. When it still reads as a tool result under plain `json`
    (a raw nested 300 deep, a 2000-digit integer), the agent waiting for it gets a truthful error
    digest, as for any raw that cannot be compacted; the raw stays on the source topic."""
    try:
        event = parse_event(value)
    except (ValueError, RecursionError):  # not even plain JSON, or not an event: the letter alone
        return dead(reason, None, None)
    letter = dead(reason, event.thread_ts, event.message_id)
    if type(event) is not ToolResult:
        return letter
    try:
        stub = event.model_copy(update={"raw": {"not_kept": f"the raw stays on {where}"}})
        return _unanswerable(letter, stub, budget, config)
    except (ValueError, RecursionError):  # what cannot be written back is outside the raw
        return letter


ERROR_REASON_CHARS = 300


def error_compact(reason: str, evidence_id: str) -> dict[str, str]:
    """What the model sees of a tool result that could not be compacted: the truth, and where the raw is."""
    reason = redact_text(reason)  # a parser's reason may quote the raw
    if len(reason) > ERROR_REASON_CHARS:
        reason = reason[: ERROR_REASON_CHARS - 1] + "…"
    return {"error": f"could not be compacted: {reason}; raw kept as evidence {evidence_id}"}


def _unanswerable(dead: Dead, event: ToolResult, budget: int | None, config: CompactorConfig) -> Dead:
    """The dead letter, with a truthful error digest for the agent beside it (never a hung round).

    The error is not a digest of the raw, so it is not cached as one: `compactor_version` marks it
    (`error:` prefix), and a new compactor version re-derives a real digest on replay."""
    raw_bytes = canonical_json_bytes(event.raw)
    evidence_id = str(event.alert_context.get("evidence_id") or event.message_id)
    compact = error_compact(dead.letter.reason, evidence_id)
    tokens = count_value_tokens(compact)
    outcome = CompactOutcome(
        compact=compact,
        tokens=tokens,
        raw_tokens=count_tokens(event.raw if isinstance(event.raw, str) else raw_bytes.decode()),
        raw_sha256=hashlib.sha256(raw_bytes).hexdigest(),
        selection=None,
        budget=max(budget or config.budget_for(event.tool), tokens),
        compactor_version=f"error:{config.version_for(event.tool)}",
    )
    answer = _with_compact(event, outcome)
    return Dead(dead.letter, dead.thread_ts, dead.message_id, compacted_bytes(answer, raw_bytes))


# What a one-record batch adds to key + value on the wire (v2 batch header and record framing), rounded up.
RECORD_OVERHEAD_BYTES = 512
