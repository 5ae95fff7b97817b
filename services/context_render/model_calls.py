"""What each model call of a round was sent, rebuilt from the thread's rows.

The agent's graph (services/agent/graph.py) sends an investigate call as [system: preamble and the
investigate prompt, the context as loaded, this round's turn so far] with the tool schemas, the
hypothesis call as the same messages under the hypothesis prompt with a response format, and the judge
its prompt and one framed payload (services/context_render/judge_input.py, judge_shape.py). Every
message is a pure function of rows (invariant 4), so the same functions rebuild the calls here; what a
call was sent beside the rows (tool schemas, response format, a retry's appended messages, a tool
result's `[checked: ...]` note, the judge's raw checks and budget) is recorded on the row its answer
became (`sent`, services/agent/sent_calls.py). The review page shows what was sent, and
tests/agent/test_openai_wire.py and test_model_conformance.py hold the rebuilt calls equal to the
requests the model endpoint received.

The projection keeps a row's first and current renderings only. A round is rebuilt exactly when
every row it saw is still in the rendering it had then: always for the thread's last round, and for
an earlier round when no row before it was re-rendered since. Otherwise the call is marked inexact,
with the rows whose rendering at that time the projection no longer holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from schemas.events import MadeFor, SentCall, SentMessage
from schemas.ids import parse_message_id
from schemas.row_view import model_view
from schemas.tokens import count_value_tokens
from services.context_render import prompts
from services.context_render.context import (
    ContextRow,
    IncidentState,
    LoadedContext,
    folded,
    message_tokens,
    repair_dangling_tool_calls,
    row_to_message,
    to_messages,
)
from services.context_render.input_budget import response_format_tokens, tool_schema_tokens
from services.context_render.judge_input import judge_message, judge_payload
from services.context_render.judge_shape import judge_input_tokens, shape_judge_payload
from services.context_render.preamble import Trigger, render_preamble, trigger_time
from services.context_render.recall_view import is_recall_row


@dataclass(frozen=True)
class RowShown:
    """How one row before the round reached the model: whole, re-rendered, clipped, folded or left out."""

    id: str
    role: str
    how: str
    tokens: int


@dataclass(frozen=True)
class ModelCall:
    round: int
    node: str  # investigate | hypothesis | judge
    answer_id: str  # the row the call's answer became
    messages: list[BaseMessage]
    tool_schemas_sent: bool  # investigate calls carry the telemetry tools' schemas
    rows: list[RowShown]
    inexact: list[str] = field(default_factory=list)  # rows whose rendering then is not in the projection
    # What the call was sent beside the messages, as the row recorded it (AiMessage.sent); None: the row
    # was written before calls were recorded, so the tool schemas sent (if any) are not known.
    sent: SentCall | None = None
    attempt: int = 1  # a node's later calls: a structured-output retry after a refusal or a repair

    @property
    def message_tokens(self) -> int:
        """The agent's own count of the messages (`message_tokens`), preamble included."""
        return message_tokens(self.messages)

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """The tool schemas sent (empty: none); None when sent but not recorded (an older row)."""
        if self.sent is not None:
            return list(self.sent.tools)
        return None if self.tool_schemas_sent else []

    @property
    def tool_tokens(self) -> int | None:
        tools = self.tools
        return None if tools is None else tool_schema_tokens(tools)

    @property
    def format_tokens(self) -> int:
        """The response_format's tokens (0: none sent, or not recorded)."""
        return response_format_tokens(self.sent.response_format if self.sent is not None else None)

    @property
    def input_tokens(self) -> int | None:
        """The whole input as the agent counts it (`model_input_tokens`): messages, tool schemas and the
        response_format."""
        tools = self.tool_tokens
        return None if tools is None else self.message_tokens + tools + self.format_tokens


def round_trigger(before: Sequence[ContextRow], round_: int) -> Trigger | None:
    """The wake that started a round: the last mention of the bot before it, else the alert."""
    last_round_row = max((i for i, r in enumerate(before) if r.round is not None), default=-1)
    for row in reversed(before[last_round_row + 1 :]):
        value = row.value if isinstance(row.value, dict) else {}
        if row.role == "human" and value.get("mention"):
            return Trigger("mention", row.id, str(value.get("user")) if value.get("user") else None)
    alert = next((r for r in before if r.role == "alert"), None)
    if round_ == 1 and alert is not None:
        return Trigger("alert", alert.id)
    return None


def shown_rows(before: Sequence[ContextRow], kept: Sequence[ContextRow]) -> list[RowShown]:
    kept_ids = {r.id for r in kept}
    out = []
    for row in before:
        value = row.value if isinstance(row.value, dict) else {}
        if row.id not in kept_ids:
            how = "left out (tool calls not all answered)"
        elif folded(row):
            how = "folded"
        elif value.get("re_rendered") == "clipped":
            how = "clipped"
        elif row.re_rendered:
            how = f"re-rendered ({value.get('re_rendered')})"
        else:
            how = "whole"
        out.append(RowShown(row.id, row.role, how, row.tokens))
    return out


def rebuild_round(
    thread_ts: str,
    state: IncidentState | None,
    before: Sequence[ContextRow],
    own: Sequence[ContextRow],
    round_: int,
    inexact: Sequence[str] = (),
    recalled: tuple[ContextRow, str] | None = None,
    sent: Mapping[str, Sequence[SentCall]] | None = None,
) -> list[ModelCall]:
    """The model calls of round `round_`: `before` is the context it loaded (rows in the renderings
    they had then), `own` its rows as first written, `sent` what each row's calls were sent beside them.
    Playbook turns made no model call. `recalled` is the recall row this round recorded and the node
    it was made for: the agent appended it to the turn just before that node's call."""
    trigger = round_trigger(before, round_)
    if trigger is None:
        return []
    ctx = LoadedContext(thread_ts, tuple(repair_dangling_tool_calls(before)), state)
    clock = trigger_time(ctx, trigger)
    if clock is None:
        return []
    preamble = render_preamble(ctx, round_, trigger, clock)
    context = to_messages(ctx.rows)
    shown = shown_rows(before, ctx.rows)
    names = {str(c.get("id")): str(c.get("name")) for r in own for c in r.tool_calls()}
    recorded = sent or {}
    notes = {tid: note for r in own for c in recorded.get(r.id, ()) for tid, note in c.checked.items()}
    turn: list[BaseMessage] = []
    calls: list[ModelCall] = []
    hypothesis: dict[str, Any] = {}
    for row in own:
        node = parse_message_id(row.id)[2]
        value = row.value if isinstance(row.value, dict) else {}
        if recalled is not None and row.role == "ai" and node == recalled[1]:
            turn.append(row_to_message(recalled[0]))
            recalled = None
        if row.role == "ai" and node == "investigate":
            if not str(value.get("model", "")).startswith("playbook:"):
                system = SystemMessage(content=f"{preamble}\n\n{prompts.INVESTIGATE}")
                made = Made(round_, node, row.id, True, shown, list(inexact))
                calls += made.calls([system, *context, *turn], recorded.get(row.id))
            turn.append(row_to_message(row))
        elif row.role == "tool":
            turn.append(with_note(row_to_message(row, names.get(row.tool_call_id or "")), notes.get(row.id)))
        elif row.role == "ai" and node == "hypothesis":
            system = SystemMessage(content=f"{preamble}\n\n{prompts.HYPOTHESIS}")
            made = Made(round_, node, row.id, False, shown, list(inexact))
            calls += made.calls([system, *context, *turn], recorded.get(row.id))
            hypothesis = value
        elif row.role == "judge":
            made = Made(round_, node, row.id, False, [], list(inexact))
            calls += judge_calls(made, ctx, turn, hypothesis, value, recorded.get(row.id, ()))
            break
    return calls


def with_note(message: BaseMessage, note: str | None) -> BaseMessage:
    """A tool result as the agent sent it: with the `[checked: ...]` note its call's check left, if any."""
    if note is None or not isinstance(message, ToolMessage):
        return message
    return ToolMessage(
        content=f"[checked: {note}] {message.content}", tool_call_id=message.tool_call_id, id=message.id
    )


def judge_calls(
    made: Made,
    ctx: LoadedContext,
    turn: Sequence[BaseMessage],
    hypothesis: Mapping[str, Any],
    verdict: Mapping[str, Any],
    recorded: Sequence[SentCall],
) -> list[ModelCall]:
    """The judge's calls, rebuilt as graph.RoundGraph.judge builds them: the hypothesis and the evidence
    it cites as the round saw it, shaped to the recorded budget with the recorded raw checks. A verdict
    recorded without them (nothing judged, or written before calls were recorded) gives none."""
    basis = next((c.judge_basis for c in recorded if c.judge_basis is not None), None)
    if basis is None or not hypothesis:
        return []
    claims = [{"text": c.get("text"), "evidence_ids": list(c.get("evidence_ids") or [])}
              for c in hypothesis.get("claims") or []]  # fmt: skip
    hyp = {"summary": hypothesis.get("text", ""), "claims": claims}
    payload = judge_payload(ctx, turn, hyp, verdict.get("hypothesis_id"), basis.raw_checks)
    shaped = shape_judge_payload(payload, basis.input_budget, judge_input_tokens)
    return made.calls([SystemMessage(content=prompts.JUDGE), judge_message(shaped)], recorded)


@dataclass(frozen=True)
class Made:
    """Where a node's calls came from: its round, node, the row its answer became, what it was shown."""

    round: int
    node: str
    answer_id: str
    tools_sent: bool  # what an unrecorded call was sent: the investigate calls carry tool schemas
    rows: list[RowShown]
    inexact: list[str]

    def calls(self, messages: list[BaseMessage], recorded: Sequence[SentCall] | None) -> list[ModelCall]:
        """The node's calls: each recorded attempt (a retry adds what it appended), else the one call."""
        if not recorded:
            return [ModelCall(self.round, self.node, self.answer_id, messages, self.tools_sent, self.rows,
                              self.inexact)]  # fmt: skip
        return [self.attempt(messages, c, k) for k, c in enumerate(recorded, start=1)]

    def attempt(self, messages: list[BaseMessage], sent: SentCall, k: int) -> ModelCall:
        sent_messages = [*messages, *map(appended_message, sent.appended)]
        return ModelCall(
            self.round,
            self.node,
            self.answer_id,
            sent_messages,
            bool(sent.tools),
            self.rows,
            self.inexact,
            sent,
            k,
        )


def appended_message(message: SentMessage) -> BaseMessage:
    """A message a retry appended, as the agent sent it (the first answer, the repair prompt)."""
    if message.role == "assistant":
        return AIMessage(content=message.content)
    return HumanMessage(content=message.content)


def recorded_calls(content: Any) -> list[SentCall]:
    """The calls a row recorded beside its content (`sent`), in the order made; none for older rows."""
    given = content.get("sent") if isinstance(content, dict) else None
    return [SentCall.model_validate(c) for c in given] if isinstance(given, list) else []


def recall_placement(row: StoredRow, first_round: int) -> tuple[int, str]:
    """The round and node the recall row was made for. A row recorded before RecallRecorded said so
    (`made_for`) was made by the one rule the agent then had: the first round's hypothesis."""
    given = row.content.get("made_for") if isinstance(row.content, dict) else None
    if isinstance(given, dict):
        made = MadeFor.model_validate(given)
        return made.round, made.node
    return first_round, "hypothesis"


@dataclass(frozen=True)
class StoredRow:
    """A projected row with the renderings the projection keeps: its current one (`compact`, or the
    raw `content` when NULL) and, for a tool row, the digest it was written with (`first_compact`)."""

    id: str
    role: str
    tool_call_id: str | None
    round: int | None
    content: Any
    compact: Any
    tokens: int
    first_compact: Any = None
    first_tokens: int | None = None
    # Its later renderings in the order applied, as (round made for, compact, tokens): rendering_history
    # (migration 011). Empty for a row never re-rendered, or projected before that table existed.
    history: tuple[tuple[int | None, Any, int], ...] = ()

    @property
    def re_rendered(self) -> bool:
        return isinstance(self.compact, dict) and bool(self.compact.get("re_rendered"))

    def current(self) -> ContextRow:
        value = self.content if self.compact is None else self.compact
        return ContextRow(self.id, self.role, self.tool_call_id, value, self.tokens)

    def as_written(self) -> ContextRow | None:
        """The row as its own round saw it; None when the projection no longer holds that rendering
        (a human or alert row written with a compact, since re-rendered)."""
        if not self.re_rendered:
            return self.current()
        if self.first_compact is not None:
            tokens = self.first_tokens if self.first_tokens is not None else self.tokens
            return ContextRow(self.id, self.role, self.tool_call_id, self.first_compact, tokens)
        if self.role in ("ai", "judge", "post"):  # the model saw the content without its bookkeeping
            view = model_view(self.content)
            return ContextRow(self.id, self.role, self.tool_call_id, view, count_value_tokens(view))
        return None


def at_round(row: StoredRow, round_: int, last: bool) -> ContextRow | None:
    """The row as round `round_` loaded it; None when the projection cannot tell."""
    if last:
        return row.current()
    if not row.history:
        return None if row.re_rendered else row.current()  # re-rendered before the history was kept
    if any(made is None for made, _c, _t in row.history):
        return None  # an edit or delete: not tied to a round
    made_by_then = [(c, t) for made, c, t in row.history if made is not None and made <= round_]
    if not made_by_then:
        return row.as_written()
    compact, tokens = made_by_then[-1]
    return ContextRow(row.id, row.role, row.tool_call_id, compact, tokens)


def thread_calls(thread_ts: str, state: IncidentState | None, rows: Sequence[StoredRow]) -> list[ModelCall]:
    """Every round's model calls, rebuilt from the thread's rows in seq order (see the module's note
    on which rounds are exact)."""
    rounds = sorted({r.round for r in rows if r.round is not None})
    recall = next((r for r in rows if is_recall_row(r.id, r.role)), None)
    placed = recall_placement(recall, rounds[0]) if recall is not None and rounds else None
    sent = {r.id: recorded_calls(r.content) for r in rows if r.role in ("ai", "judge")}
    calls: list[ModelCall] = []
    for round_ in rounds:
        first = next(i for i, r in enumerate(rows) if r.round == round_)
        earlier = [r for r in rows[:first] if r.round is None or r.round < round_]
        last = round_ == rounds[-1]
        then = [(r, at_round(r, round_, last)) for r in earlier]
        # A row whose rendering then the projection does not hold: shown as it is now, and said.
        before = [seen or r.current() for r, seen in then]
        inexact = [r.id for r, seen in then if seen is None]
        own = [r.as_written() for r in rows if r.round == round_]
        if any(r is None for r in own):
            inexact += [r.id for r in rows if r.round == round_ and r.as_written() is None]
        # The recall row is projected at once, before its round's rows (they wait for the commit), but
        # its round's calls before the one it was made for never had it: it joins that call's turn.
        recalled = None
        if placed is not None and placed[0] == round_:
            row = next((r for r in before if recall is not None and r.id == recall.id), None)
            recalled = None if row is None else (row, placed[1])
            before = [r for r in before if row is None or r.id != row.id]
        seen = state if state is None else replace(state, rounds=round_ - 1)
        mine = [r for r in own if r is not None]
        calls += rebuild_round(thread_ts, seen, before, mine, round_, inexact, recalled, sent)
    return calls
