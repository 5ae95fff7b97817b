"""The hard limit on every model call's input (invariant 10), checked before the call.

The input is counted whole: the system preamble, every message, and the tool schemas and the
response_format (a structured answer's JSON Schema) sent beside them. The context that keeps it
under the limit is built by deterministic policies (the re-rendering of old rounds, the discussion
policy, the investigate loop's room check), so going over is a bug, like a digest over its budget:
the call is never made, and the round fails with an error that says by how much.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from schemas.tokens import count_tokens, render_for_model
from services.context_render.context import message_tokens


class InputBudgetExceeded(RuntimeError):
    """A model call's whole input is over the model's configured input budget."""

    def __init__(self, node: str, model: str, tokens: int, budget: int) -> None:
        super().__init__(
            f"{node} call to {model}: input of {tokens} tokens is over its budget of {budget} "
            f"(the context policy should have prevented this)"
        )
        self.node = node
        self.model = model
        self.tokens = tokens
        self.budget = budget


def check_input(node: str, model: str, tokens: int, budget: int) -> None:
    """Raise InputBudgetExceeded when `tokens` (the whole input) is over `budget`."""
    if tokens > budget:
        raise InputBudgetExceeded(node, model, tokens, budget)


def tool_schema_tokens(tools: Sequence[dict[str, Any]]) -> int:
    """Tokens of the tool schemas sent beside a call (cl100k_base over their compact JSON)."""
    return count_tokens(render_for_model(list(tools))) if tools else 0


def response_format_tokens(response_format: dict[str, Any] | None) -> int:
    """Tokens of a call's response_format (its JSON Schema is input the endpoint reads, like a tool's)."""
    return count_tokens(render_for_model(response_format)) if response_format else 0


def model_input_tokens(
    messages: Sequence[BaseMessage],
    tools: Sequence[dict[str, Any]],
    response_format: dict[str, Any] | None = None,
) -> int:
    """Everything one model call is sent: the messages (preamble included), the tool schemas and the
    response_format."""
    return message_tokens(messages) + tool_schema_tokens(tools) + response_format_tokens(response_format)
