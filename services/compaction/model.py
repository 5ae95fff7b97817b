"""The shapes every compactor shares: items (digest candidates), drafts, errors.

A compactor is a pure function `draft(raw, alert_context, evidence_id) -> Draft`. It finds
everything worth saying and says it at several resolutions; it never decides what fits the
budget. The call path (`registry`, through `fit`) renders the draft, counts tokens itself,
degrades resolution before it drops anything, and counts exactly what it leaves out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class RawFormatError(ValueError):
    """The raw is not of the tool's format. The message is a one-line reason."""


class BudgetExceeded(RuntimeError):
    """The digest is over its budget after every fallback (invariant 7).

    A guard, not a path: for every raw that parses and every budget at or above `BUDGET_FLOOR`
    the fitter finds a digest (property tests show this never fires there)."""

    def __init__(self, tool: str, tokens: int, budget: int) -> None:
        super().__init__(
            f"{tool}: digest is {tokens} tokens, over its budget of {budget} after every fallback"
        )
        self.tool = tool
        self.tokens = tokens
        self.budget = budget


# The smallest budget for which every built-in compactor always fits (invariant 7), with an
# evidence id of up to 64 characters (ours are `thread_ts:round:node:i`, about 30).
BUDGET_FLOOR = 120


@dataclass(frozen=True)
class Item:
    """One unit of a digest that can be kept or left out: a log pattern, a series, a span group.

    `forms` are its renderings, richest first; the last (tersest) still names what it is and its
    count, so keeping an item at any form keeps its facts. Forms after `essential` drop something
    the item should keep (a pattern's times): the fitter leaves out `minor` items before it uses
    them. `n` is what it counts (lines, samples, spans, occurrences) and `level` its severity: an
    item left out is still counted, by level. `pinned` items (error or worse) come before every
    unpinned one, so an error is never dropped while something less severe is shown. `salience`
    orders unpinned items for the local selector (higher first).
    """

    id: str
    forms: tuple[Any, ...]
    n: int = 1
    level: str = "info"
    pinned: bool = False
    salience: float = 0.0
    first: str | None = None
    weight: float = 1.0  # how fully it shows its n (a coarse group of patterns shows them at half)
    members: int = 1  # how many of the draft's `kind` it stands for (a group of 30 similar series: 30)
    # The tersest form that still keeps everything the item must say (a log pattern: its first and
    # last times, invariant 6); the forms after it are a last resort, used only when leaving out the
    # minor items is not enough (`fit.fit`). None: every form keeps it.
    essential: int | None = None
    minor: bool = False  # low salience (a one-off log line): left out before a kept item loses a fact
    # It says only that its units stand still (series that never move): a count says as much while
    # anything that changes is left out, so it is kept only after every unpinned item that is not
    # filler (`registry`, the selectors), never in the place of one.
    filler: bool = False

    @property
    def least(self) -> int:
        """The index of the tersest form the fitter reaches for before the last resort."""
        last = len(self.forms) - 1
        return last if self.essential is None else min(self.essential, last)


@dataclass(frozen=True)
class Draft:
    """Everything a compactor found, before the budget is applied.

    `headers` are the digest's fixed fields at decreasing resolution; the last one is small and
    bounded (it must fit the floor together with the omitted counts). `section` is the key of
    the item list, `kind` names an item (patterns, series, groups) and `unit` what `n` counts.
    `coarser` holds replacements for the pinned items, each covering every pinned unit at a
    coarser grain (the largest errors alone, the rest folded into groups): the call path takes
    the one whose kept items are worth the most (`fit._shown`: units shown x weight x severity, over
    the item's rank in its level), so the tail
    of a thousand small error patterns folds into groups instead of crowding out everything else.
    `fallback`, when set, renders a last-resort digest for a budget (passthrough truncation).
    """

    headers: tuple[Mapping[str, Any], ...]
    section: str
    kind: str
    unit: str
    items: tuple[Item, ...]
    coarser: tuple[tuple[Item, ...], ...] = ()
    fallback: Callable[[int], dict[str, Any]] | None = field(default=None, compare=False)


class DraftFn(Protocol):
    def __call__(self, raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft: ...
