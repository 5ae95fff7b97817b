"""`recall_incidents(query)`: incidents like this thread's, with why, read from the projected profiles.

Scoped by construction, like search_thread: the thread is the agent's (McpToolbox.call sets it; the model
is never offered it) and visibility is decided by that thread's own channel, read from its profile
(schemas/recall.py): no argument can name another channel. The query only orders the visible hits
(those whose discussion matches it first); it never widens them. What leaves is redacted, and reaches
the model framed as a tool result (invariant 13). With the operator's embedding endpoint
(`RECALL_EMBEDDINGS_MODEL`, services/runtime/embeddings.py) the hits are scored as the command and the
recall at open score them: one more labelled part, left out when the endpoint fails.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg import sql

from schemas.recall import RecallError, channel_groups, recall
from schemas.recall_embedding import Embedder
from schemas.recall_open import links
from services.boundary.redact import redact_value

HITS: Final = 5
CANDIDATES: Final = 20
MAX_QUERY: Final = 300
_MATCHING: Final = (
    "SELECT thread_ts FROM incident_profiles "
    "WHERE thread_ts = ANY(%s::text[]) AND discussion_tsv @@ websearch_to_tsquery('english', %s)"
)


class RecallUnavailable(RuntimeError):
    """Postgres could not be asked, or the thread has no profile yet; the message is one line."""


class BadRecall(ValueError):
    """A query that cannot be used (empty or too long) or no calling thread."""


@dataclass(frozen=True)
class IncidentRecall:
    dsn: str
    schema: str = "public"
    connect_timeout_s: float = 10.0
    embed: Embedder | None = None  # the operator's embedding endpoint, if any (embeddings.from_env)

    async def recall(self, thread_ts: str, query: str) -> dict[str, Any]:
        if not thread_ts.strip() or not query.strip() or len(query) > MAX_QUERY:
            raise BadRecall(
                f"recall_incidents needs a query of 1 to {MAX_QUERY} characters and the calling thread"
            )
        return await asyncio.to_thread(self._recall, thread_ts, query)

    def _recall(self, thread_ts: str, query: str) -> dict[str, Any]:
        try:
            with psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            ) as conn:
                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
                hits = recall(conn, thread_ts, k=CANDIDATES, groups=channel_groups(), embed=self.embed)
                threads = [h.thread_ts for h in hits]
                matching = (
                    {r[0] for r in conn.execute(_MATCHING, (threads, query)).fetchall()} if threads else set()
                )
                found = links(conn, threads)
        except RecallError as exc:
            raise RecallUnavailable(f"recall_incidents: {exc}") from None
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RecallUnavailable(f"cannot recall (schema {self.schema}): {first}") from None
        ordered = sorted(hits, key=lambda h: (h.kind != "concurrent", h.thread_ts not in matching))[:HITS]
        answer = {
            "query": query,
            "hits": [
                {
                    "thread": h.thread_ts,
                    "kind": h.kind,
                    "score": round(h.score, 3),
                    "matches_query": h.thread_ts in matching,
                    "reasons": list(h.reasons),
                    **({"link": found[h.thread_ts]} if h.thread_ts in found else {}),
                }
                for h in ordered
            ],
        }
        return dict(redact_value(answer))
