"""Compactors for new formats, loaded from outside this package without changing it.

`COMPACTOR_PLUGINS='{"my_format": "my_pkg.compactors:draft"}'` names, for each new compactor,
a function `draft(raw, alert_context, evidence_id) -> Draft` (see `model.py`). The module
may set `VERSION` (its own version, recorded with every compact it makes, so that changing
the plugin changes the replay key) and `BUDGET` (its default token budget; else the
passthrough budget; `COMPACTOR_BUDGETS` overrides both). Tools then map onto it with
`COMPACTOR_TOOL_MAP='{"my_tool": "my_format"}'`.

The call path treats a plugin like any compactor: it counts the plugin's digest itself,
dead-letters a digest over budget, and dead-letters an exception with its type and
message while the partition goes on. A plugin that cannot be loaded stops the worker at
start-up with one line, before it consumes anything.
"""

from __future__ import annotations

import importlib

from services.compactor.registry import DEFAULT_BUDGETS, PASSTHROUGH, json_object_setting, register_compactor
from services.runtime.errors import UserFacingError

ENV = "COMPACTOR_PLUGINS"


def load_plugins(text: str | None = None) -> dict[str, str]:
    """Register the compactors named in `text` (default: $COMPACTOR_PLUGINS); name -> version."""
    try:
        entries = json_object_setting(ENV, text)
    except ValueError as exc:
        raise UserFacingError(f'{exc} {{"name": "package.module:function"}}') from None
    return {str(name): _load_one(str(name), target) for name, target in entries.items()}


def _load_one(name: str, target: object) -> str:
    where = f"{ENV}[{name!r}]"
    module_name, sep, attr = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not (sep and module_name and attr) or ":" in attr:
        raise UserFacingError(f"{where}: expected 'package.module:function', got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserFacingError(f"{where}: cannot import {module_name!r}: {exc}") from None
    draft = getattr(module, attr, None)
    if not callable(draft):
        raise UserFacingError(f"{where}: {module_name!r} has no function {attr!r}")
    version = str(getattr(module, "VERSION", "0"))
    budget = getattr(module, "BUDGET", DEFAULT_BUDGETS[PASSTHROUGH])
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise UserFacingError(f"{where}: BUDGET must be a positive int, got {budget!r}")
    try:
        register_compactor(name, draft, budget=budget, version=version)
    except ValueError as exc:
        raise UserFacingError(f"{where}: {exc}") from None
    return version
