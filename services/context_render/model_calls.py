"""What each model call of a round was sent, rebuilt from the thread's rows.

The agent's graph (services/agent/graph.py) sends an investigate call as [system: preamble and the
investigate prompt, the context as loaded, this round's turn so far] with the tool schemas, and the
hypothesis call as the same messages under the hypothesis prompt without them. Every piece is a
pure function of rows (invariant 4), so the same functions rebuild the calls here: the review page
shows what was sent, and tests/agent/test_openai_wire.py holds the rebuilt calls equal to the
requests the model endpoint received.

The projection keeps a row's first and current renderings only. A round is rebuilt exactly when
every row it saw is still in the rendering it had then: always for the thread's last round, and for
an earlier round when no row before it was re-rendered since. Otherwise the call is marked inexact,
with the rows whose rendering at that time the projection no longer holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from schemas.ids import parse_message_id
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
from services.context_render.input_budget import tool_schema_tokens
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
    node: str  # investigate | hypothesis
    answer_id: str  # the row the call's answer became
    messages: list[BaseMessage]
    tool_schemas_sent: bool  # investigate calls carry the telemetry tools' schemas
    rows: list[RowShown]
    inexact: list[str] = field(default_factory=list)  # rows whose rendering then is not in the projection

    @property
    def message_tokens(self) -> int:
        """The agent's own count of the messages (`message_tokens`), preamble included."""
        return message_tokens(self.messages)

    def input_tokens(self, tool_schemas: Sequence[dict[str, Any]]) -> int:
        """The whole input as the agent counts it (`model_input_tokens`), given the schemas offered."""
        return self.message_tokens + (tool_schema_tokens(tool_schemas) if self.tool_schemas_sent else 0)


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
    recalled: ContextRow | None = None,
) -> list[ModelCall]:
    """The model calls of round `round_`: `before` is the context it loaded (rows in the renderings
    they had then), `own` its rows as first written. Playbook turns made no model call. `recalled` is the
    recall row this round recorded: the agent appended it to the turn just before the hypothesis."""
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
    turn: list[BaseMessage] = []
    calls: list[ModelCall] = []
    for row in own:
        node = parse_message_id(row.id)[2]
        value = row.value if isinstance(row.value, dict) else {}
        if row.role == "ai" and node == "investigate":
            if not str(value.get("model", "")).startswith("playbook:"):
                system = SystemMessage(content=f"{preamble}\n\n{prompts.INVESTIGATE}")
                calls.append(
                    ModelCall(round_, node, row.id, [system, *context, *turn], True, shown, list(inexact))
                )
            turn.append(row_to_message(row))
        elif row.role == "tool":
            turn.append(row_to_message(row, names.get(row.tool_call_id or "")))
        elif row.role == "ai" and node == "hypothesis":
            if recalled is not None:
                turn.append(row_to_message(recalled))
            system = SystemMessage(content=f"{preamble}\n\n{prompts.HYPOTHESIS}")
            calls.append(
                ModelCall(round_, node, row.id, [system, *context, *turn], False, shown, list(inexact))
            )
            break
    return calls


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
        if self.role in ("ai", "judge", "post"):  # written with compact NULL: the model saw the content
            return ContextRow(
                self.id, self.role, self.tool_call_id, self.content, count_value_tokens(self.content)
            )
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
        # Recall runs once, in the first round, after its investigation: its row (projected before the
        # round's own rows, which wait for the commit) was not in that round's loaded context.
        recalled = (
            next((r for r in before if is_recall_row(r.id, r.role)), None) if round_ == rounds[0] else None
        )
        before = [r for r in before if r is not recalled]
        seen = state if state is None else replace(state, rounds=round_ - 1)
        mine = [r for r in own if r is not None]
        calls += rebuild_round(thread_ts, seen, before, mine, round_, inexact, recalled)
    return calls
