"""Reading what a deployment configures: a JSON-object setting, and code named `package.module:attr`.

Plumbing that several services need (the compactor's plugins, budgets and selector, the agent's
tool map), kept here once so that each setting fails the same way: a `UserFacingError` naming the
setting, in one line, at start-up.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from services.runtime.errors import UserFacingError


def json_object_setting(
    name: str, text: str | None = None, *, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON object in `text`, else in the variable `name` of `env` (default: the environment).

    Unset or blank means {}. Anything else that is not a JSON object is a UserFacingError that
    starts with `<name> is not a JSON object`.
    """
    if text is None:
        text = (os.environ if env is None else env).get(name, "")
    text = text.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserFacingError(f"{name} is not a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise UserFacingError(f"{name} is not a JSON object")
    return value


def load_attr(spec: object, where: str, *, kind: str = "function") -> tuple[ModuleType, Any]:
    """The module and the attribute that `package.module:attr` names (the module, for settings a
    plugin keeps beside it). `where` (the setting) and `kind` make the error messages.

    `attr` is one attribute: no dotted path, no second colon.
    """
    module_name, sep, attr = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not (sep and module_name and attr) or ":" in attr:
        raise UserFacingError(f"{where}: expected 'package.module:{kind}', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserFacingError(f"{where}: cannot import {module_name!r}: {exc}") from None
    if not hasattr(module, attr):
        raise UserFacingError(f"{where}: {module_name!r} has no {kind} {attr!r}")
    return module, getattr(module, attr)
