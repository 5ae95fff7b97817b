"""What each model call was sent beside the rows it is rebuilt from, recorded on the row it produced.

The review page rebuilds every call from the projected rows (services/context_render/model_calls.py);
the rest of a call's input is runtime state the rows do not hold: the tool schemas the MCP servers
listed, the response_format the endpoint accepted (services/agent/structured.py steps down on a
refusal), the messages a repair retry appended, the `[checked: ...]` note a tool result carried, and
what the judge's payload was built from besides the rows (`JudgeBasis`). `SentLog` notes each call as the
graph makes it, and the node's event carries what it noted (`AiMessage.sent`, `JudgeVerdict.sent`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import openai
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from schemas.events import JudgeBasis, SentCall, SentMessage
from schemas.tokens import render_for_model


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else render_for_model(message.content)


def _appended(first: Sequence[BaseMessage], messages: Sequence[BaseMessage]) -> list[SentMessage]:
    """The messages a retry added after its node's first input (the answer and the repair prompt)."""
    if len(messages) <= len(first) or list(messages[: len(first)]) != list(first):
        return []
    return [
        SentMessage(role="assistant" if isinstance(m, AIMessage) else "user", content=_text(m))
        for m in messages[len(first) :]
    ]


_CHECKED = re.compile(r"^\[checked: (.*?)\] \[evidence ", re.DOTALL)


def checked_notes(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """The `[checked: ...]` note each tool result carried (graph.RoundGraph.tools), by its row id."""
    notes = {}
    for m in messages:
        found = (
            _CHECKED.match(m.content) if isinstance(m, ToolMessage) and isinstance(m.content, str) else None
        )
        if found and m.id:
            notes[m.id] = found.group(1)
    return notes


def response_format_of(model: Any) -> dict[str, Any] | None:
    """The response_format bound to a model (`model.bind(response_format=...)`), if any."""
    kwargs = getattr(model, "kwargs", None)
    found = kwargs.get("response_format") if isinstance(kwargs, dict) else None
    return dict(found) if isinstance(found, dict) else None


class SentLog:
    """The calls of the node being run, in order; `take` hands them to the node's event and starts over."""

    def __init__(self) -> None:
        self._first: list[BaseMessage] = []
        self._calls: list[SentCall] = []
        self._basis: JudgeBasis | None = None

    def judged_from(self, raw_checks: list[dict[str, Any]], input_budget: int) -> None:
        """The judge's next calls were built from these besides the rows (JudgeBasis)."""
        self._basis = JudgeBasis(raw_checks=raw_checks, input_budget=input_budget)

    def note(self, model: Any, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> None:
        if not self._calls:
            self._first = list(messages)
        self._calls.append(
            SentCall(
                tools=[dict(t) for t in tools],
                response_format=response_format_of(model),
                appended=_appended(self._first, messages),
                checked=checked_notes(messages),
                judge_basis=self._basis,
            )
        )

    def refused(self, exc: openai.APIStatusError) -> None:
        """The last call was answered with an error status (the structured chain may step down)."""
        if self._calls:
            last = self._calls[-1]
            said = f"HTTP {exc.status_code}: {exc.message}"[:300]
            self._calls[-1] = last.model_copy(update={"refused": said})

    def take(self) -> list[SentCall] | None:
        """The node's calls (None when it made none: a playbook turn, a hypothesis not judged)."""
        calls, self._calls, self._first, self._basis = self._calls, [], [], None
        return calls or None

    async def invoke(self, model: Any, messages: list[BaseMessage], tools: Sequence[dict[str, Any]]) -> Any:
        """`model.ainvoke(messages)`, noted first (a call the endpoint refused was still sent)."""
        self.note(model, messages, tools)
        try:
            return await model.ainvoke(messages)
        except openai.APIStatusError as exc:
            self.refused(exc)
            raise
