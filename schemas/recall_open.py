"""Recall as the agent runs it: the thread's query profile from its own facts, the hits with their links.

A read model below the services, so the agent recalls without importing the projector (invariant 14's
path for the agent). The query profile is rebuilt from ALL of the thread's own facts, those of the
round in flight included: when an alert opens an incident its profile holds only labels until round 1
commits, and the playbook's first tool results are what give it a cause signature (patterns, pod
reasons) to find a concurrent incident by. Only the thread's own facts are read that way; every other
incident is read from the visible profiles, through `schemas.recall.recall`, confined to what the
thread's channel may see. The channel is the thread's own, from its events: no caller names one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import psycopg

from schemas.events import RecalledIncident
from schemas.ids import split_thread_key
from schemas.incident_profile import Fact, Profile, build_profile
from schemas.recall import recall
from schemas.recall_embedding import Embedder
from schemas.recall_scoring import Candidate, Hit

MAX_REASONS: Final = 2  # per hit, most telling first: the row stays small (docs/recall.md)
REASON_CHARS: Final = 80  # a reason quoting a long log pattern is cut (the profile keeps it whole)

_OWN_FACTS: Final = "SELECT source_id, kind, at, facts FROM incident_profile_facts WHERE thread_ts = %s"
_LEXEMES: Final = "SELECT tsvector_to_array(to_tsvector('english', %s))"
_ROOTS: Final = """
SELECT DISTINCT ON (thread_ts) thread_ts, channel, slack_ts FROM slack_posts
WHERE thread_ts = ANY(%s::text[]) AND root AND phase <> 'intent' ORDER BY thread_ts, phase
"""
_CHANNEL: Final = re.compile(r"^[CGD][A-Z0-9]{2,20}$")
_SLACK_TS: Final = re.compile(r"^\d{9,11}\.\d{6}$")


@dataclass(frozen=True)
class OpenRecall:
    """The thread's own channel (None: not on record yet) and what it may be shown."""

    channel: str | None
    hits: tuple[RecalledIncident, ...]


def slack_link(channel: str | None, slack_ts: str | None) -> str | None:
    """Slack's permalink form of a thread root; None unless both parts have Slack's own shape, so a stored
    value can never become a foreign or `javascript:` link."""
    if not channel or not slack_ts or not _CHANNEL.match(channel) or not _SLACK_TS.match(slack_ts):
        return None
    return f"https://slack.com/archives/{channel}/p{slack_ts.replace('.', '')}"


def own_profile(conn: psycopg.Connection, thread: str) -> Profile:
    """The thread's profile from every fact of its own, the round in flight's included."""
    facts = [
        Fact(source_id, kind, at.astimezone(UTC).isoformat(), body)
        for source_id, kind, at, body in conn.execute(_OWN_FACTS, (thread,)).fetchall()
    ]
    return build_profile(thread, facts)


def query_of(conn: psycopg.Connection, profile: Profile) -> Candidate:
    row = conn.execute(_LEXEMES, (profile.discussion,)).fetchone()
    return Candidate(
        thread_ts=profile.thread_ts,
        labels={"alertname": profile.alertname, **profile.labels},
        channel=profile.channel,
        private=profile.private,
        opened_at=_epoch(profile.opened_at),
        resolved_at=_epoch(profile.resolved_at),
        patterns=dict(profile.patterns),
        error_patterns=frozenset(profile.error_patterns),
        reasons=dict(profile.reasons),
        shapes=frozenset(profile.shapes),
        lexemes=frozenset(row[0] if row and row[0] else ()),
        decisions=profile.decisions,
        claims=profile.claims,
        nodes=frozenset(profile.nodes),
        hosts=frozenset(profile.hosts),
        dependencies=frozenset(profile.dependencies),
    )


def _epoch(iso: str | None) -> float | None:
    return None if iso is None else datetime.fromisoformat(iso).timestamp()


def links(conn: psycopg.Connection, threads: Sequence[str]) -> dict[str, str]:
    """Each thread's Slack link: its key names channel and root (a human-opened thread), or the root the
    bot posted for its alert."""
    out: dict[str, str] = {}
    for thread in threads:
        channel, ts = split_thread_key(thread)
        found = slack_link(channel, ts)
        if found:
            out[thread] = found
    rest = [t for t in threads if t not in out]
    if rest:
        for thread, channel, slack_ts in conn.execute(_ROOTS, (rest,)).fetchall():
            found = slack_link(channel, slack_ts)
            if found:
                out[thread] = found
    return out


def recall_at_open(
    conn: psycopg.Connection,
    thread: str,
    *,
    k: int,
    groups: Sequence[frozenset[str]],
    embed: Embedder | None = None,
) -> OpenRecall:
    """What the thread may be shown of other incidents now, each hit with its reasons and link (`embed`: the
    operator's embedding endpoint, when one is configured)."""
    q = query_of(conn, own_profile(conn, thread))
    if q.channel is None:
        return OpenRecall(None, ())  # visibility unknown: nothing is recalled (fails closed)
    hits = recall(conn, q, k=k, groups=groups, embed=embed)
    return OpenRecall(q.channel, recorded_hits(hits, links(conn, [h.thread_ts for h in hits])))


def _clip(reason: str) -> str:
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"


def recorded_hits(hits: Sequence[Hit], found: dict[str, str]) -> tuple[RecalledIncident, ...]:
    return tuple(
        RecalledIncident(
            thread=h.thread_ts,
            kind="concurrent" if h.kind == "concurrent" else "historical",
            score_milli=max(0, round(h.score * 1000)),
            reasons=[_clip(r) for r in h.reasons[:MAX_REASONS]],
            link=found.get(h.thread_ts),
        )
        for h in hits
    )
