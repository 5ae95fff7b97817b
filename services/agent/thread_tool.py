"""`search_thread` as the model is offered it, and as the agent calls it: always the round's own thread.

The MCP tool takes the thread as an argument (the server serves every thread); the model is never
offered that argument, and whatever it passes is replaced by the thread of the round, so a model
cannot search another thread. The call is recorded with the model's own arguments.
"""

from __future__ import annotations

import copy
from typing import Any

SEARCH_TOOL = "search_thread"
THREAD_ARG = "thread_ts"


def offered(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool specs with search_thread's thread argument removed (the agent sets it)."""
    out = []
    for spec in specs:
        if spec.get("function", {}).get("name") == SEARCH_TOOL:
            spec = copy.deepcopy(spec)
            params = spec["function"].get("parameters") or {}
            (params.get("properties") or {}).pop(THREAD_ARG, None)
            if isinstance(params.get("required"), list):
                params["required"] = [r for r in params["required"] if r != THREAD_ARG]
        out.append(spec)
    return out


def scoped(tool: str, args: dict[str, Any], thread_ts: str) -> dict[str, Any]:
    """The arguments sent to the MCP server: search_thread's thread is the round's, nothing else changes."""
    return {**args, THREAD_ARG: thread_ts} if tool == SEARCH_TOOL else args
