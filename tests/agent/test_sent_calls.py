"""What a model call was sent beside its rows, as the agent records it (services/agent/sent_calls.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from schemas.events import SentMessage
from services.agent.sent_calls import SentLog, checked_notes

T = "1773458070.000100"
TOOLS = [{"type": "function", "function": {"name": "query_loki", "description": "logs", "parameters": {}}}]
FORMAT = {"type": "json_schema", "json_schema": {"name": "HypothesisAnswer", "schema": {}, "strict": True}}


class Bound:
    """A model bound with a response_format, as `model.bind(response_format=...)` leaves it."""

    def __init__(self, answers: list[Any]) -> None:
        self.kwargs = {"response_format": FORMAT}
        self.answers = answers

    async def ainvoke(self, messages: list[Any]) -> Any:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _refusal() -> openai.BadRequestError:
    request = httpx2.Request("POST", "http://x/v1/chat/completions")
    response = httpx2.Response(400, request=request, json={"error": {"message": "json_schema not supported"}})
    return openai.BadRequestError("json_schema not supported", response=response, body=None)


def test_a_refusal_and_a_repair_are_recorded_as_calls_of_their_own() -> None:
    log = SentLog()
    first = [SystemMessage(content="s"), HumanMessage(content="u")]
    model = Bound([_refusal(), AIMessage(content="no json"), AIMessage(content="{}")])
    with pytest.raises(openai.BadRequestError):
        asyncio.run(log.invoke(model, first, []))
    asyncio.run(log.invoke(model, first, []))
    repair = [*first, AIMessage(content="no json"), HumanMessage(content="Your answer could not be used")]
    asyncio.run(log.invoke(model, repair, []))
    calls = log.take()
    assert calls is not None and len(calls) == 3
    assert calls[0].refused is not None and "400" in calls[0].refused and calls[1].refused is None
    assert [c.response_format for c in calls] == [FORMAT] * 3
    assert calls[0].appended == calls[1].appended == []
    assert calls[2].appended == [
        SentMessage(role="assistant", content="no json"),
        SentMessage(role="user", content="Your answer could not be used"),
    ]
    assert log.take() is None  # taken once: the next node starts afresh


def test_the_tools_and_the_judges_basis_are_recorded_with_the_call() -> None:
    log = SentLog()
    log.judged_from([{"claim": 0, "missing": ["198"]}], 8000)
    asyncio.run(log.invoke(Bound([AIMessage(content="{}")]), [HumanMessage(content="x")], TOOLS))
    (call,) = log.take() or []
    assert call.tools == TOOLS
    assert call.judge_basis is not None and call.judge_basis.input_budget == 8000
    assert call.judge_basis.raw_checks == [{"claim": 0, "missing": ["198"]}]


def test_the_checked_note_a_tool_result_carried_is_recorded_by_its_row() -> None:
    noted = ToolMessage(
        content=f"[checked: limit clamped from 5000 to 1000] [evidence {T}:1:tools:0] <data ...>",
        tool_call_id="c1",
        id=f"{T}:1:tools:0",
    )
    plain = ToolMessage(
        content=f"[evidence {T}:1:tools:1] <data ...>", tool_call_id="c2", id=f"{T}:1:tools:1"
    )
    assert checked_notes([noted, plain]) == {f"{T}:1:tools:0": "limit clamped from 5000 to 1000"}
