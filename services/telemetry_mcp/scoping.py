"""The server's own check of every call (invariant 13): it derives the thread's scope itself.

The caller names the thread it serves; the window and the scope come from the projection
(`schemas.read_model.thread_scope_facts`), never from the caller, so a third-party agent using
this server is bound exactly as ours is. A thread the projection does not know has no scope, and
its scoped queries are refused (fail closed); so is a call that names no thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql

from schemas import read_model
from services.boundary.scope import Checked, ScopePolicy, check_call

SCOPED_TOOLS = frozenset(
    {"query_loki", "query_prometheus", "query_tempo", "get_pod_events", "recall_incidents"}
)


class ScopeRefused(ValueError):
    """The call leaves its thread's window or scope (or its scope cannot be read)."""


class ThreadScopes:
    def __init__(self, dsn: str, schema: str, policy: ScopePolicy, timeout_s: float = 10.0) -> None:
        self.dsn = dsn
        self.schema = schema
        self.policy = policy
        self.timeout_s = timeout_s

    def _facts(self, thread: str) -> tuple[tuple[str, str] | None, object, str | None]:
        with psycopg.connect(self.dsn, connect_timeout=max(1, int(self.timeout_s))) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            return read_model.thread_scope_facts(conn, thread)

    async def check(self, thread: str | None, tool: str, args: Mapping[str, Any]) -> Checked:
        """The call's arguments, clamped; ScopeRefused when it may not run at all."""
        if not thread:
            raise ScopeRefused(f"{tool} refused: name the thread this call serves (argument `thread`)")
        try:
            window, alert, mention = await asyncio.to_thread(self._facts, thread)
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ScopeRefused(f"{tool} refused: cannot read the scope of thread {thread}: {first}") from None
        scope = self.policy.scope_for(thread, window, alert, mention)
        checked = check_call(tool, args, SCOPED_TOOLS, scope, self.policy.limits)
        if checked.refusal is not None:
            raise ScopeRefused(checked.refusal)
        return checked


def checked_meta(checked: Checked | None) -> dict[str, Any] | None:
    """What the check changed, in the result's `_meta` (the raw itself stays the back end's own)."""
    if checked is None or not checked.notes:
        return None
    return {"incident_memory/checked": {"notes": list(checked.notes), "args": checked.args}}
