"""Compactors for new formats, loaded from outside this package without changing it.

`COMPACTOR_PLUGINS='{"my_format": "my_pkg.compactors:draft"}'` names, for each new compactor,
a function `draft(raw, alert_context, evidence_id) -> Draft` (see `model.py`). The module
may set `VERSION` (its own version, recorded with every compact it makes, so that changing
the plugin changes the replay key) and `BUDGET` (its default token budget; else the
passthrough budget; `COMPACTOR_BUDGETS` overrides both). Tools then map onto it with
`COMPACTOR_TOOL_MAP='{"my_tool": "my_format"}'`, which the agent reads too.

`config.load_config()` loads them once, at start-up, into the immutable `CompactorConfig`.
The call path treats a plugin like any compactor: it counts the plugin's digest itself,
dead-letters a digest over budget, and dead-letters an exception with its type and
message while the partition goes on. A plugin that cannot be loaded stops the worker at
start-up with one line, before it consumes anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.compaction.model import DraftFn
from services.runtime.errors import UserFacingError
from services.runtime.loading import load_attr

ENV = "COMPACTOR_PLUGINS"


@dataclass(frozen=True)
class Plugin:
    draft: DraftFn
    version: str
    budget: int | None  # None: the passthrough budget


def load_plugin(name: str, target: object) -> Plugin:
    """Import one `package.module:function`; UserFacingError naming the entry when it cannot be used."""
    where = f"{ENV}[{name!r}]"
    module, draft = load_attr(target, where, kind="function")
    if not callable(draft):
        raise UserFacingError(
            f"{where}: {module.__name__!r} has no function {str(target).partition(':')[2]!r}"
        )
    budget = getattr(module, "BUDGET", None)
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
        raise UserFacingError(f"{where}: BUDGET must be a positive int, got {budget!r}")
    return Plugin(draft=draft, version=str(getattr(module, "VERSION", "0")), budget=budget)
