"""The shapes every compactor shares: items (digest candidates), drafts, errors.

A compactor is a pure function `draft(raw, alert_context, evidence_id) -> Draft`.
It never decides what fits the budget: the call path in `registry` renders the
draft, counts its tokens and, only when over budget, asks a selector for ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class RawFormatError(ValueError):
    """The raw is not of the tool's format. The message is a one-line reason."""


class BudgetExceeded(RuntimeError):
    """The digest is over its budget after every fallback (invariant 7)."""

    def __init__(self, tool: str, tokens: int, budget: int) -> None:
        super().__init__(
            f"{tool}: digest is {tokens} tokens, over its budget of {budget} after every fallback"
        )
        self.tool = tool
        self.tokens = tokens
        self.budget = budget


@dataclass(frozen=True)
class Item:
    """One droppable-or-pinned unit of a digest (a log pattern, a series, a span, an event group).

    `body` is rendered verbatim; `n` is what it counts (lines, events...), reported
    even when the item is dropped; `pinned` items (error+) are never dropped.
    """

    id: str
    body: Mapping[str, Any]
    n: int = 1
    pinned: bool = False
    level: str = "info"
    first: str | None = None


@dataclass(frozen=True)
class Draft:
    """Everything a compactor found, before the budget is applied.

    `levels` holds the same items at decreasing resolution (level 0 = most detail);
    the call path tries each in turn before any selection. `fallback`, when set,
    renders a last-resort digest for a given budget (passthrough truncation).
    """

    header: Mapping[str, Any]
    section: str
    unit: str
    levels: tuple[tuple[Item, ...], ...]
    fallback: Callable[[int], dict[str, Any]] | None = field(default=None, compare=False)


class DraftFn(Protocol):
    def __call__(self, raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft: ...
