"""Recall: the incidents like this one, and why, read from the projected profiles (invariant 14).

Visibility is enforced twice: the SQL reads only profiles of channels the thread may see, and
`may_see` checks every hit again before it is returned. A thread sees incidents of its own channel,
and of channels the operator maps together with it (`RECALL_CHANNEL_GROUPS`), except that an
incident of a private channel is seen in that channel only. An incident whose channel is not on
record is seen nowhere: visibility fails closed. The channel is always the thread's own, read from
its profile: no caller may name another.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import psycopg

from schemas.recall_scoring import Candidate, Hit, Rarity, rank

GROUPS_ENV: Final = "RECALL_CHANNEL_GROUPS"
CANDIDATES: Final = 400  # per source (rare patterns, reasons, labels, words), before scoring
RARE_SIGNATURES: Final = 12  # the query's rarest patterns that pick candidates


class RecallError(ValueError):
    """A recall that cannot run (unknown thread, bad setting); the message is one line."""


def channel_groups(raw: str | None = None) -> tuple[frozenset[str], ...]:
    """The operator's channel groups, e.g. `[["C0PAY", "C0CHECKOUT"]]` (none by default)."""
    text = os.environ.get(GROUPS_ENV, "") if raw is None else raw
    if not text.strip():
        return ()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise RecallError(f"{GROUPS_ENV}: not JSON ({exc})") from None
    if not isinstance(value, list) or not all(
        isinstance(g, list) and all(isinstance(c, str) and c for c in g) for g in value
    ):
        raise RecallError(f"{GROUPS_ENV}: expected a list of lists of channel ids")
    return tuple(frozenset(g) for g in value)


def visible_channels(own: str | None, groups: Iterable[frozenset[str]]) -> list[str]:
    if own is None:
        return []
    seen = {own}
    for group in groups:
        if own in group:
            seen |= group
    return sorted(seen)


def may_see(
    own: str | None, other_channel: str | None, other_private: bool, groups: Iterable[frozenset[str]]
) -> bool:
    """Whether a thread in channel `own` may be shown an incident of `other_channel`."""
    if own is None or other_channel is None:
        return False
    if other_channel == own:
        return True
    return not other_private and other_channel in visible_channels(own, groups)


_COLUMNS = """thread_ts, alertname, service, namespace, cluster, severity, channel, private,
    extract(epoch FROM opened_at)::float8, extract(epoch FROM resolved_at)::float8, patterns, error_patterns,
    reasons, shapes, tsvector_to_array(discussion_tsv), decisions, claims"""

_ONE = f"SELECT {_COLUMNS} FROM incident_profiles WHERE thread_ts = %s"

# Candidates: sharing a rare pattern, a pod reason, the alert and service, or the discussion's words;
# each source bounded, all confined to the channels the thread may see.
_CANDIDATES = f"""
WITH seen AS (
    SELECT * FROM incident_profiles
    WHERE channel = ANY(%(channels)s::text[]) AND (NOT private OR channel = %(own)s) AND thread_ts <> %(thread)s
), picked AS (
    (SELECT thread_ts FROM seen WHERE signatures && %(rare)s::text[] LIMIT {CANDIDATES})
    UNION (SELECT thread_ts FROM seen WHERE reason_keys && %(reasons)s::text[] LIMIT {CANDIDATES})
    UNION (SELECT thread_ts FROM seen WHERE alertname = %(alertname)s AND service = %(service)s
           ORDER BY opened_at DESC LIMIT {CANDIDATES})
    UNION (SELECT thread_ts FROM seen WHERE discussion_tsv @@ to_tsquery('english', %(words)s)
           ORDER BY ts_rank_cd(discussion_tsv, to_tsquery('english', %(words)s)) DESC LIMIT {CANDIDATES})
)
SELECT {_COLUMNS} FROM incident_profiles WHERE thread_ts IN (SELECT thread_ts FROM picked)
"""

_DF = """
SELECT s, (SELECT count(*) FROM incident_profiles p WHERE p.signatures @> ARRAY[s])
FROM unnest(%s::text[]) AS s
"""
_REASON_DF = """
SELECT s, (SELECT count(*) FROM incident_profiles p WHERE p.reason_keys @> ARRAY[s])
FROM unnest(%s::text[]) AS s
"""
_TOTAL = "SELECT count(*) FROM incident_profiles"


def candidate_of(row: Sequence[Any]) -> Candidate:
    (thread, alertname, service, namespace, cluster, severity, channel, private, opened, resolved,
     patterns, errors, reasons, shapes, lexemes, decisions, claims) = row  # fmt: skip
    return Candidate(
        thread_ts=thread,
        labels={
            "alertname": alertname,
            "service": service,
            "namespace": namespace,
            "cluster": cluster,
            "severity": severity,
        },
        channel=channel,
        private=bool(private),
        opened_at=opened,
        resolved_at=resolved,
        patterns=dict(patterns or {}),
        error_patterns=frozenset(errors or ()),
        reasons=dict(reasons or {}),
        shapes=frozenset(shapes or ()),
        lexemes=frozenset(lexemes or ()),
        decisions=tuple(decisions or ()),
        claims=tuple(claims or ()),
    )


def load_profile(conn: psycopg.Connection, thread: str) -> Candidate:
    row = conn.execute(_ONE, (thread,)).fetchone()
    if row is None:
        raise RecallError(f"no incident profile for thread {thread!r}")
    return candidate_of(row)


def _rarity(conn: psycopg.Connection, q: Candidate) -> Rarity:
    total = int(conn.execute(_TOTAL).fetchone()[0])  # type: ignore[index]
    df = {s: int(n) for s, n in conn.execute(_DF, (sorted(q.patterns),)).fetchall()}
    df |= {f"reason:{s}": int(n) for s, n in conn.execute(_REASON_DF, (sorted(q.reasons),)).fetchall()}
    return Rarity(total, df)


def _words(q: Candidate) -> str:
    """An OR query of the discussion's lexemes (quoted, so no lexeme is read as an operator)."""
    words = sorted(w for w in q.lexemes if w.isalnum())[:64]
    return " | ".join(f"'{w}'" for w in words) or "''"


def recall(
    conn: psycopg.Connection,
    thread: str,
    *,
    k: int = 5,
    groups: Sequence[frozenset[str]] = (),
    now: datetime | None = None,
) -> list[Hit]:
    """Concurrent and historical incidents like `thread`, each with its reasons, visible to its channel."""
    q = load_profile(conn, thread)
    channels = visible_channels(q.channel, groups)
    if not channels:
        return []
    rarity = _rarity(conn, q)
    rare = sorted(q.patterns, key=lambda s: (-rarity.idf(s), s))[:RARE_SIGNATURES]
    params: Mapping[str, Any] = {
        "channels": channels, "own": q.channel, "thread": thread, "rare": rare, "reasons": sorted(q.reasons),
        "alertname": q.labels.get("alertname"), "service": q.labels.get("service"), "words": _words(q),
    }  # fmt: skip
    found = [candidate_of(r) for r in conn.execute(_CANDIDATES, params).fetchall()]
    allowed = [c for c in found if may_see(q.channel, c.channel, c.private, groups)]
    if now is not None and q.opened_at is None:
        q = Candidate(**{**q.__dict__, "opened_at": now.timestamp()})
    return rank(q, sorted(allowed, key=lambda c: c.thread_ts), rarity, k=k)


def hits_json(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    return [
        {"thread": h.thread_ts, "kind": h.kind, "score": h.score, "reasons": list(h.reasons)} for h in hits
    ]
