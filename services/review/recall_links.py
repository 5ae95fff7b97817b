"""Recall links on the review page (issue 37's hits), shown only where the viewer may see them.

Two rules, each failing closed. The thread's own channel decides what recall may show it (invariant 14,
schemas/recall.py: `recall` reads only what that channel may see, and `may_see`, checked here again
against the hit's profile as it is now, hides a private incident from any other channel). And the
page's channel allow-list (per deployment) hides a hit of a channel outside it, as it hides that thread.
The thread page recalls live, as `incident-memory recall` does; the incidents list shows what each
incident's recall recorded when its alert opened (one read for the whole list), each hit checked again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, Final

import psycopg

from schemas.recall import RecallError, channel_groups, load_profile, may_see, recall
from schemas.recall_open import links
from services.context_render.recall_view import hits_of, recall_id
from services.review import queries

log = logging.getLogger("review.recall")
K: Final = 5  # hits on the thread page, as `incident-memory recall` shows by default

Seen = dict[str, tuple[str | None, bool]]  # thread -> (its channel, private) from its profile now


def _groups() -> tuple[frozenset[str], ...] | None:
    """The operator's channel groups (RECALL_CHANNEL_GROUPS); None, so nothing is shown, when unreadable."""
    try:
        return channel_groups()
    except RecallError as exc:
        log.warning("recall links hidden: %s", exc)
        return None


def visible(own: str | None, other: tuple[str | None, bool] | None, groups: Iterable[frozenset[str]],
            channels: frozenset[str] | None) -> bool:  # fmt: skip
    """May a thread of channel `own`, shown on this page, show a link to `other` (its channel, private)?"""
    if other is None:
        return False
    channel, private = other
    allowed = channels is None or (channel is not None and channel in channels)
    return allowed and may_see(own, channel, private, groups)


def _link(thread: str, kind: str, score: float, reasons: Sequence[str], slack: str | None) -> dict[str, Any]:
    return {
        "thread": thread,
        "kind": kind,
        "score": round(score, 3),
        "reasons": list(reasons),
        "slack_url": slack,
    }


def thread_recall(
    conn: psycopg.Connection, thread_ts: str, channels: frozenset[str] | None
) -> list[dict[str, Any]]:
    """The thread's similar and concurrent incidents now, that its channel and this page may show."""
    groups = _groups()
    if groups is None:
        return []
    try:
        query = load_profile(conn, thread_ts)
    except RecallError:
        return []  # no profile yet: nothing to match, nothing shown
    hits = recall(conn, query, k=K, groups=groups)
    seen = profiles(conn, [h.thread_ts for h in hits])
    shown = [h for h in hits if visible(query.channel, seen.get(h.thread_ts), groups, channels)]
    slack = links(conn, [h.thread_ts for h in shown])
    return [_link(h.thread_ts, h.kind, h.score, h.reasons, slack.get(h.thread_ts)) for h in shown]


def listed_recall(
    conn: psycopg.Connection, threads: Sequence[str], channels: frozenset[str] | None
) -> dict[str, list[dict[str, Any]]]:
    """Each listed incident's recorded recall (its recall row), the hits it and this page may show now."""
    groups = _groups()
    if groups is None or not threads:
        return {}
    recorded = {
        thread: hits_of(content)
        for thread, content in conn.execute(
            queries.RECALL_ROWS, ([recall_id(t) for t in threads],)
        ).fetchall()
    }
    seen = profiles(conn, [*threads, *(h.thread for hits in recorded.values() for h in hits)])
    shown = {
        thread: [
            h
            for h in hits
            if visible(seen.get(thread, (None, True))[0], seen.get(h.thread), groups, channels)
        ]
        for thread, hits in recorded.items()
    }
    slack = links(conn, sorted({h.thread for hits in shown.values() for h in hits}))
    return {
        thread: [_link(h.thread, h.kind, h.score_milli / 1000, h.reasons, slack.get(h.thread)) for h in hits]
        for thread, hits in shown.items()
    }


def profiles(conn: psycopg.Connection, threads: Sequence[str]) -> Seen:
    """Each thread's channel and privacy as its profile says now (a thread without one is absent)."""
    if not threads:
        return {}
    rows = conn.execute(queries.PROFILE_CHANNELS, (sorted(set(threads)),)).fetchall()
    return {thread: (channel, bool(private)) for thread, channel, private in rows}
