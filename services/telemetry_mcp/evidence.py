"""`get_evidence(id)`: the raw `content` of one agent_messages row, read verbatim (invariant 5); the
server redacts it before it leaves (invariant 13).

The judge of a round grades claims against tool rows of that same round, which
the projector holds in round_staging until the round commits (invariant 3), so a
row not yet visible is looked up there too. The row is never changed or created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from schemas import read_model

VISIBLE = sql.SQL(read_model.EVIDENCE_VISIBLE)
STAGED = sql.SQL(read_model.EVIDENCE_STAGED)
VISIBLE_IN_THREAD = sql.SQL(read_model.EVIDENCE_VISIBLE_IN_THREAD)
STAGED_IN_THREAD = sql.SQL(read_model.EVIDENCE_STAGED_IN_THREAD)


class EvidenceNotFound(LookupError):
    """No row has this id: the agent cited evidence that does not exist."""


class EvidenceUnavailable(RuntimeError):
    """Postgres could not be asked (down, wrong DSN, missing schema)."""


@dataclass(frozen=True)
class Evidence:
    id: str
    thread_ts: str
    round: int | None
    role: str
    tool_call_id: str | None
    content: Any
    committed: bool  # False: the row is staged, its round not yet committed

    def meta(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "thread_ts": self.thread_ts,
            "round": self.round,
            "role": self.role,
            "tool_call_id": self.tool_call_id,
            "committed": self.committed,
        }


class EvidenceStore:
    def __init__(self, dsn: str, schema: str = "public", connect_timeout_s: float = 10.0) -> None:
        self.dsn = dsn
        self.schema = schema
        self.connect_timeout_s = connect_timeout_s

    async def get(self, evidence_id: str, thread: str | None = None) -> Evidence:
        """The row's raw. Given a thread, only a row of that thread is answered (no cross-thread
        reads: another incident's raw never reaches this one's model); None only when unscoped."""
        if not isinstance(evidence_id, str) or not evidence_id.strip():
            raise EvidenceNotFound("evidence id must be a non-empty string")
        if thread is not None and evidence_id.split(":", 1)[0] != thread:
            raise EvidenceNotFound(f"no evidence with id {evidence_id!r} in thread {thread}")
        queries = (
            ((VISIBLE, True), (STAGED, False))
            if thread is None
            else ((VISIBLE_IN_THREAD, True), (STAGED_IN_THREAD, False))
        )
        params: tuple[str, ...] = (evidence_id,) if thread is None else (thread, evidence_id)
        try:
            async with await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            ) as conn:
                await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
                for query, committed in queries:
                    cur = await conn.execute(query, params)
                    row = await cur.fetchone()
                    if row is not None:
                        rid, thread_ts, round_, role, call_id, content = row
                        return Evidence(rid, thread_ts, round_, role, call_id, content, committed)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EvidenceUnavailable(
                f"cannot read evidence from Postgres (schema {self.schema}): {first}"
            ) from None
        raise EvidenceNotFound(
            f"no evidence with id {evidence_id!r} (not in agent_messages or round_staging)"
        )
