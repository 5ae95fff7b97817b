"""Reading what a deployment configures: a JSON object (a setting, a file), and code named `package.module:attr`.

Plumbing that several services need (the compactor's plugins, budgets and selector, the agent's
tool map), kept here once so that each setting fails the same way: a `UserFacingError` naming the
setting, in one line, at start-up.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
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
    return json_object(text, lambda why: UserFacingError(f"{name} is not a JSON object: {why}"))


def json_object(text: str, fail: Callable[[str], Exception]) -> dict[str, Any]:
    """The JSON object `text` holds, else `fail(why)` raised: one rule for every JSON object read from a
    setting, a file or a back end's answer, each caller saying whose it is and which error it raises.
    (An HTTP edge's body is stricter: `schemas.strict_json`.)"""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(str(exc)) from None
    if not isinstance(value, dict):
        raise fail(f"got {type(value).__name__}")
    return value


def json_object_file(path: str | None) -> dict[str, Any]:
    """The JSON object of a config file ({} without a path), or a one-line UserFacingError."""
    if not path:
        return {}
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserFacingError(f"cannot read config file {path!r}: {exc.strerror or exc}") from None
    return json_object(text, lambda why: UserFacingError(f"config file {path!r} is not a JSON object: {why}"))


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
