"""Recall once when an alert opens an incident: computed, recorded as an event, shown to the model.

It runs in the alert's first round, after the investigation and before the hypothesis: by then the
playbook's first tool results are staged and their facts give the thread a cause signature (an alert
alone has only labels). The result is a `RecallRecorded` event, projected as one small row beside the
alert, so a later load reads it (one query) and never recomputes it; a retried round finds the row
and reuses it. The thread's channel comes from its own events (schemas/recall_open.py): while the
poster has not yet recorded where the alert's thread is, recall waits a little; if it still is not known,
nothing is recalled and nothing recorded (visibility fails closed, invariant 14), and it is logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import psycopg

from schemas.events import MadeFor, RecalledIncident, RecallRecorded, Wake
from schemas.recall import RecallError, channel_groups
from schemas.recall_embedding import Embedder
from schemas.recall_open import OpenRecall, recall_at_open
from services.context_render.context import LoadedContext
from services.context_render.recall_view import hits_of, is_recall_row, recall_id
from services.runtime import embeddings
from services.runtime.emitter import EventEmitter
from services.runtime.errors import BadInput
from services.runtime.logs import about

log = logging.getLogger("agent.recall")

HISTORICAL: Final = 3  # past incidents recorded at most (every concurrent one is)
CHANNEL_WAIT_S: Final = 1.0  # for the poster's record of the alert's thread (it posts on the alert)


@dataclass
class RecallStep:
    conn: psycopg.Connection
    thread_ts: str
    emitter: EventEmitter
    groups: tuple[frozenset[str], ...] = ()
    recorded: list[RecalledIncident] | None = None  # already in the context: reused, never recomputed
    embed: Embedder | None = None  # the operator's embedding endpoint (RECALL_EMBEDDINGS_MODEL), if any

    async def __call__(self, made_for: MadeFor | None = None) -> list[RecalledIncident]:
        """The recall, computed and recorded once; `made_for` is the model call the agent appends it to
        (recorded, so the review page rebuilds that call with it: issue 38)."""
        if self.recorded is None:
            found = await self._compute()
            if found.channel is None:
                log.warning(
                    "recall skipped: the thread's channel is not on record", extra=about(self.thread_ts, None)
                )
                self.recorded = []
                return self.recorded
            event = RecallRecorded(
                thread_ts=self.thread_ts,
                message_id=recall_id(self.thread_ts),
                event_time=datetime.now(UTC),
                channel=found.channel,
                hits=list(found.hits),
                made_for=made_for,
            )
            await asyncio.to_thread(self.emitter.send, event)
            self.recorded = list(found.hits)
        return self.recorded

    async def _compute(self) -> OpenRecall:
        deadline = time.monotonic() + CHANNEL_WAIT_S
        while True:
            found = await asyncio.to_thread(
                recall_at_open, self.conn, self.thread_ts, k=HISTORICAL, groups=self.groups, embed=self.embed
            )
            if found.channel is not None or time.monotonic() >= deadline:
                return found
            await asyncio.sleep(0.1)


def recall_step(
    conn: psycopg.Connection, ctx: LoadedContext, emitter: EventEmitter, wake: Wake
) -> RecallStep | None:
    """The recall of an alert's first round (None for any other round: recall runs once)."""
    if wake.reason != "alert" or ctx.last_round() > 0:
        return None
    row = next((r for r in ctx.rows if is_recall_row(r.id, r.role)), None)
    recorded = None if row is None else hits_of(row.value)
    return RecallStep(conn, ctx.thread_ts, emitter, channel_groups(), recorded, embeddings.from_env())


def check_channel_groups() -> None:
    """The operator's channel mapping and embeddings setting, read at start-up: a bad value is one line and
    exit 2, never a failed round at the first alert."""
    try:
        channel_groups()
    except RecallError as exc:
        raise BadInput(str(exc)) from None
    embeddings.from_env()
