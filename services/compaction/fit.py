"""Fit a draft into its token budget: keep as many items as fit, then spend what is left on resolution.

Why this order: a digest that names every large pattern at low resolution says more than one
that shows three patterns in full, and whatever is left out is still counted (invariant 7).
So the fitter first finds the longest prefix of the candidates that fits at their tersest
forms, with the tersest header that allows it, then upgrades the kept items one resolution
step at a time, in candidate order, round after round, while the digest still fits. Pinned
(error+) candidates come first in every order, so an error is never dropped while something
less severe is shown.

Token costs are estimated per part while searching (the parts of a JSON object add up to
within a token or two), and the result is counted exactly; if the estimate was short, the
search runs again with the difference taken off the budget. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemas.tokens import count_tokens, count_value_tokens, render_for_model
from services.compaction.model import Draft, Item

LEVEL_ORDER = ("fatal", "critical", "error", "warn", "info", "debug")
# What a shown unit is worth when choosing between coarser and finer variants: to an incident
# responder an error line says more than a warning, and a warning more than an info line.
SEVERITY = {"fatal": 8.0, "critical": 8.0, "error": 8.0, "warn": 2.0, "info": 1.0, "debug": 0.5}
OMITTED = "omitted"


def omitted_text(left: Sequence[Item], kind: str, unit: str) -> str | None:
    """`"95 patterns, 412 lines (error 3/5, info 92/407)"`: exactly what was left out, by level
    (items count as the `members` they stand for, units as their `n`)."""
    by_level: dict[str, list[int]] = {}
    for item in left:
        tally = by_level.setdefault(item.level, [0, 0])
        tally[0] += item.members
        tally[1] += item.n
    return _text(by_level, kind, unit)


def _text(by_level: Mapping[str, Sequence[int]], kind: str, unit: str) -> str | None:
    if not by_level:
        return None
    text = f"{sum(t[0] for t in by_level.values())} {kind}, {sum(t[1] for t in by_level.values())} {unit}"
    if set(by_level) != {"info"}:
        order = [lv for lv in LEVEL_ORDER if lv in by_level] + sorted(set(by_level) - set(LEVEL_ORDER))
        text += " (" + ", ".join(f"{lv} {by_level[lv][0]}/{by_level[lv][1]}" for lv in order) + ")"
    return text


class _Suffixes:
    """What is left out when the first k candidates are kept, for every k, in O(levels) each."""

    def __init__(self, candidates: Sequence[Item], kind: str, unit: str) -> None:
        self.kind, self.unit = kind, unit
        self.tallies: list[dict[str, tuple[int, int]]] = [{}]
        running: dict[str, tuple[int, int]] = {}
        for item in reversed(candidates):
            k, n = running.get(item.level, (0, 0))
            running = {**running, item.level: (k + item.members, n + item.n)}
            self.tallies.append(running)
        self.tallies.reverse()  # tallies[k] = what is left when k are kept
        self._cost: dict[int, int] = {}

    def text(self, kept: int) -> str | None:
        return _text(self.tallies[kept], self.kind, self.unit)

    def cost(self, kept: int) -> int:
        cost = self._cost.get(kept)
        if cost is None:
            text = self.text(kept)
            cost = self._cost[kept] = 0 if text is None else count_tokens(render_for_model(text)) + 4
        return cost


def _worth(item: Item) -> float:
    """What showing an item is worth: the units it shows, times its weight and its severity."""
    return item.weight * SEVERITY.get(item.level, 1.0) * item.n


def _shown(items: Sequence[Item]) -> float:
    """What a digest's kept items are worth, to choose between variants: each item's `_worth`
    divided by its rank among the kept items of its level (the third error item counts a third).
    The first items of a level say what is wrong at that level and each further one says less, so
    a long tail of small error patterns shown whole does not outbid the largest lesser patterns
    (the story), while every error line stays counted in a fold."""
    rank: dict[str, int] = {}
    total = 0.0
    for item in items:
        rank[item.level] = rank.get(item.level, 0) + 1
        total += _worth(item) / rank[item.level]
    return total


def render(
    header: Mapping[str, Any], section: str, forms: Sequence[Any], omitted: str | None
) -> dict[str, Any]:
    compact = dict(header)
    if forms:
        compact[section] = list(forms)
    if omitted is not None:
        compact[OMITTED] = omitted
    return compact


@dataclass(frozen=True)
class Fitted:
    compact: dict[str, Any]
    tokens: int
    kept: int  # how many candidates are in the digest
    shown: float  # what the kept candidates are worth (`_shown`), to choose between variants


FormCosts = dict[tuple[int, int], int]


class _Costs:
    """Token cost of each candidate's forms, counted once and only when asked. The cache may be
    shared by several fits of the same items (keyed by the item object, alive for the call)."""

    def __init__(self, candidates: Sequence[Item], cache: FormCosts | None) -> None:
        self.candidates = candidates
        self._cache: FormCosts = {} if cache is None else cache

    def __call__(self, index: int, form: int) -> int:
        return form_cost(self.candidates[index], form, self._cache)


def form_cost(item: Item, form: int, cache: FormCosts) -> int:
    """Tokens one of an item's forms adds to a digest (its text and a separator), counted once."""
    key = (id(item), form)
    cost = cache.get(key)
    if cost is None:
        cost = cache[key] = count_tokens(render_for_model(item.forms[form])) + 1
    return cost


def fit(
    draft: Draft,
    candidates: Sequence[Item],
    budget: int,
    most: int | None = None,
    cache: FormCosts | None = None,
    upgrade: bool = True,
) -> Fitted | None:
    """The richest digest of `candidates` (in this order) within `budget`, or None if even the
    tersest header with everything counted as omitted does not fit. At most `most` candidates are
    kept (a selection's length); the rest are counted as omitted.

    Kept items go no terser than their `least` form (a log pattern keeps its first and last times):
    `minor` items (one-off log lines) are left out, and counted, first. Only when that would leave
    out a pinned item or one that is not minor are the forms past `least` used: then the minor
    items are left out, and the kept ones get their `least` forms back in order while they fit."""
    search = _Search(
        draft, candidates, _Costs(candidates, cache), _Suffixes(candidates, draft.kind, draft.unit)
    )
    floors = [it.least for it in candidates]
    tersest = [len(it.forms) - 1 for it in candidates]
    limit = len(candidates) if most is None else min(most, len(candidates))
    major = max((i + 1 for i, it in enumerate(candidates[:limit]) if it.pinned or not it.minor), default=0)
    need = min(max(major, 1), limit)
    slack = 0
    for _ in range(8):
        room = budget - slack
        plan = search.plan(room, most, upgrade, floors, floors)
        if floors != tersest and (plan is None or len(plan[1]) < need):
            terse = search.plan(room, need, upgrade, tersest, floors)
            if terse is not None and (plan is None or len(terse[1]) > len(plan[1])):
                plan = terse
        if plan is None:
            return None
        header, levels = plan
        kept = [candidates[i].forms[lv] for i, lv in enumerate(levels)]
        compact = render(header, draft.section, kept, search.suffixes.text(len(levels)))
        tokens = count_value_tokens(compact)
        if tokens <= budget:
            shown = _shown(candidates[: len(levels)])
            return Fitted(compact, tokens, len(levels), shown)
        slack += tokens - budget
    return None


@dataclass(frozen=True)
class _Search:
    """What stays the same through one fit's search: the draft, its candidates in order, and the
    estimated costs of their forms and of every count of what is left out."""

    draft: Draft
    candidates: Sequence[Item]
    costs: _Costs
    suffixes: _Suffixes

    def plan(
        self, budget: int, most: int | None, upgrade: bool, floors: Sequence[int], goals: Sequence[int]
    ) -> tuple[Mapping[str, Any], list[int]] | None:
        """(header, form index of each kept candidate) by the estimates: as many candidates as fit at
        their `floors` forms, each at least at its `goals` form where that fits (in order), then
        upgraded one step at a time, round after round; None if nothing fits."""
        if budget <= 0:
            return None
        chosen = self.header(budget, most, floors)
        if chosen is None:
            return None
        header, kept, base = chosen
        fixed = base + self.suffixes.cost(kept)
        if not upgrade:
            return header, list(floors[:kept])
        # One step at a time from the tersest forms, round after round, as long as that reaches every
        # kept item's `goals` form (it does whenever the goals fit and are on the way); otherwise the
        # goals first, in order, then the same rounds.
        costs = self.costs
        tersest = [len(self.candidates[i].forms) - 1 for i in range(kept)]
        levels = _rounds(tersest, fixed, budget, costs)
        if any(lv > goal for lv, goal in zip(levels, goals, strict=False)):
            levels = list(floors[:kept])
            total = fixed + sum(costs(i, lv) for i, lv in enumerate(levels))
            for i in range(kept):
                if levels[i] > goals[i]:
                    delta = costs(i, goals[i]) - costs(i, levels[i])
                    if total + delta <= budget:
                        levels[i] = goals[i]
                        total += delta
            levels = _rounds(levels, fixed, budget, costs)
        return header, levels

    def header(
        self, budget: int, most: int | None, floors: Sequence[int]
    ) -> tuple[Mapping[str, Any], int, int] | None:
        """(header, how many candidates it leaves room for, its cost): the richest header that takes at
        most a quarter of the budget (window, levels and labels are worth more than the last few items),
        else the tersest one that fits at all; but never a header that leaves out a pinned candidate
        some terser header has room for: an error pattern is worth more than the header's detail."""
        draft, candidates = self.draft, self.candidates
        options: list[tuple[Mapping[str, Any], int, int]] = []
        for h_index, header in enumerate(draft.headers):
            base = count_value_tokens(render(header, draft.section, [], None)) + (2 if candidates else 0)
            if base > budget // 4 and h_index < len(draft.headers) - 1:
                continue
            kept = self.longest_prefix(budget - base, most, floors)
            if kept is not None:
                options.append((header, kept, base))
        if not options:
            return None
        pinned = sum(1 for it in candidates[: max(kept for _, kept, _ in options)] if it.pinned)
        return next(o for o in options if sum(1 for it in candidates[: o[1]] if it.pinned) >= pinned)

    def longest_prefix(self, room: int, most: int | None, floors: Sequence[int]) -> int | None:
        """The most candidates, taken in order at their `floors` forms, that fit in `room` together with
        the count of the rest; None when not even the count of everything fits."""
        best = None
        spent = 0
        candidates = self.candidates
        for kept in range((len(candidates) if most is None else min(most, len(candidates))) + 1):
            if kept:
                spent += self.costs(kept - 1, floors[kept - 1])
                if spent > room:
                    break
            if spent + self.suffixes.cost(kept) <= room:
                best = kept
        return best


def _rounds(start: Sequence[int], fixed: int, budget: int, costs: _Costs) -> list[int]:
    """Upgrade each item one resolution step, in order, round after round, while the total fits."""
    levels = list(start)
    total = fixed + sum(costs(i, lv) for i, lv in enumerate(levels))
    changed = True
    while changed:
        changed = False
        for i in range(len(levels)):
            if levels[i] == 0:
                continue
            delta = costs(i, levels[i] - 1) - costs(i, levels[i])
            if total + delta <= budget:
                levels[i] -= 1
                total += delta
                changed = True
    return levels
