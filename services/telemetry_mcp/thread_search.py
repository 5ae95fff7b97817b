"""`search_thread(query)`: the thread's own human turns by full text, verbatim, for what the context folded.

Scoped to one thread by construction: the thread is never the model's argument. The agent names
the thread it is running (McpToolbox.call sets `thread`; the model is never offered it), and the query
filters on it, so a model cannot read another thread's turns. An answer is bounded: a few hits,
each the turn's own words (the part around the first matching word when the turn is long, with
the characters left out counted and the id get_evidence reads whole), and the count of all matches.
The words are redacted like everything that reaches a model (invariant 13).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from schemas import read_model
from schemas.tokens import count_tokens
from services.boundary.clip import prefix_within, suffix_within
from services.boundary.redact import redact_text

HITS = 4  # turns per answer
HIT_TOKENS = 70  # of one turn's text in an answer
_WORD = re.compile(r"[\w.:-]+")


class ThreadSearchUnavailable(RuntimeError):
    """Postgres could not be asked (down, wrong DSN, missing schema)."""


class BadSearch(ValueError):
    """A query or thread that cannot be searched (empty, too long)."""


def excerpt(text: str, query: str, tokens: int = HIT_TOKENS) -> str:
    """The turn itself if short; else its own words around the first query word found, cut ends counted."""
    if count_tokens(text) <= tokens:
        return text
    lowered = text.lower()
    found = [lowered.find(w.lower()) for w in _WORD.findall(query) if len(w) > 1]
    at = min([f for f in found if f >= 0], default=0)
    before = suffix_within(text[:at], tokens // 4)
    after = prefix_within(text[at:], tokens - count_tokens(before))
    start, end = at - len(before), at + len(after)
    lead = f"[{start:,} chars before] " if start else ""
    tail = f" [{len(text) - end:,} chars after]" if end < len(text) else ""
    return f"{lead}{text[start:end]}{tail}"


def _time(ts: str | None) -> str | None:
    try:
        return datetime.fromtimestamp(float(ts or ""), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


@dataclass(frozen=True)
class ThreadSearch:
    dsn: str
    schema: str = "public"
    connect_timeout_s: float = 10.0

    async def search(self, thread_ts: str, query: str, limit: int = HITS) -> dict[str, Any]:
        if not thread_ts.strip() or not query.strip() or len(query) > 500:
            raise BadSearch("search_thread needs a query of 1 to 500 characters and the calling thread")
        try:
            async with await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s))
            ) as conn:
                await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
                cur = await conn.execute(
                    sql.SQL(read_model.SEARCH_THREAD),
                    {"thread_ts": thread_ts, "query": query, "limit": limit},
                )
                rows = await cur.fetchall()
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ThreadSearchUnavailable(
                f"cannot search the thread (schema {self.schema}): {first}"
            ) from None
        hits = [
            {"id": rid, "user": user, "time": _time(ts), "text": excerpt(redact_text(text or ""), query)}
            for rid, user, ts, text, _ in rows
        ]
        return {"query": query, "matches": int(rows[0][4]) if rows else 0, "hits": hits}
