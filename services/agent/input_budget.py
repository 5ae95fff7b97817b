"""The hard limit on every model call's input (invariant 10), checked before the call.

The input is counted whole: the system preamble, every message and the tool schemas sent
beside them. The context that keeps it under the limit is built by deterministic policies
(the re-rendering of old rounds, the discussion policy, the investigate loop's room check),
so going over is a bug, like a digest over its budget: the call is never made, and the
round fails with an error that says by how much.
"""

from __future__ import annotations


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
