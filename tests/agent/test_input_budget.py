"""The hard budget on every model call's whole input: configured per model, checked before the call,
and kept by the investigate loop, which runs a tool call only when its result has room."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from schemas.events import ToolCall
from services.agent.answers import HypothesisAnswer, JudgeAnswer
from services.agent.config import build_config
from services.agent.graph import calls_with_room
from services.agent.structured import format_reserve, request_format
from services.context_render.context import message_tokens
from services.context_render.input_budget import (
    InputBudgetExceeded,
    check_input,
    model_input_tokens,
    response_format_tokens,
)
from services.runtime.errors import UserFacingError
from services.runtime.kafka_client import KafkaClient

KAFKA = KafkaClient.plaintext("unused:9092")


def config(**over: Any) -> Any:
    return build_config({}, env={}, kafka=KAFKA, database_url="postgresql://unused", **over)


def test_the_default_budget_is_8000_and_a_model_can_have_its_own() -> None:
    conf = config(input_budgets={"gpt-small": 4000})
    assert conf.input_budget_for("local") == 8000
    assert conf.input_budget_for("gpt-small") == 4000


@pytest.mark.parametrize("bad", [{"input_budget": 10}, {"input_budgets": {"m": 5}}, {"recent_share": 1.5}])
def test_an_unusable_budget_is_a_one_line_error(bad: dict[str, Any]) -> None:
    with pytest.raises(UserFacingError, match="agent config"):
        config(**bad)


def test_going_over_raises_before_the_call_and_says_by_how_much() -> None:
    check_input("investigate", "m", 8000, 8000)  # at the budget: fine
    with pytest.raises(InputBudgetExceeded, match="8001 tokens is over its budget of 8000"):
        check_input("investigate", "m", 8001, 8000)


def test_the_investigate_loop_runs_only_the_calls_whose_results_fit() -> None:
    conf = config(input_budget=8000, tool_result_tokens=400)
    deps = SimpleNamespace(config=conf, agent_model_name="local")
    calls = [ToolCall(id=f"c{k}", name="query_loki", args={"query": f"{{app='a{k}'}}"}) for k in range(5)]
    kept, dropped = calls_with_room(deps, "looking", calls, sent=6500, swap=0)  # type: ignore[arg-type]
    assert 1 <= len(kept) < 5 and dropped == ["query_loki"] * (5 - len(kept))
    assert calls_with_room(deps, "", calls, sent=2000, swap=0)[0] == calls  # type: ignore[arg-type]
    assert calls_with_room(deps, "", calls, sent=7900, swap=0)[0] == []  # type: ignore[arg-type]


def test_a_response_format_is_input_and_counted_with_the_messages() -> None:
    """A structured call's JSON Schema is read by the endpoint like a tool's: the whole input counts it,
    and the reserve held for it is the largest format the structured chain may send."""
    messages = [SystemMessage(content="judge"), HumanMessage(content="claims")]
    schema = JudgeAnswer.model_json_schema()
    fmt = request_format("json_schema", "JudgeAnswer", schema)
    assert response_format_tokens(fmt) > 50
    assert model_input_tokens(messages, [], fmt) == message_tokens(messages) + response_format_tokens(fmt)
    assert format_reserve(JudgeAnswer) == response_format_tokens(fmt)
    assert format_reserve(HypothesisAnswer) > 0


def test_the_loop_holds_back_what_the_hypothesis_format_adds_beyond_the_schemas() -> None:
    conf = config(input_budget=8000, tool_result_tokens=400)
    deps = SimpleNamespace(config=conf, agent_model_name="local")
    calls = [ToolCall(id=f"c{k}", name="query_loki", args={"query": f"{{app='a{k}'}}"}) for k in range(5)]
    roomy = calls_with_room(deps, "", calls, sent=5600, swap=0)[0]  # type: ignore[arg-type]
    tight = calls_with_room(deps, "", calls, sent=5600, swap=800)[0]  # type: ignore[arg-type]
    assert len(tight) == len(roomy) - 2 and len(roomy) >= 3
