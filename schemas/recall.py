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
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

import psycopg

from schemas.recall_budget import key_limits
from schemas.recall_embedding import Embedder, embedded
from schemas.recall_keys import label_key, reason_key
from schemas.recall_scoring import (
    Candidate,
    Hit,
    Rarity,
    explained,
    overlaps,
    pick,
    signature_weight,
    weighed_keys,
)

GROUPS_ENV: Final = "RECALL_CHANNEL_GROUPS"
CHANNEL_ID: Final = re.compile(r"[CGD][A-Z0-9]{2,20}")  # Slack's ids; a name (#payments) is a mistake
CANDIDATES: Final = 50  # by shared signatures; half as many by alert and service; as many by time
OPEN_AT_MOST: Final = "7 days"  # an incident opened longer ago than this is not looked at as concurrent
WINDOW_S: Final = 3600.0  # concurrent: open within the hour of the query's opening (`recall_scoring.pick`)
PICKING_KEYS: Final = 12  # the query's rarest patterns (and as many pod reasons) that pick candidates


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
    for channel in (c for g in value for c in g):
        if not CHANNEL_ID.fullmatch(channel):
            raise RecallError(f"{GROUPS_ENV}: {channel!r} is not a Slack channel id (like C0123ABCD)")
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


# The ten columns both reads start with (`_identity`).
_IDENTITY_COLUMNS = """thread_ts, alertname, service, namespace, cluster, severity, channel, private,
    extract(epoch FROM opened_at)::float8, extract(epoch FROM resolved_at)::float8"""
_COLUMNS = f"""{_IDENTITY_COLUMNS}, patterns, error_patterns,
    reasons, shapes, tsvector_to_array(discussion_tsv), decisions, claims, nodes, dependencies, pod_hosts"""

_ONE = f"SELECT {_COLUMNS} FROM incident_profiles WHERE thread_ts = %s"
# The profile and the counts of its keys (`_rarity`'s keys) in one round trip.
_ONE_COUNTED = f"""
SELECT {_COLUMNS}, (SELECT coalesce(jsonb_object_agg(s.key, s.n), '{{}}') FROM incident_signature_counts s
    WHERE s.key = ANY(signatures || ARRAY(SELECT 'reason:' || unnest(reason_keys)) || '#incidents'::text))
FROM incident_profiles WHERE thread_ts = %s
"""

# What scoring reads of a candidate, and no more: signature names without their counts, and of the
# discussion only how many of the query's lexemes it holds and how many it has (the words stay in
# Postgres; `ts_delete` drops the query's lexemes by binary search instead of unnesting every word).
_SHORT_COLUMNS = f"""{_IDENTITY_COLUMNS}, signatures, error_patterns,
    reason_keys, shapes,
    length(discussion_tsv) - length(ts_delete(discussion_tsv, %(lexemes)s::text[])),
    length(discussion_tsv), nodes, dependencies, pod_hosts"""

# For an incident open around the query's opening (by time), the counts of its own error patterns and reasons:
# whether it shares the query's cause weighs both sides' keys (`_open_counted`), read here, not in a round trip
# of its own.
_OPEN_COUNTS = """CASE WHEN thread_ts IN (SELECT thread_ts FROM by_time) THEN (
    SELECT jsonb_object_agg(s.key, s.n) FROM incident_signature_counts s
    WHERE s.key = ANY(error_patterns || ARRAY(SELECT 'reason:' || unnest(reason_keys)))) END"""

# Candidates, each source bounded and confined to the channels the thread may see, read from recall's
# inverted index (migration 009) so no source sorts every incident holding a common key:
# - by signature: the newest incidents holding each of the query's rarest patterns and reasons, as many per
#   key as `schemas.recall_budget.key_limits` allows (rarest first, within one budget of rows), ranked by
#   the summed rarity of what they share, the best CANDIDATES kept;
# - by label: the newest incidents of the same alert on the same service;
# - by time: incidents open around the time the query opened (concurrent recall is by time first).
_VISIBLE_KEY = (
    "r.channel = c.channel AND (NOT r.private OR r.channel = %(own)s) AND r.thread_ts <> %(thread)s"
)
_CANDIDATES = f"""
WITH c(channel) AS (SELECT unnest(%(channels)s::text[])),
q(key, w, lim) AS (SELECT * FROM unnest(%(keys)s::text[], %(weights)s::float8[], %(limits)s::int[])),
by_signature AS (
    SELECT k.thread_ts FROM q CROSS JOIN c CROSS JOIN LATERAL (
        SELECT r.thread_ts FROM incident_recall_keys r WHERE r.key = q.key AND {_VISIBLE_KEY}
        ORDER BY r.opened_at DESC LIMIT q.lim) k
    GROUP BY k.thread_ts ORDER BY sum(q.w) DESC, k.thread_ts LIMIT {CANDIDATES}
),
by_label AS (
    SELECT k.thread_ts FROM c CROSS JOIN LATERAL (
        SELECT r.thread_ts FROM incident_recall_keys r WHERE r.key = %(label)s AND {_VISIBLE_KEY}
        ORDER BY r.opened_at DESC LIMIT {CANDIDATES // 2}) k
),
by_time AS (
    SELECT thread_ts FROM incident_profiles
    WHERE channel = ANY(%(channels)s::text[]) AND (NOT private OR channel = %(own)s) AND thread_ts <> %(thread)s
      AND opened_at BETWEEN to_timestamp(%(opened)s) - interval '1 hour' - %(longest)s::interval
                        AND to_timestamp(%(opened)s) + interval '1 hour'
      AND (resolved_at IS NULL OR resolved_at >= to_timestamp(%(opened)s) - interval '1 hour')
    ORDER BY opened_at DESC LIMIT {CANDIDATES}
)
SELECT {_SHORT_COLUMNS}, {_OPEN_COUNTS} FROM incident_profiles WHERE thread_ts IN (
    SELECT thread_ts FROM by_signature UNION SELECT thread_ts FROM by_label UNION SELECT thread_ts FROM by_time
)
"""

# What `explain` quotes of a hit, and no more: the counts of the query's error patterns it holds, its pod
# reasons with their counts, and its last decision (never every pattern's count, the claims or the words).
# A second round trip for the few hits costs less than reading this with every candidate (tried: BENCHMARKS.md,
# "Recall across incidents", query speed).
_EXPLAINED = """
SELECT thread_ts,
    (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(patterns) e WHERE e.key = ANY(%(errors)s::text[])),
    reasons, decisions[cardinality(decisions)]
FROM incident_profiles WHERE thread_ts = ANY(%(threads)s::text[])
"""

_COUNTS = "SELECT key, n FROM incident_signature_counts WHERE key = ANY(%s::text[])"


def _identity(row: Sequence[Any]) -> dict[str, Any]:
    """The first ten columns, common to `_COLUMNS` and `_SHORT_COLUMNS`: who the incident is, where, when."""
    thread, alertname, service, namespace, cluster, severity, channel, private, opened, resolved = row[:10]
    labels = {
        "alertname": alertname, "service": service, "namespace": namespace, "cluster": cluster,
        "severity": severity,
    }  # fmt: skip
    return {
        "thread_ts": thread, "labels": labels, "channel": channel, "private": bool(private),
        "opened_at": opened, "resolved_at": resolved,
    }  # fmt: skip


def candidate_of(row: Sequence[Any]) -> Candidate:
    patterns, errors, reasons, shapes, lexemes, decisions, claims, nodes, dependencies, hosts = row[10:]
    return Candidate(
        **_identity(row),
        patterns=dict(patterns or {}),
        error_patterns=frozenset(errors or ()),
        reasons=dict(reasons or {}),
        shapes=frozenset(shapes or ()),
        lexemes=frozenset(lexemes or ()),
        decisions=tuple(decisions or ()),
        claims=tuple(claims or ()),
        nodes=frozenset(nodes or ()),
        dependencies=frozenset(dependencies or ()),
        hosts=frozenset(hosts or ()),
    )


def short_candidate_of(row: Sequence[Any]) -> Candidate:
    """A candidate as scoring reads it (`_SHORT_COLUMNS`): signatures and reasons without their counts."""
    signatures, errors, reasons, shapes, shared_words, words, nodes, dependencies, hosts = row[10:19]
    return Candidate(
        **_identity(row),
        patterns=dict.fromkeys(signatures or (), 0),
        error_patterns=frozenset(errors or ()),
        reasons=dict.fromkeys(reasons or (), 0),
        shapes=frozenset(shapes or ()),
        lexemes=frozenset(),
        text_overlap=(int(shared_words), int(words)),
        nodes=frozenset(nodes or ()),
        dependencies=frozenset(dependencies or ()),
        hosts=frozenset(hosts or ()),
    )


def load_profile(conn: psycopg.Connection, thread: str) -> Candidate:
    row = conn.execute(_ONE, (thread,)).fetchone()
    if row is None:
        raise RecallError(f"no incident profile for thread {thread!r}")
    return candidate_of(row)


def _counted_profile(conn: psycopg.Connection, thread: str) -> tuple[Candidate, Rarity]:
    """`load_profile` and `_rarity` of it, read together."""
    row = conn.execute(_ONE_COUNTED, (thread,)).fetchone()
    if row is None:
        raise RecallError(f"no incident profile for thread {thread!r}")
    counts = {k: int(n) for k, n in row[-1].items()}
    return candidate_of(row[:-1]), Rarity(counts.pop("#incidents", 1), counts)


def _rarity(conn: psycopg.Connection, q: Candidate) -> Rarity:
    """IDF from the counts the projector keeps (never a count over all profiles at query time)."""
    keys = [*q.patterns, *(f"reason:{r}" for r in q.reasons), "#incidents"]
    counts = {k: int(n) for k, n in conn.execute(_COUNTS, (sorted(keys),)).fetchall()}
    return Rarity(counts.pop("#incidents", 1), counts)


def _picking(rarity: Rarity, keys: Iterable[str]) -> list[str]:
    """The query's rarest keys, the ones that pick candidates. A common key is not left out (an incident with
    no logs has only common pod reasons to go on): `key_limits` bounds what it reads, its low weight what it
    adds."""
    return sorted(keys, key=lambda k: (-rarity.idf(k), k))[:PICKING_KEYS]


def _picking_keys(q: Candidate, rarity: Rarity) -> tuple[list[str], list[float], list[int]]:
    """The picking keys, most telling (by weight) first, with their weights and how many rows each reads."""
    keys = _picking(rarity, q.patterns) + _picking(rarity, [reason_key(r) for r in q.reasons])
    weighted = sorted(
        ((signature_weight(k, rarity, q.error_patterns), k) for k in keys), key=lambda w: (-w[0], w[1])
    )
    ordered = [k for _w, k in weighted]
    return ordered, [w for w, _k in weighted], key_limits(ordered, rarity.df)


def recall(
    conn: psycopg.Connection,
    query: str | Candidate,
    *,
    k: int = 5,
    groups: Sequence[frozenset[str]] = (),
    now: datetime | None = None,
    embed: Embedder | None = None,
) -> list[Hit]:
    """Concurrent and historical incidents like the query, each with its reasons, visible to its channel.

    The query is a thread, whose stored profile is read, or a profile the caller built from the thread's
    own facts (the agent's recall at an alert's open reads its round's facts too); the channel is the
    profile's, never a caller's. With `embed` (an embedding endpoint the service configured), the
    discussions of the query and of the visible candidates are read and compared by their vectors too
    (`schemas/recall_embedding.py`); without it nothing more is read."""
    q, counted_with = _counted_profile(conn, query) if isinstance(query, str) else (query, None)
    channels = visible_channels(q.channel, groups)
    if not channels:
        return []
    rarity = counted_with or _rarity(conn, q)  # a built profile's counts: read once it may see anything
    rows = conn.execute(_CANDIDATES, candidate_params(q, rarity, channels)).fetchall()
    found = [short_candidate_of(r) for r in rows]
    counted = {k: int(n) for r in rows if r[-1] for k, n in r[-1].items()}
    allowed = [c for c in found if may_see(q.channel, c.channel, c.private, groups)]
    if embed is not None:
        q, allowed = embedded(conn, q, allowed, embed)
    if now is not None and q.opened_at is None:
        q = Candidate(**{**q.__dict__, "opened_at": now.timestamp()})
    cause_rarity = _open_counted(conn, q, allowed, Rarity(rarity.total, {**counted, **rarity.df}))
    ordered = sorted(allowed, key=lambda c: c.thread_ts)
    picked = pick(q, ordered, rarity, k=k, window_s=WINDOW_S, cause_rarity=cause_rarity)
    return explained(q, picked, rarity, _explainable(conn, q, [p[2] for p in picked]))


def _open_counted(
    conn: psycopg.Connection, q: Candidate, candidates: Sequence[Candidate], rarity: Rarity
) -> Rarity:
    """`rarity` with the counts of the keys of the candidates open beside the query (the candidate query
    reads them for those open by time; one more round trip only for an uncounted key left, e.g. of an incident
    open for longer than OPEN_AT_MOST). Whether two open incidents share a cause weighs
    both sides' error patterns and reasons: an uncounted key would weigh as the rarest there is, and a
    reason most of the fleet shows would hide the one both share."""
    open_now = [c for c in candidates if overlaps(q, c, WINDOW_S)]
    missing = sorted({k for c in open_now for k in weighed_keys(c)} - rarity.df.keys())
    if not missing:
        return rarity
    counts = {k: int(n) for k, n in conn.execute(_COUNTS, (missing,)).fetchall()}
    return Rarity(rarity.total, {**rarity.df, **counts})


def candidate_params(q: Candidate, rarity: Rarity, channels: Sequence[str]) -> dict[str, Any]:
    """The parameters of `_CANDIDATES` for the query profile `q`, seen from `channels`."""
    keys, weights, limits = _picking_keys(q, rarity)
    return {
        "lexemes": sorted(q.lexemes), "channels": list(channels), "own": q.channel, "thread": q.thread_ts,
        "keys": keys, "weights": weights, "limits": limits,
        "label": label_key(q.labels.get("alertname"), q.labels.get("service")),
        "opened": q.opened_at, "longest": OPEN_AT_MOST,
    }  # fmt: skip


def _explainable(conn: psycopg.Connection, q: Candidate, picked: Sequence[Candidate]) -> dict[str, Candidate]:
    """The picked (short) candidates with what their reasons quote; a hit removed between the two reads is
    left out, so it is not shown."""
    short = {c.thread_ts: c for c in picked}
    params = {"errors": sorted(q.error_patterns), "threads": list(short)}
    return {
        thread: replace(
            short[thread],
            patterns={**short[thread].patterns, **(counts or {})},
            reasons=dict(reasons or {}),
            decisions=(last,) if last else (),
        )
        for thread, counts, reasons, last in conn.execute(_EXPLAINED, params).fetchall()
    }


def hits_json(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    return [
        {"thread": h.thread_ts, "kind": h.kind, "score": h.score, "reasons": list(h.reasons)} for h in hits
    ]
