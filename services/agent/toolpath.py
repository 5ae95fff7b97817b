"""The tool path: tool-digest cache first, then a real MCP call whose raw is emitted and compacted.

On a hit (same thread, tool, canonical args) nothing is queried or compacted again.
On a miss the raw goes out as a ToolResult; the model loop continues only once the
compactor's digest has been projected (read-your-writes), so the model never sees a raw.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from schemas.events import ToolResult
from schemas.ids import canonical_args_hash
from schemas.tools import tool_error_raw
from services.agent import metrics
from services.agent.config import AgentConfig
from services.agent.guard import ToolGuard
from services.agent.mcp_client import McpToolbox, ToolCallError
from services.runtime.emitter import EventEmitter
from services.runtime.logs import about

log = logging.getLogger("agent.tools")

CACHE_QUERY = (
    "SELECT message_id, compact FROM tool_digest_cache WHERE thread_ts = %s AND tool = %s AND args_hash = %s"
)
DIGEST_BY_ID = "SELECT compact FROM tool_digest_cache WHERE thread_ts = %s AND message_id = %s"


class ProjectionTimeout(RuntimeError):
    """A written event did not show up in the projection in time; the round is retried."""


@dataclass(frozen=True)
class CachedDigest:
    """The digest an identical earlier call of the thread recorded, under that call's message id."""

    message_id: str
    compact: Any


@dataclass(frozen=True)
class ToolOutcome:
    message_id: str
    compact: Any
    cache_hit: bool
    note: str = ""  # what the boundary check clamped, said beside the result


@dataclass(eq=False)
class ToolPath:
    """One thread's way from a tool call to its digest: check, cache, call, record."""

    config: AgentConfig
    conn: psycopg.Connection
    toolbox: McpToolbox
    emitter: EventEmitter
    alert_context: dict[str, Any]
    guard: ToolGuard

    async def lookup(self, thread_ts: str, tool: str, args: dict[str, Any]) -> CachedDigest | None:
        key = (thread_ts, self.config.compactor_for(tool), canonical_args_hash(args))
        record = await asyncio.to_thread(lambda: self.conn.execute(CACHE_QUERY, key).fetchone())
        return None if record is None else CachedDigest(record[0], record[1])

    async def run(
        self, thread_ts: str, round_: int, message_id: str, call_id: str, tool: str, args: dict[str, Any]
    ) -> ToolOutcome:
        """The digest answering one call; a cache hit under this very id is a retried round.

        The call is checked first (services/boundary/scope.py): a refused call never reaches MCP, and
        its refusal is recorded as the tool's error, so the model reads why and the round goes on.
        """
        checked = self.guard.check(tool, args)
        if checked.refusal is not None:
            metrics.TOOL_REFUSALS.labels(metrics.tool_label(tool)).inc()
            log.warning("tool call refused", extra=about(thread_ts, message_id, reason=checked.refusal))
            raw = tool_error_raw(tool, checked.refusal)
            return await self.record(thread_ts, round_, message_id, call_id, tool, args, raw, "")
        args = checked.args
        cached = await self.lookup(thread_ts, tool, args)
        if cached is not None:
            metrics.CACHE_HITS.labels(metrics.tool_label(tool)).inc()
            log.info(
                "tool cache hit", extra=about(thread_ts, message_id, tool=tool, cached=cached.message_id)
            )
            return ToolOutcome(cached.message_id, cached.compact, True, checked.note_text())
        try:
            raw = await self.toolbox.call(tool, args, thread=thread_ts)
        except ToolCallError as exc:
            raw = tool_error_raw(tool, str(exc))  # the tool's own answer, recorded as it came back
        metrics.TOOL_CALLS.labels(metrics.tool_label(tool)).inc()
        return await self.record(thread_ts, round_, message_id, call_id, tool, args, raw, checked.note_text())

    async def record(
        self,
        thread_ts: str,
        round_: int,
        message_id: str,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        raw: Any,
        note: str,
    ) -> ToolOutcome:
        """Emit the raw as a ToolResult and wait for its digest (read-your-writes)."""
        event = ToolResult(
            thread_ts=thread_ts,
            message_id=message_id,
            event_time=datetime.now(UTC),
            round=round_,
            tool_call_id=call_id,
            tool=self.config.compactor_for(tool),
            args=args,
            raw=raw,
            alert_context={**self.alert_context, "evidence_id": message_id},
        )
        await asyncio.to_thread(self.emitter.send, event)
        log.info("tool called", extra=about(thread_ts, message_id, tool=tool))
        compact = await self.wait_for_digest(thread_ts, message_id)
        return ToolOutcome(message_id, compact, False, note)

    async def wait_for_digest(self, thread_ts: str, message_id: str) -> Any:
        from schemas.read_model import wait_until_projected

        ok = await asyncio.to_thread(
            wait_until_projected,
            self.config.database_url,
            thread_ts,
            message_id,
            self.config.projection_timeout,
            self.config.schema,
        )
        record = await asyncio.to_thread(
            lambda: self.conn.execute(DIGEST_BY_ID, (thread_ts, message_id)).fetchone()
        )
        if not ok or record is None:
            raise ProjectionTimeout(
                f"digest of {message_id} not projected within {self.config.projection_timeout}s"
            )
        return record[0]
