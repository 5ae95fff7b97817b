"""The `TOOL_SCOPE` setting: the agent checks every tool call by it and the telemetry MCP server
scopes every query by it, so both read it here, once, the same way."""

from __future__ import annotations

import os
from collections.abc import Mapping

from services.boundary.scope import ScopePolicy, policy_from_json
from services.runtime.errors import UserFacingError
from services.runtime.loading import json_object_setting

SCOPE_ENV = "TOOL_SCOPE"  # services/boundary/scope.py ScopePolicy, as one JSON object


def policy_from_env(env: Mapping[str, str] | None = None) -> ScopePolicy:
    """The `TOOL_SCOPE` policy (defaults when unset); a bad one is a one-line start-up error."""
    value = json_object_setting(SCOPE_ENV, env=os.environ if env is None else env)
    try:
        return policy_from_json(value)
    except ValueError as exc:
        raise UserFacingError(f"{SCOPE_ENV}: {exc}") from None
