"""The optional embedding signal of recall: the discussions' vectors, when the operator configured an endpoint.

Recall needs none (the default reads no discussion and calls nothing). Where an embedding endpoint is
configured, the service passes an `Embedder` in (schemas do no I/O of their own beyond the connection they
are given); recall then reads the discussions of the query and of its visible candidates only (already
confined to what the thread's channel may see: this never widens that), asks for their vectors in one batch,
and each candidate whose discussion has a vector as well as the query's gets one more part, "embedding"
(`schemas/recall_vectors.py`), labelled with the model in its reason. Anything the embedder raises leaves
recall as it would be without it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import psycopg

from schemas.recall_scoring import Candidate
from schemas.recall_vectors import Embedding

log = logging.getLogger("recall.embeddings")

# Only the query's and the visible candidates' threads are named; an empty discussion has nothing to embed.
_DISCUSSIONS = "SELECT thread_ts, discussion FROM incident_profiles WHERE thread_ts = ANY(%s::text[]) AND discussion <> ''"


class Embedder(Protocol):
    """An embedding endpoint as recall sees it: texts in, one vector each, in order; `model` names it in the
    reasons. It may raise: recall is then scored without the signal."""

    @property
    def model(self) -> str: ...

    def __call__(self, texts: list[str]) -> list[list[float]]: ...


def embedded(
    conn: psycopg.Connection, q: Candidate, candidates: Sequence[Candidate], embed: Embedder
) -> tuple[Candidate, list[Candidate]]:
    """The query and the candidates with their discussions' vectors, from ONE call of `embed`; unchanged when
    the query has no discussion (nothing to compare: no call) or the embedder fails (logged)."""
    threads = list(dict.fromkeys([q.thread_ts, *(c.thread_ts for c in candidates)]))
    texts: dict[str, str] = dict(conn.execute(_DISCUSSIONS, (threads,)).fetchall())
    if q.thread_ts not in texts:
        return q, list(candidates)
    order = [t for t in threads if t in texts]
    try:
        vectors = embed([texts[t] for t in order])
    except Exception as exc:  # whatever the endpoint does, a recall goes on without the signal
        log.warning("recall scored without embeddings: %s", str(exc)[:200])
        return q, list(candidates)
    if len(vectors) != len(order):
        log.warning("recall scored without embeddings: %d vectors for %d texts", len(vectors), len(order))
        return q, list(candidates)
    found = {
        t: Embedding(embed.model, tuple(float(x) for x in v)) for t, v in zip(order, vectors, strict=True)
    }
    return (
        replace(q, embedding=found[q.thread_ts]),
        [replace(c, embedding=found.get(c.thread_ts)) for c in candidates],
    )
